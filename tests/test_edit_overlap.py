"""Collisions told at the edit (issue 36): the edit gate of every harness warns an agent
about to edit a file another live session changed (committed on its branch, uncommitted in
its worktree, pushed from another clone), naming it; ``--deny-overlap`` refuses the edit;
``lock acquire`` says the same.  Real worktrees and clones, the hook run as a subprocess."""
from __future__ import annotations

import json
import subprocess

from helpers import git
from test_guard import agents  # noqa: F401  (fixture)
from test_harness_hooks import NATIVE, base, edit, hook
from test_overlap import clone_on_feat_c, commit_all, open_at, team  # noqa: F401  (fixture)

SID = f"claude-{NATIVE}"


def started(where, agents, harness: str = "claude") -> None:
    proc = hook(where, harness, "session-start",
                {**base(harness, where, "SessionStart"), "source": "startup"},
                "--pid", str(agents()))
    assert proc.returncode == 0, proc.stderr


def told(harness: str, proc: subprocess.CompletedProcess) -> tuple[str | None, str | None]:
    """(the deny reason, the warning the model is handed) of a pre-tool answer."""
    assert proc.returncode == 0, proc.stderr
    if not proc.stdout.strip():
        return None, None
    answer = json.loads(proc.stdout)
    if answer.get("decision") == "deny":  # Gemini CLI's
        return answer["reason"], None
    out = answer["hookSpecificOutput"]
    assert out["hookEventName"] == ("BeforeTool" if harness == "gemini" else "PreToolUse")
    if out.get("permissionDecision") == "deny":
        return out["permissionDecisionReason"], None
    assert "permissionDecision" not in out  # the harness's own flow goes on
    return None, out["additionalContext"]


def held(where, path: str) -> list[str]:
    with open_at(where) as registry:
        return [lock["owner"] for lock in registry.locks() if lock["path"] == path]


def test_an_edit_of_a_file_committed_on_another_branch_is_told_or_refused(team, agents):
    wa, wb = team["a"], team["b"]
    (wb / "src/auth.py").write_text("auth = 2\n")
    commit_all(wb, "b changes auth")
    started(wa, agents)
    payload = edit("claude", wa, "src/auth.py")

    denied, warning = told("claude", hook(wa, "claude", "pre-tool-use", payload))
    assert denied is None
    assert warning.startswith("agent-registry: src/auth.py was already changed by b1 on "
                              "branch feat-b (committed there)")
    assert f"agent-registry send --to b1 --from {SID}" in warning

    denied, warning = told("claude", hook(wa, "claude", "pre-tool-use", payload,
                                          "--auto-claim", "--deny-overlap"))
    assert warning is None and "--deny-overlap" in denied
    assert "src/auth.py was already changed by b1 on branch feat-b" in denied
    assert held(wa, "src/auth.py") == []  # refused before any claim

    # --auto-claim alone: told, and claimed (a claim does not undo the other's change)
    denied, warning = told("claude", hook(wa, "claude", "pre-tool-use", payload, "--auto-claim"))
    assert denied is None and "b1" in warning
    assert held(wa, "src/auth.py") == [SID]

    # a file nobody else changed: nothing said
    assert told("claude", hook(wa, "claude", "pre-tool-use", edit("claude", wa, "README.md"),
                               "--deny-overlap")) == (None, None)


def test_an_uncommitted_change_in_another_worktree_is_told_in_gemini_and_to_a_claim(
        team, agents, run):
    wa, wb = team["a"], team["b"]
    started(wa, agents, "gemini")
    payload = edit("gemini", wa, "src/billing.py")
    assert told("gemini", hook(wa, "gemini", "pre-tool-use", payload)) == (None, None)
    assert run("overlap", cwd=wa).returncode == 0  # the forecast cached what it saw
    (wb / "src/billing.py").write_text("changed, not committed\n")
    # a claim reads the other worktrees again
    proc = run("lock", "acquire", "src/billing.py", "--session", f"gemini-{NATIVE}", cwd=wa)
    assert proc.returncode == 0, proc.stderr
    assert "src/billing.py was already changed by b1 on branch feat-b (uncommitted in its " \
           "worktree)" in proc.stderr
    # the gate's reading of wt-b is as old as its first question: a commit there (HEAD
    # moved) makes it read again
    commit_all(wb, "b")
    (wb / "src/billing.py").write_text("changed again, not committed\n")
    git(wb, "add", "src/billing.py")
    denied, warning = told("gemini", hook(wa, "gemini", "pre-tool-use", payload,
                                          "--deny-overlap"))
    assert warning is None and "src/billing.py was already changed by b1" in denied


