"""End to end: the installed ``agent-registry`` command in subprocesses, as agents run it.

The ``run`` fixture asserts after every command that the user's working tree, index and
HEAD are byte-identical to before.  Exit codes are the contract (README, "Exit codes"):
0 done, 1 refused or not found, 2 bad input (nothing written).
"""
from __future__ import annotations

import json
import os
import subprocess
import threading
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

import agent_registry
from helpers import CLI, git, registry_log, registry_ops, registry_refs, user_state

BRANCH = "agent-registry"

SESSION_KEYS = {"id", "provider", "ai_version", "working_on", "status", "project", "repo",
                "git_branch", "host", "pid", "pid_start", "cmdline", "registered_at",
                "heartbeat_at", "finished_at", "todo_past", "todo_present", "todo_future",
                "space", "issues", "handoff", "locks"}


def ref(repo: Path, branch: str = BRANCH) -> str:
    return git(repo, "rev-parse", "--verify", "-q", f"refs/heads/{branch}", check=False).strip()


def refs(repo: Path, branch: str = BRANCH) -> dict[str, str]:
    """Every registry branch's tip: the main one, its lock shards, the clone refs."""
    return registry_refs(repo, branch)


def ok(proc: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert proc.returncode == 0, (proc.args, proc.stdout, proc.stderr)
    return proc


def as_json(proc: subprocess.CompletedProcess) -> dict:
    return json.loads(proc.stdout)


def one_line_error(proc: subprocess.CompletedProcess, code: int) -> str:
    assert proc.returncode == code, (proc.args, proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("agent-registry"), proc.stderr
    return lines[0]


@pytest.fixture
def sleeper():
    """A real process standing for an agent; reaped at once when it dies."""
    proc = subprocess.Popen(["sleep", "300"])
    threading.Thread(target=proc.wait, daemon=True).start()
    yield proc
    proc.kill()


# -- sessions -------------------------------------------------------------------------

def test_register_both_forms_and_show(run, repo):
    out = as_json(ok(run("--json", "register", "kimi-1", "Kimi", "2.7", "Refactoring auth")))
    assert {"session"} <= set(out) and SESSION_KEYS <= set(out["session"])
    assert (out["session"]["id"], out["session"]["provider"], out["session"]["ai_version"],
            out["session"]["working_on"], out["session"]["status"]) == \
        ("kimi-1", "Kimi", "2.7", "Refactoring auth", "OnWorking")
    assert out["session"]["project"] == str(repo.resolve())
    printed = ok(run("register", "claude-1", "--provider", "Claude", "--ai-version", "4",
                     "--working-on", "tests", "--space", "tests/,src/x.py",
                     "--todo-present", "a,b")).stdout
    assert printed == "claude-1\n"
    shown = as_json(ok(run("--json", "show", "claude-1")))
    assert [s["id"] for s in shown["sessions"]] == ["claude-1"]
    assert shown["sessions"][0]["space"] == ["tests/", "src/x.py"]
    assert shown["sessions"][0]["todo_present"] == ["a", "b"]
    text = ok(run("show")).stdout
    assert "kimi-1  OnWorking  Kimi 2.7" in text and "claude-1  OnWorking  Claude 4" in text
    assert "working on:   Refactoring auth" in text


def test_register_makes_up_an_id_and_the_env_var_is_the_default_elsewhere(run, repo):
    sid = ok(run("register", "--provider", "Gemini CLI", "--working-on", "docs")).stdout.strip()
    assert sid.startswith("geminicli-")
    env = {"AGENT_REGISTRY_SESSION": sid}
    ok(run("lock", "acquire", "src/auth.py", env=env))
    assert as_json(ok(run("--json", "lock", "check", "src/auth.py", env=env)))["paths"][0]["state"] \
        == "locked-by-me"
    ok(run("update", "--working-on", "docs and tests", env=env))
    ok(run("lock", "heartbeat", env=env))
    ok(run("lock", "release", "src/auth.py", env=env))
    out = as_json(ok(run("--json", "finish", env=env)))
    assert out["session"]["id"] == sid and out["session"]["status"] == "Finished"
    # register with the variable set and no SID makes a new id: the variable is never
    # reused (it may name another agent's live session: issue 24)
    env = {"AGENT_REGISTRY_SESSION": "from-env-1"}
    new = ok(run("register", "--provider", "Kimi", env=env))
    assert new.stdout.startswith("kimi-") and "is not reused" in new.stderr


def test_update_handoff_context_finish(run, repo):
    ok(run("register", "s1", "--provider", "Kimi"))
    out = as_json(ok(run("--json", "update", "s1", "--working-on", "auth", "--todo-past", "a,b",
                         "--todo-future", "c", "--issues", "#3")))
    assert {"session"} <= set(out)
    assert (out["session"]["working_on"], out["session"]["todo_past"],
            out["session"]["todo_future"], out["session"]["issues"]) == ("auth", ["a", "b"], ["c"], "#3")
    out = as_json(ok(run("--json", "handoff", "s1", "docs/handoff.md")))
    assert out["session"]["handoff"] == "docs/handoff.md"
    out = as_json(ok(run("--json", "context", "log", "s1", "extracted the token manager")))
    assert {"session", "path", "line"} <= set(out) and out["path"] == "contexts/s1.md"
    assert out["line"].endswith("Z extracted the token manager")
    shown = ok(run("context", "show", "s1")).stdout
    assert shown.startswith("# Diary of s1") and out["line"] in shown
    ok(run("lock", "acquire", "src/a.py", "src/b.py", "--session", "s1"))
    out = as_json(ok(run("--json", "finish", "s1")))
    assert {"session", "released"} <= set(out) and sorted(out["released"]) == ["src/a.py", "src/b.py"]
    assert ok(run("finish", "s1")).stdout == "s1 Finished (had already ended)\n"
    assert as_json(ok(run("--json", "finish", "s1")))["already"] is True
    one_line_error(run("update", "s1", "--working-on", "x"), 1)
    one_line_error(run("handoff", "s1", "x.md"), 1)


def test_handoff_document_outside_the_repository_is_refused(run, repo):
    """A handoff document is a path of the repository, checked as `lock acquire` checks
    one: outside it (absolute or ../), the error names it, exit 2, nothing written."""
    ok(run("register", "s1", "--provider", "Kimi"))
    ok(run("lock", "acquire", "src/auth.py", "--session", "s1"))
    before = refs(repo)
    for args in (("/etc/passwd",), ("../x",), ("--text", "over to you", "../x"),
                 ("--text", "over to you", "--to-path", "src/auth.py", "/etc/passwd")):
        line = one_line_error(run("handoff", "s1", *args), 2)
        bad = next(a for a in args if a in ("/etc/passwd", "../x"))
        assert line == f"agent-registry: path {bad!r} is outside the repository", line
        assert refs(repo) == before, args
    assert as_json(ok(run("--json", "show", "s1")))["sessions"][0]["handoff"] == ""
    # inside it, from a folder, the path is kept as the repository names it
    (repo / "docs").mkdir()
    out = as_json(ok(run("--json", "handoff", "s1", "./notes.md", cwd=repo / "docs")))
    assert out["session"]["handoff"] == "docs/notes.md"


def test_status_table_and_filters(run, repo):
    ok(run("register", "kimi-1", "Kimi", "2.7", "auth"))
    ok(run("register", "claude-1", "Claude", "4", "tests"))
    ok(run("finish", "claude-1"))
    table = ok(run("status")).stdout
    header = table.splitlines()[0].split()
    assert header == ["SESSION", "PROVIDER", "PROJECT", "WORKING", "ON", "STATUS", "AGE"]
    assert "kimi-1" in table and "claude-1" not in table
    assert table.rstrip().splitlines()[-1] == "sync: off (no remote configured)"
    out = as_json(ok(run("--json", "status")))
    assert {"sessions", "sync"} <= set(out) and out["sync"]["enabled"] is False

    def ids(*args):
        return [s["id"] for s in as_json(ok(run("--json", "status", *args)))["sessions"]]

    assert ids() == ["kimi-1"]
    assert ids("--all") == ["kimi-1", "claude-1"]
    assert ids("--status", "Finished") == ["claude-1"]
    assert ids("--provider", "claude", "--all") == ["claude-1"]
    assert ids("--project", str(repo.resolve())) == ["kimi-1"]
    assert ids("--project", "/nowhere") == []
    assert "no sessions" in ok(run("status", "--project", "/nowhere")).stdout


# -- locks ----------------------------------------------------------------------------

def test_lock_commands_and_their_json(run, repo):
    ok(run("register", "a", "--provider", "Kimi", "--working-on", "auth"))
    ok(run("register", "b", "--provider", "Claude"))
    out = as_json(ok(run("--json", "lock", "acquire", "src/auth.py", "src/oauth/", "--session", "a")))
    assert {"session", "locks"} <= set(out) and out["session"] == "a"
    assert all({"path", "status", "mode", "generation", "previous"} <= set(l) for l in out["locks"])
    assert [(l["path"], l["status"], l["mode"]) for l in out["locks"]] == \
        [("src/auth.py", "acquired", "exclusive"), ("src/oauth/", "acquired", "exclusive")]
    assert ok(run("lock", "acquire", "src/auth.py", "--session", "a")).stdout == "renewed: src/auth.py\n"

    refused = run("lock", "acquire", "src/oauth/x.py", "--session", "b")
    line = one_line_error(refused, 1)
    assert "src/oauth/x.py is locked by a (via src/oauth/)" in line and "working on: auth" in line
    err = as_json(run("--json", "lock", "acquire", "src/auth.py", "--session", "b"))["error"]
    assert err["code"] == 1 and "locked by a" in err["message"]
    assert [(c["path"], c["owner"], c["target"], c["mode"]) for c in err["conflicts"]] == \
        [("src/auth.py", "a", "src/auth.py", "exclusive")]
    assert {"path", "target", "owner", "working_on", "since", "mode"} <= set(err["conflicts"][0])

    checked = run("--json", "lock", "check", "src/auth.py", "src/oauth/deep.py", "README.md",
                  "--session", "b")
    assert checked.returncode == 1  # another session holds one: the predecessor's exit 1
    out = as_json(checked)
    assert [p["state"] for p in out["paths"]] == ["locked", "locked", "free"]
    assert {"path", "state", "target", "owner", "mode", "working_on",
                                    "since", "age_seconds", "stale_reason"} <= set(out["paths"][0])
    assert out["paths"][2] == {"path": "README.md", "state": "free"}
    text = ok(run("lock", "check", "src/auth.py", "--session", "a")).stdout
    assert text.startswith("locked-by-me: src/auth.py by a (auth), ")

    out = as_json(ok(run("--json", "lock", "list")))
    assert [(l["path"], l["owner"]) for l in out["locks"]] == [("src/auth.py", "a"), ("src/oauth/", "a")]
    assert {"path", "owner", "mode", "working_on", "since", "age_seconds",
                                    "ttl", "generation", "stale_reason"} <= set(out["locks"][0])
    assert "PATH" in ok(run("lock", "list")).stdout.splitlines()[0]

    out = as_json(ok(run("--json", "lock", "heartbeat", "--session", "a")))
    assert {"session", "heartbeat_at", "locks"} <= set(out) and out["locks"] == 2

    one_line_error(run("lock", "release", "src/auth.py", "--session", "b"), 1)
    out = as_json(ok(run("--json", "lock", "release", "src/auth.py", "--session", "a")))
    assert out == {"session": "a", "locks": [{"path": "src/auth.py", "status": "released"}]}

    line = one_line_error(run("lock", "force-release", "src/oauth/", "--reason", "stuck"), 1)
    assert "--force" in line
    out = as_json(ok(run("--json", "lock", "force-release", "src/oauth/", "--force",
                         "--reason", "agent a hung", "--by", "alice")))
    [told] = out.pop("told")  # the holder a, still live, is sent a message
    assert told["session"] == "a" and told["id"]
    assert out == {"path": "src/oauth/", "previous": ["a"], "was_fresh": True, "by": "alice",
                   "reason": "agent a hung"}
    [(_, message)] = registry_ops(repo, "force-release")  # src/oauth/: one shard's record
    assert "Registry-By: alice" in message and "Registry-Reason: agent a hung" in message
    assert "no locks" in ok(run("lock", "list")).stdout


def test_shared_locks_from_the_cli(run):
    for sid in ("r1", "r2", "w"):
        ok(run("register", sid, "--provider", "Kimi"))
    ok(run("lock", "acquire", "--shared", "docs/", "--session", "r1"))
    out = as_json(ok(run("--json", "lock", "acquire", "--shared", "docs/", "--session", "r2")))
    assert out["locks"][0]["mode"] == "shared"
    one_line_error(run("lock", "acquire", "docs/a.md", "--session", "w"), 1)


def test_paths_are_relative_to_the_current_directory(run, repo):
    ok(run("register", "a", "--provider", "Kimi"))
    out = as_json(ok(run("--json", "lock", "acquire", "auth.py", "--session", "a", cwd=repo / "src")))
    assert out["locks"][0]["path"] == "src/auth.py"
    out = as_json(ok(run("--json", "lock", "acquire", "./src", "--session", "a")))
    assert out["locks"][0]["path"] == "src/"


def test_cleanup_and_kill(run, repo, sleeper):
    dead = subprocess.Popen(["sleep", "300"])
    ok(run("register", "zombie", "--provider", "Kimi", "--pid", str(dead.pid)))
    ok(run("register", "victim", "--provider", "Kimi", "--pid", str(sleeper.pid)))
    ok(run("lock", "acquire", "src/a.py", "--session", "zombie"))
    ok(run("lock", "acquire", "src/b.py", "--session", "victim"))
    dead.kill()
    dead.wait()
    out = as_json(ok(run("--json", "cleanup")))
    assert [(s["session"], s["released"]) for s in out["stopped"]] == [("zombie", ["src/a.py"])]
    assert {"session", "reason", "released"} <= set(out["stopped"][0])
    assert ok(run("cleanup")).stdout == "no zombie sessions\n"

    out = as_json(ok(run("--json", "kill", "victim")))
    assert {"session", "released", "signal"} <= set(out)
    assert out["signal"] == "SIGTERM" and out["released"] == ["src/b.py"]
    assert out["session"]["status"] == "Killed"
    sleeper.wait(timeout=10)
    one_line_error(run("kill", "victim"), 1)
    one_line_error(run("kill", "nobody"), 1)
    statuses = {s["id"]: s["status"] for s in as_json(ok(run("--json", "status", "--all")))["sessions"]}
    assert statuses == {"zombie": "Stop", "victim": "Killed"}


def test_heartbeat_loop_ends_with_its_agent(run, repo, sleeper):
    ok(run("register", "a", "--provider", "Kimi", "--pid", str(sleeper.pid)))
    ok(run("lock", "acquire", "src/auth.py", "--session", "a"))
    assert registry_ops(repo, "heartbeat") == []
    loop = subprocess.Popen([CLI, "lock", "heartbeat-loop", "--session", "a", "--interval", "1"],
                            cwd=repo, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # wait for the loop's first heartbeat commit before the agent dies
        for _ in range(600):
            if registry_ops(repo, "heartbeat"):
                break
            threading.Event().wait(0.05)
        sleeper.kill()
        out, err = loop.communicate(timeout=60)
    finally:
        loop.kill()
    assert loop.returncode == 0, err
    assert out == f"heartbeat-loop stopped: the process {sleeper.pid} of session a is gone\n"
    assert "heartbeat a (1 lock(s))" in [m.split("\n")[0] for _, m in registry_ops(repo, "heartbeat")]


# -- exit codes and bad input ---------------------------------------------------------

BAD_INPUT = [
    ("lock", "acquire", "../x", "--session", "s"),
    ("lock", "acquire", "/etc/passwd", "--session", "s"),
    ("lock", "acquire", "src/a\x01.py", "--session", "s"),
    ("lock", "acquire", "src/a\x1b[31m.py", "--session", "s"),
    ("lock", "acquire", "", "--session", "s"),
    ("lock", "acquire", ".git/config", "--session", "s"),
    ("lock", "acquire", "src/ok.py", "--session", "../../evil"),
    ("lock", "acquire", "src/ok.py", "--session", "s", "--ttl", "0"),
    ("lock", "release", "../x", "--session", "s"),
    ("lock", "check", "/etc/passwd"),
    ("lock", "force-release", "../x", "--force", "--reason", "r"),
    ("lock", "force-release", "src/auth.py", "--force"),
    ("register", "../../evil", "--provider", "Kimi"),
    ("register", "evil", "--provider", "Kimi", "--working-on", "a\x07b"),
    ("register", "s2", "Kimi", "2.7"),
    ("register", "s2"),
    ("register", "s2", "--provider", "Kimi", "--pid", "999999999"),
    ("update", "../../evil", "--working-on", "x"),
    ("update", "s", "--status", "Sleeping"),
    ("update", "s"),
    ("finish", "../../evil"),
    ("handoff", "s", ""),
    ("handoff", "s", "/etc/passwd"),
    ("handoff", "s", "../x"),
    ("handoff", "s", "--text", "t", "--to", "s", "../x"),
    ("context", "log", "s", "   "),
    ("context", "log", "../../evil", "x"),
    ("show", "../../evil"),
    ("kill", "../../evil"),
    ("no-such-command",),
    ("lock", "acquire", "src/a.py", "--no-such-option"),
    ("finish",),
]


def test_bad_input_exits_2_and_writes_nothing(run, repo):
    ok(run("register", "s", "--provider", "Kimi"))
    ok(run("lock", "acquire", "src/auth.py", "--session", "s"))
    before = refs(repo)
    for args in BAD_INPUT:
        one_line_error(run(*args), 2)
        err = as_json(run("--json", *args, check_untouched=False))["error"]
        assert err["code"] == 2 and err["message"], args
        assert refs(repo) == before, args
    assert not (repo.parent / "evil").exists() and not (repo / "evil").exists()
    assert as_json(ok(run("--json", "lock", "list")))["locks"][0]["path"] == "src/auth.py"


def test_bad_input_on_a_repo_without_registry_creates_no_branch(run, repo):
    one_line_error(run("register", "../../evil", "--provider", "Kimi"), 2)
    one_line_error(run("lock", "acquire", "../x", "--session", "s"), 2)
    assert refs(repo) == {}


NOT_FOUND = [
    ("lock", "acquire", "src/a.py", "--session", "ghost"),
    ("lock", "release", "src/a.py", "--session", "ghost"),
    ("lock", "heartbeat", "--session", "ghost"),
    ("lock", "check", "src/a.py", "--session", "ghost"),
    ("update", "ghost", "--working-on", "x"),
    ("finish", "ghost"),
    ("show", "ghost"),
    ("handoff", "ghost", "h.md"),
    ("context", "log", "ghost", "x"),
    ("lock", "force-release", "src/free.py", "--force", "--reason", "r"),
]


def test_unknown_session_or_lock_exits_1(run, repo):
    ok(run("register", "s", "--provider", "Kimi"))
    before = refs(repo)
    for args in NOT_FOUND:
        one_line_error(run(*args), 1)
        assert as_json(run("--json", *args, check_untouched=False))["error"]["code"] == 1, args
        assert refs(repo) == before, args


def test_quiet_prints_nothing_and_help_and_version_work(run):
    ok(run("register", "s", "--provider", "Kimi"))
    proc = ok(run("-q", "lock", "acquire", "src/a.py", "--session", "s"))
    assert proc.stdout == "" and proc.stderr == ""
    assert "Usage:" in ok(run("--help")).stdout
    assert ok(run("--version")).stdout == f"agent-registry, version {agent_registry.__version__}\n"


def test_the_help_lists_every_exit_code(run):
    """A reviewer's finding: `--help` listed 0-3 and left out 70 (a bug), which an agent
    must never read as 1 (held)."""
    from agent_registry.errors import BAD_INPUT, CRASHED, REFUSED, UNCONFIRMED
    text = " ".join(ok(run("--help")).stdout.split())
    for code, meaning in ((0, "done"), (REFUSED, "refused or not found"),
                          (BAD_INPUT, "bad input"), (UNCONFIRMED, "done locally"),
                          (CRASHED, "an internal error")):
        assert f"{code} {meaning}" in text, (code, text)


# -- configuration --------------------------------------------------------------------

def test_git_config_branch(run, repo):
    git(repo, "config", "agent-registry.branch", "coordination")
    ok(run("register", "s", "--provider", "Kimi"))
    ok(run("lock", "acquire", "src/auth.py", "--session", "s"))
    # the main branch and its 16 lock shards under that name, none under the default
    assert sorted(refs(repo, "coordination")) == sorted(
        ["refs/heads/coordination"] + [f"refs/heads/coordination-shards/{i:02d}" for i in range(16)])
    assert refs(repo) == {}
    assert "`git log coordination`" in git(repo, "show", "coordination:README.md")
    assert [(l["path"], l["owner"]) for l in as_json(ok(run("--json", "lock", "list")))["locks"]] \
        == [("src/auth.py", "s")]
    assert "claim src/auth.py by s" in [m.split("\n")[0] for _, m in registry_log(repo, "coordination")]


def test_init_creates_the_branch_and_saves_another_name(run, repo):
    out = as_json(ok(run("--json", "init")))
    assert out == {"branch": BRANCH, "created": True, "layout": {"format": 3, "shards": 16},
                   "pushed": None, "adopted": None}
    made = refs(repo)
    assert len(made) == 17  # the main branch and its 16 lock shards
    assert as_json(ok(run("--json", "init")))["created"] is False
    assert refs(repo) == made
    assert ok(run("init", "--branch", "team/registry")).stdout == \
        "created branch team/registry (16 lock shards with clone refs, layout format 3)\n"
    assert git(repo, "config", "agent-registry.branch").strip() == "team/registry"
    assert len(refs(repo, "team/registry")) == 17
    ok(run("register", "s", "--provider", "Kimi"))
    assert [s["id"] for s in as_json(ok(run("--json", "status")))["sessions"]] == ["s"]
    assert "register s" in git(repo, "log", "--format=%s", "team/registry")
    assert refs(repo) == made  # the old name's registry was left alone
    one_line_error(run("init", "--branch", "bad..name"), 2)


def test_display_time_zone(run, repo):
    registered = as_json(ok(run("--json", "register", "s", "--provider", "Kimi")))["session"]["registered_at"]
    assert registered.endswith("Z")
    moment = datetime.fromisoformat(registered.replace("Z", "+00:00"))
    for zone in ("Asia/Tokyo", "America/New_York"):
        local = moment.astimezone(ZoneInfo(zone)).strftime("%Y-%m-%d %H:%M:%S %Z")
        shown = ok(run("show", "s", env={"AGENT_REGISTRY_TZ": zone})).stdout
        assert f"registered:   {local}" in shown
    utc = moment.strftime("%Y-%m-%d %H:%M:%S UTC")
    assert f"registered:   {utc}" in ok(run("show", "s")).stdout
    # stored times stay UTC whatever the display zone
    ok(run("update", "s", "--working-on", "x", env={"AGENT_REGISTRY_TZ": "Asia/Tokyo"}))
    stored = git(repo, "show", f"{BRANCH}:sessions/live/s.yaml")
    assert 'heartbeat_at: "' in stored and 'Z"' in stored


def test_a_fresh_repository_without_commits(run, tmp_path):
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    git(fresh, "init", "-q")
    (fresh / "notes.txt").write_text("untracked\n")
    ok(run("register", "s", "--provider", "Kimi", cwd=fresh))
    ok(run("lock", "acquire", "notes.txt", "--session", "s", cwd=fresh))
    out = as_json(run("--json", "lock", "check", "notes.txt", cwd=fresh))
    assert out["paths"][0]["owner"] == "s"
    assert git(fresh, "rev-parse", "--verify", "-q", "HEAD", check=False) == ""
    assert git(fresh, "status", "--porcelain") == "?? notes.txt\n"
    ok(run("finish", "s", cwd=fresh))


def test_two_worktrees_see_each_other_at_once(run, repo, tmp_path):
    one, two = tmp_path / "wt-one", tmp_path / "wt-two"
    git(repo, "worktree", "add", "-q", str(one))
    git(repo, "worktree", "add", "-q", "-b", "feature", str(two))
    ok(run("register", "kimi-1", "Kimi", "2.7", "auth", cwd=one))
    ok(run("register", "claude-1", "Claude", "4", "tests", cwd=two))
    ok(run("lock", "acquire", "src/auth.py", "--session", "kimi-1", cwd=one))
    line = one_line_error(run("lock", "acquire", "src/auth.py", "--session", "claude-1", cwd=two), 1)
    assert "locked by kimi-1" in line
    sessions = {s["id"]: s for s in as_json(ok(run("--json", "status", cwd=two)))["sessions"]}
    assert sessions["kimi-1"]["project"] == str(one.resolve())
    assert sessions["claude-1"]["project"] == str(two.resolve())
    assert sessions["claude-1"]["git_branch"] == "feature"
    out = as_json(ok(run("--json", "lock", "check", "src/auth.py", "--session", "kimi-1", cwd=one)))
    assert out["paths"][0]["state"] == "locked-by-me"
    ok(run("finish", "kimi-1", cwd=one))
    ok(run("lock", "acquire", "src/auth.py", "--session", "claude-1", cwd=two))
    assert as_json(ok(run("--json", "lock", "list")))["locks"][0]["owner"] == "claude-1"


def test_dash_c_runs_as_if_in_path(run, repo, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    before = user_state(repo)
    ok(run("-C", str(repo), "register", "s", "--provider", "Kimi", cwd=elsewhere, check_untouched=False))
    out = as_json(ok(run("-C", str(repo / "src"), "--json", "lock", "acquire", "auth.py",
                         "--session", "s", cwd=elsewhere, check_untouched=False)))
    assert out["locks"][0]["path"] == "src/auth.py"
    assert user_state(repo) == before
    assert ref(repo)
    one_line_error(run("-C", str(elsewhere), "status", cwd=elsewhere, check_untouched=False), 2)
    one_line_error(run("-C", str(tmp_path / "missing"), "status", cwd=elsewhere,
                       check_untouched=False), 2)


def test_the_demo_runs_and_cleans_up(tmp_path):
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    env = {**os.environ, "TMPDIR": str(scratch),
           "PATH": f"{Path(CLI).parent}{os.pathsep}{os.environ['PATH']}"}
    from helpers import ROOT
    proc = subprocess.run(["bash", str(ROOT / "demo" / "demo.sh")], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    winner = "kimi-1" if "-> kimi-1 won" in proc.stdout else "claude-1"
    loser = "claude-1" if winner == "kimi-1" else "kimi-1"
    assert f"-> {winner} won; {loser} was refused" in proc.stdout
    assert f"src/auth.py is locked by {winner}" in proc.stdout
    assert f"claim src/auth.py by {loser}" in proc.stdout.split("The audit trail")[1]
    assert list(scratch.iterdir()) == []  # its temporary directory is gone


def test_context_log_takes_the_session_from_the_environment_or_an_option(run, repo):
    assert run("register", "k-1", "--provider", "Kimi", "--working-on", "diary").returncode == 0
    by_env = run("context", "log", "from the variable", env={"AGENT_REGISTRY_SESSION": "k-1"})
    assert by_env.returncode == 0, by_env.stderr
    assert run("context", "log", "from the option", "--session", "k-1").returncode == 0
    assert run("context", "log", "k-1", "as before").returncode == 0
    diary = run("context", "show", "k-1").stdout
    assert all(t in diary for t in ("from the variable", "from the option", "as before"))
    alone = run("context", "log", "no session anywhere")
    assert alone.returncode == 2 and len(alone.stderr.strip().splitlines()) == 1
    split = run("context", "log", "k-1", "two", "words")
    assert split.returncode == 2 and "quote the text" in split.stderr


def test_a_claim_renewed_or_released_by_its_generation_is_refused_once_taken_over(run, repo):
    assert run("register", "k-1", "--provider", "Kimi", "--working-on", "a").returncode == 0
    first = json.loads(run("--json", "lock", "acquire", "src/a.py", "--session", "k-1").stdout)
    old = first["locks"][0]["generation"]
    assert run("lock", "force-release", "src/a.py", "--force", "--reason", "stuck").returncode == 0
    again = json.loads(run("--json", "lock", "acquire", "src/a.py", "--session", "k-1").stdout)
    new = again["locks"][0]["generation"]
    assert new != old
    for args in (["acquire"], ["release"]):  # the first claim's holder renews or releases
        late = run("lock", *args, "src/a.py", "--session", "k-1", "--generation", old)
        assert late.returncode == 1, late.stderr
        assert f"generation {old} is gone" in late.stderr and f"generation {new} is held" in late.stderr
    assert json.loads(run("--json", "lock", "list").stdout)["locks"][0]["generation"] == new
    renewed = run("--json", "lock", "acquire", "src/a.py", "--session", "k-1", "--generation", new)
    assert renewed.returncode == 0 and json.loads(renewed.stdout)["locks"][0]["status"] == "renewed"
    assert run("lock", "release", "src/a.py", "--session", "k-1", "--generation", new).returncode == 0
    bad = run("lock", "release", "src/a.py", "src/b.py", "--session", "k-1", "--generation", new)
    assert bad.returncode == 2 and "one per path" in bad.stderr


def test_one_size_cap_for_every_text_an_agent_gives(run, repo):
    big = "x" * 70_000  # over 64 KiB, under the kernel's cap on one argument
    assert run("register", "k-1", "--provider", "Kimi", "--working-on", "small").returncode == 0
    before = refs(repo)
    for args in (["register", "k-2", "--provider", "Kimi", "--working-on", big],
                 ["update", "k-1", "--working-on", big],
                 ["context", "log", "k-1", big],
                 ["send", "--from", "k-1", "--all", big],
                 ["end", "k-1", "--what", big]):
        refused = run(*args)
        assert refused.returncode == 2, (args[0], refused.stderr)
        assert "over 64 KiB" in refused.stderr and len(refused.stderr.strip().splitlines()) == 1
    assert refs(repo) == before  # nothing changed