def test_an_agents_own_edit_is_seen_by_the_others_gate_at_once(team, agents):
    """Session b's gate adds what it lets b write to b's worktree reading, so a's gate
    knows before b's file changes, and without waiting for the reading to age."""
    wa, wb = team["a"], team["b"]
    started(wa, agents)
    with open_at(wb) as registry:
        registry.finish("b1")
    other = "0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5c"
    proc = hook(wb, "codex", "session-start",
                {**base("codex", wb, "SessionStart", other), "source": "startup"},
                "--pid", str(agents()))
    assert proc.returncode == 0, proc.stderr
    assert told("claude", hook(wa, "claude", "pre-tool-use",
                               edit("claude", wa, "src/billing.py"))) == (None, None)
    assert told("codex", hook(wb, "codex", "pre-tool-use",
                              {**edit("codex", wb, "src/billing.py"),
                               "session_id": other})) == (None, None)
    denied, warning = told("claude", hook(wa, "claude", "pre-tool-use",
                                          edit("claude", wa, "src/billing.py")))
    assert denied is None and f"src/billing.py was already changed by codex-{other}" in warning


def test_a_branch_pushed_from_another_clone_is_told(team, repo, tmp_path, agents, run):
    clone_on_feat_c(repo, tmp_path, lambda where: (where / "src/auth.py").write_text("a = 3\n"))
    assert run("sync").returncode == 0
    git(repo, "fetch", "-q", "origin")
    started(team["a"], agents)
    denied, warning = told("claude", hook(team["a"], "claude", "pre-tool-use",
                                          edit("claude", team["a"], "src/auth.py")))
    assert denied is None
    assert "src/auth.py was already changed by c1 on branch feat-c (pushed from " in warning


def test_nobody_elsewhere_costs_no_forecast_and_an_untouched_file_no_git(team, agents,
                                                                         tmp_path):
    wa = team["a"]
    started(wa, agents)
    with open_at(wa) as registry:
        registry.finish("b1")
    payload = edit("claude", wa, "src/auth.py")
    proc = hook(wa, "claude", "pre-tool-use", payload, env={"PYTHONPROFILEIMPORTTIME": "1"})
    assert proc.returncode == 0 and "agent_registry.forecast.gate" in proc.stderr
    assert "agent_registry.forecast.edits" not in proc.stderr
    with open_at(team["b"]) as registry:
        registry.register("b2", provider="Kimi")
    git(wa, "config", "agent-registry.editFreshness", "3600")
    ran = []
    for n in (1, 2):
        trace = tmp_path / f"trace{n}"
        proc = hook(wa, "claude", "pre-tool-use", payload, env={"GIT_TRACE": str(trace)})
        assert proc.returncode == 0 and proc.stdout == ""
        ran.append([line.split("git", 1)[-1] for line in trace.read_text().splitlines()
                    if "merge-tree" in line or " status " in line])
    assert [" status " in line for line in ran[0]] == [True]  # b2's worktree read once
    assert ran[1] == []  # then the reading is kept


def test_a_bad_edit_freshness_is_said_in_one_line_naming_the_key(team, agents):
    """``agent-registry.editFreshness`` that is not a number of seconds is bad input,
    said in one line naming the key (it silently became 5 s): the edit gate says it
    could not look, and with --deny-overlap refuses, as when it cannot tell."""
    wa = team["a"]
    started(wa, agents)
    git(wa, "config", "agent-registry.editFreshness", "soon")
    payload = edit("claude", wa, "src/auth.py")
    proc = hook(wa, "claude", "pre-tool-use", payload)
    assert told("claude", proc) == (None, None)
    [line] = proc.stderr.strip().splitlines()
    assert "agent-registry.editFreshness" in line and "'soon'" in line
    denied, _ = told("claude", hook(wa, "claude", "pre-tool-use", payload, "--deny-overlap"))
    assert denied and "agent-registry.editFreshness" in denied
