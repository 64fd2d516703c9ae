"""`agent-registry harness hook <harness> <event>` for each harness (issue 23): the real
command as a subprocess, the harness's own event JSON on stdin (the shapes measured with
the real CLIs, /work/notes/harness-facts.md, and Cursor's and OpenCode's documented
ones), in a real git repository; each answer read in that harness's own format."""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from helpers import CLI, git
from test_guard import agents, hold, open_registry  # noqa: F401  (fixture)

HARNESSES = ["claude", "codex", "gemini", "cursor", "opencode"]
NATIVE = "0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"
PROVIDERS = {"claude": "Claude", "codex": "Codex", "gemini": "Gemini", "cursor": "Cursor",
             "opencode": "OpenCode"}


def hook(repo: Path, harness: str, event: str, payload: dict | str, *args: str,
         env: dict | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    raw = payload if isinstance(payload, str) else json.dumps(payload)
    clean = {k: v for k, v in os.environ.items() if k != "AGENT_REGISTRY_ALLOW"
             and not k.endswith("_PROJECT_DIR")}  # as a harness sets them, or not at all
    return subprocess.run([CLI, "harness", "hook", harness, event, *args], cwd=cwd or repo,
                          input=raw, capture_output=True, text=True,
                          env={**clean, **(env or {})}, timeout=120)


def base(harness: str, repo: Path, name: str, native: str = NATIVE) -> dict:
    """The fields every event of *harness* carries."""
    if harness == "cursor":
        return {"conversation_id": native, "generation_id": "g1", "hook_event_name": name,
                "workspace_roots": [str(repo)]}
    if harness == "opencode":
        return {"sessionID": native, "cwd": str(repo)}
    return {"session_id": native, "transcript_path": "/tmp/t.jsonl", "cwd": str(repo),
            "hook_event_name": name}


def patch(*lines: str) -> str:
    return "\n".join(["*** Begin Patch", *lines, "*** End Patch", ""])


def edit(harness: str, repo: Path, rel: str) -> dict:
    """The harness's own edit tool writing *rel*."""
    absolute = str(repo / rel)
    tool = {"claude": {"tool_name": "Write", "tool_input": {"file_path": absolute, "content": "x"}},
            "codex": {"tool_name": "apply_patch", "tool_input": {
                "command": patch(f"*** Update File: {rel}", "@@", "-a", "+b")}},
            "gemini": {"tool_name": "write_file",
                       "tool_input": {"file_path": absolute, "content": "x"}},
            "cursor": {"tool_name": "Write", "tool_input": {"file_path": absolute}},
            "opencode": {"tool": "write", "args": {"filePath": absolute, "content": "x"}}}
    return {**base(harness, repo, "PreToolUse" if harness != "cursor" else "preToolUse"),
            **tool[harness]}


def shell(harness: str, repo: Path, command: str) -> dict:
    """The harness's own shell tool running *command*."""
    if harness == "cursor":
        return {**base(harness, repo, "beforeShellExecution"), "command": command,
                "cwd": str(repo)}
    tool = {"claude": ("Bash", "tool_input"), "codex": ("Bash", "tool_input"),
            "gemini": ("run_shell_command", "tool_input"), "opencode": ("bash", "args")}[harness]
    key = "tool" if harness == "opencode" else "tool_name"
    return {**base(harness, repo, "PreToolUse"), key: tool[0], tool[1]: {"command": command}}


def verdict(harness: str, proc: subprocess.CompletedProcess) -> str | None:
    """The deny reason in the harness's answer, or None when the call goes on."""
    assert proc.returncode == 0, proc.stderr
    if harness == "opencode":
        answer = json.loads(proc.stdout)
        return answer["reason"] if answer["deny"] else None
    if not proc.stdout.strip():
        return None
    answer = json.loads(proc.stdout)
    if harness in ("claude", "codex"):
        out = answer["hookSpecificOutput"]
        assert out["hookEventName"] == "PreToolUse" and out["permissionDecision"] == "deny"
        return out["permissionDecisionReason"]
    if harness == "gemini":
        assert answer["decision"] == "deny"
        return answer["reason"]
    if harness == "cursor" and answer == {}:
        return None  # Cursor always gets a JSON object; no permission: its own flow
    assert answer["permission"] == "deny" and answer["user_message"]
    return answer["agent_message"]


def context_of(harness: str, proc: subprocess.CompletedProcess, event: str) -> str:
    """The text a session-start or prompt-submit answer adds to the agent's context."""
    assert proc.returncode == 0, proc.stderr
    if not proc.stdout.strip():
        return ""
    answer = json.loads(proc.stdout)
    if harness == "opencode":
        return answer.get("context", "")
    if harness == "cursor":
        return answer.get("additional_context", "")
    out = answer["hookSpecificOutput"]
    names = {"session-start": "SessionStart",
             "user-prompt-submit": "BeforeAgent" if harness == "gemini" else "UserPromptSubmit"}
    assert out["hookEventName"] == names[event]
    return out["additionalContext"]


def kept_going(harness: str, proc: subprocess.CompletedProcess) -> str | None:
    """The text an end-of-turn answer hands the agent to keep it going, or None."""
    assert proc.returncode == 0, proc.stderr
    if not proc.stdout.strip():
        return None
    answer = json.loads(proc.stdout)
    if harness == "cursor":
        return answer.get("followup_message")
    if harness == "opencode":
        return answer.get("continue")
    assert answer["decision"] == "block"
    return answer["reason"]


@pytest.fixture
def held(repo, agents):
    """*repo* where kimi-1, a live session, holds src/auth.py."""
    hold(repo, "kimi-1", ["src/auth.py"], agents(), working_on="auth refactor")
    return repo


@pytest.mark.parametrize("harness", HARNESSES)
def test_a_free_edit_goes_on_and_a_held_one_is_denied_naming_the_holder(held, harness):
    assert verdict(harness, hook(held, harness, "pre-tool-use", edit(harness, held, "README.md"))) is None
    reason = verdict(harness, hook(held, harness, "pre-tool-use",
                                   edit(harness, held, "src/auth.py")))
    assert reason and "src/auth.py" in reason and "kimi-1" in reason and "auth refactor" in reason
    assert f"agent-registry send --to kimi-1 --from {harness}-{NATIVE} 'TEXT'" in reason


@pytest.mark.parametrize("harness", HARNESSES)
def test_a_shell_write_to_a_held_path_is_denied(held, harness):
    git(held, "config", "alias.co", "checkout")
    for command in ("echo x >> src/auth.py", "cd src && sed -i s/1/2/ auth.py",
                    "bash -lc 'cat > src/auth.py <<EOF\nx\nEOF'", "gzip src/auth.py",
                    "timeout --signal KILL 5 rm src/auth.py", "env -C src rm auth.py",
                    "bash <<'EOF'\nrm -f src/auth.py\nEOF", "tar -xzf release.tgz",
                    "git checkout main", "git pull --rebase", "git co main",
                    "npx prettier@3 --write src/auth.py", "uv run ruff format src",
                    "python3 -m black src/auth.py"):
        reason = verdict(harness, hook(held, harness, "pre-tool-use",
                                       shell(harness, held, command)))
        assert reason and "kimi-1" in reason, command
    for command in ("cat src/auth.py", "echo x > notes.txt", "tar -xf a.tar -C /tmp/x",
                    "npx prettier --check src",
                    "git switch -c topic",
                    "git commit -m \"$(cat <<'EOF'\nfix: don't stop\nEOF\n)\""):
        assert verdict(harness, hook(held, harness, "pre-tool-use",
                                     shell(harness, held, command))) is None, command
    # git -C: the whole tree of the repository it names (this one, by its own name too)
    other = held.parent / "other"
    subprocess.run(["git", "init", "-q", str(other)], check=True)
    for command, denied in ((f"git -C {held} pull", True), ("git -C src pull", True),
                            (f"git -C {other} pull", False), ("git -C ../other pull", False)):
        reason = verdict(harness, hook(held, harness, "pre-tool-use",
                                       shell(harness, held, command)))
        assert bool(reason) is denied, command
    # a write the gate cannot follow fails closed while a path is held (tests/test_backstop.py)
    for command in ("echo $X > $F", "echo 'unclosed"):
        reason = verdict(harness, hook(held, harness, "pre-tool-use", shell(harness, held, command)))
        assert reason and "cannot name" in reason and "kimi-1" in reason, command


def test_codex_patch_envelopes_are_read_relative_to_cwd(held):
    def gate(patch_text: str, cwd: Path = held) -> str | None:
        event = {**base("codex", cwd, "PreToolUse"), "tool_name": "apply_patch",
                 "tool_input": {"command": patch_text}}
        return verdict("codex", hook(held, "codex", "pre-tool-use", event, cwd=cwd))
    assert gate(patch("*** Add File: src/new.py", "+x = 1")) is None
    assert gate(patch("*** Update File: README.md", "@@", "-project", "+p")) is None
    assert "kimi-1" in gate(patch("*** Update File: src/auth.py", "@@", "-a", "+b"))
    assert "kimi-1" in gate(patch("*** Add File: src/new.py", "+x", "*** Delete File: src/auth.py"))
    assert "kimi-1" in gate(patch("*** Update File: README.md", "*** Move to: src/auth.py",
                                  "@@", "-a", "+b"))
    assert "kimi-1" in gate(patch("*** Update File: auth.py", "@@", "-a", "+b"), cwd=held / "src")
    # the envelope piped into apply_patch through the shell tool
    heredoc = "apply_patch <<'EOF'\n" + patch("*** Update File: src/auth.py", "@@", "-a", "+b") + "EOF"
    assert "kimi-1" in verdict("codex", hook(held, "codex", "pre-tool-use",
                                             shell("codex", held, heredoc)))


@pytest.mark.parametrize("harness", ["claude", "gemini", "cursor", "opencode"])
def test_tools_that_write_nothing_get_no_decision(held, harness):
    event = {"claude": {"tool_name": "Read", "tool_input": {"file_path": str(held / "src/auth.py")}},
             "gemini": {"tool_name": "read_file", "tool_input": {"file_path": str(held / "src/auth.py")}},
             "cursor": {"tool_name": "Read", "tool_input": {"file_path": str(held / "src/auth.py")}},
             "opencode": {"tool": "read", "args": {"filePath": str(held / "src/auth.py")}}}[harness]
    proc = hook(held, harness, "pre-tool-use", {**base(harness, held, "PreToolUse"), **event})
    assert verdict(harness, proc) is None


def test_auto_claim_claims_the_files_a_patch_writes(held):
    event = {**base("codex", held, "PreToolUse"), "tool_name": "apply_patch",
             "tool_input": {"command": patch("*** Add File: lib/a[1].py", "+x",
                                             "*** Update File: README.md", "@@", "-a", "+b")}}
    assert verdict("codex", hook(held, "codex", "pre-tool-use", event, "--auto-claim")) is None
    sid = f"codex-{NATIVE}"
    with open_registry(held) as registry:
        assert registry.session(sid).provider == "Codex"
        states = registry.check([":(literal)lib/a[1].py", "README.md"], sid=sid)
        assert [s["state"] for s in states] == ["locked-by-me", "locked-by-me"]


@pytest.mark.parametrize("harness", HARNESSES)
def test_session_life_cycle(repo, run, agents, harness):
    """Start registers <harness>-<native id> bound to the given pid; a message sent
    meanwhile reaches the agent once; the end of a turn heartbeats; the end finishes."""
    agent = agents()
    hold(repo, "kimi-1", ["docs/"], agents(), working_on="the docs")
    sid = f"{harness}-{NATIVE}"
    start = hook(repo, harness, "session-start",
                 {**base(harness, repo, "SessionStart"), "source": "startup", "model": "m-1"},
                 "--pid", str(agent))
    text = context_of(harness, start, "session-start")
    assert f"you are session {sid}" in text and "kimi-1" in text and "the docs" in text
    with open_registry(repo) as registry:
        session = registry.session(sid)
    assert session.live and session.provider == PROVIDERS[harness] and session.pid == agent
    assert session.ai_version == "m-1"

    sent = run("send", "--from", "kimi-1", "--to", sid, "may I take src/?", check_untouched=False)
    assert sent.returncode == 0, sent.stderr
    prompt = {**base(harness, repo, "UserPromptSubmit"), "prompt": "go on"}
    first = context_of(harness, hook(repo, harness, "user-prompt-submit", prompt),
                       "user-prompt-submit")
    if harness == "cursor":  # Cursor cannot add context at a prompt: the stop hook wakes
        assert first == ""
        woken = kept_going(harness, hook(repo, harness, "stop",
                                         {**base(harness, repo, "stop"), "status": "completed"},
                                         "--wake"))
        assert "may I take src/?" in woken
    else:
        assert "may I take src/?" in first and "kimi-1" in first
        again = hook(repo, harness, "user-prompt-submit", prompt)
        assert "may I take src/?" not in context_of(harness, again, "user-prompt-submit")

    def beats() -> int:  # heartbeat commits, on whichever registry ref the layout puts them
        return git(repo, "log", "--format=%s", "--branches=agent-registry*").count(
            f"heartbeat {sid} ")
    before = beats()
    stop = hook(repo, harness, "stop", {**base(harness, repo, "Stop"), "stop_hook_active": False})
    assert stop.returncode == 0 and stop.stdout.strip() in ("", "{}"), stop.stderr
    assert beats() == before + 1

    with open_registry(repo) as registry:
        registry.claim(sid, ["src/"])
    end = hook(repo, harness, "session-end", {**base(harness, repo, "SessionEnd"), "reason": "exit"})
    assert end.returncode == 0 and end.stdout.strip() in ("", "{}"), end.stderr
    with open_registry(repo) as registry:
        assert registry.session(sid).status == "Finished"
        assert registry.check(["src/a.py"])[0]["state"] == "free"


@pytest.mark.parametrize("harness", HARNESSES)
def test_wake_keeps_the_agent_going_at_most_n_times_per_turn(repo, run, agents, harness):
    hold(repo, "kimi-1", ["docs/"], agents())
    sid = f"{harness}-{NATIVE}"
    assert hook(repo, harness, "session-start", base(harness, repo, "SessionStart")).returncode == 0
    stop_event = {**base(harness, repo, "Stop"), "stop_hook_active": False}

    def stop(*args: str) -> str | None:
        return kept_going(harness, hook(repo, harness, "stop", stop_event, *args))

    def send(text: str) -> None:
        assert run("send", "--from", "kimi-1", "--to", sid, text,
                   check_untouched=False).returncode == 0

    assert stop("--wake", "2") is None  # nothing waits
    send("first question")
    assert stop() is None  # without --wake: only the heartbeat
    woken = stop("--wake", "2")
    assert woken.startswith("agent-registry: before you stop") and "first question" in woken
    assert stop("--wake", "2") is None  # each message is handed over once
    send("second question")
    assert "second question" in stop("--wake", "2")
    send("third question")
    assert stop("--wake", "2") is None  # twice this turn already
    # the prompt a wake made (Gemini submits it again) tells what waits, but does not
    # start a new turn
    repeat = {**base(harness, repo, "UserPromptSubmit"), "prompt": woken}
    told = context_of(harness, hook(repo, harness, "user-prompt-submit", repeat),
                      "user-prompt-submit")
    assert ("third question" in told) == (harness != "cursor")
    send("fourth question")
    assert stop("--wake", "2") is None
    # a person's prompt does: the count restarts
    prompt = {**base(harness, repo, "UserPromptSubmit"), "prompt": "next task"}
    told = context_of(harness, hook(repo, harness, "user-prompt-submit", prompt),
                      "user-prompt-submit")
    if harness == "cursor":  # no context at a prompt: what waits comes at the next stop
        assert told == "" and "fourth question" in stop("--wake", "2")
    else:
        assert "fourth question" in told
        send("fifth question")
        assert "fifth question" in stop("--wake", "2")


def test_wake_takes_a_number_with_a_sign(repo, run, agents):
    """`--wake -0` is 0 (no wake), as `--wake 0`: click, which takes what starts with
    `-` after an option whose value may be left out for the next option, must not read
    it as an unknown option `-0`; `--wake -1` is a bad value of --wake, in one line, exit 2."""
    hold(repo, "kimi-1", ["docs/"], agents())
    sid = f"claude-{NATIVE}"
    assert hook(repo, "claude", "session-start", base("claude", repo, "SessionStart")).returncode == 0
    stop_event = {**base("claude", repo, "Stop"), "stop_hook_active": False}
    assert run("send", "--from", "kimi-1", "--to", sid, "a question",
               check_untouched=False).returncode == 0
    for args in (["--wake", "-0"], ["--wake=-0"], ["--wake", "-0", "--hold", "0"]):
        assert kept_going("claude", hook(repo, "claude", "stop", stop_event, *args)) is None, args
    bad = hook(repo, "claude", "stop", stop_event, "--wake", "-1")
    assert (bad.returncode, bad.stdout) == (2, "")
    assert bad.stderr == ("agent-registry harness hook: Invalid value for '--wake': -1 is not "
                          "in the range x>=0. (see --help)\n")
    assert "a question" in kept_going("claude", hook(repo, "claude", "stop", stop_event,
                                                     "--wake", "5"))


@pytest.mark.parametrize("harness", HARNESSES)
def test_an_edit_gate_that_cannot_decide_blocks_in_one_line(repo, tmp_path, harness):
    for payload, cwd, why in (("not json", repo, "not JSON"),
                              (json.dumps(edit(harness, tmp_path, "a.py")), tmp_path,
                               "not a git repository")):
        proc = hook(repo, harness, "pre-tool-use", payload, cwd=cwd)
        assert proc.returncode == 2 and proc.stdout == ""
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and why in lines[0] and "AGENT_REGISTRY_ALLOW=1" in lines[0]
        allowed = hook(repo, harness, "pre-tool-use", payload, cwd=cwd,
                       env={"AGENT_REGISTRY_ALLOW": "1"})
        assert allowed.returncode == 0 and "allowed unchecked" in allowed.stderr
    # the other events never block
    proc = hook(repo, harness, "stop", "not json")
    assert proc.returncode == 1 and len(proc.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("harness", ["codex", "gemini"])
def test_an_unreadable_registry_denies_unless_allowed(held, harness):
    ref = held / ".git" / "refs" / "heads" / "agent-registry"
    ref.write_text("1" * 40 + "\n")  # the branch names a commit that is not there
    reason = verdict(harness, hook(held, harness, "pre-tool-use", edit(harness, held, "README.md")))
    assert reason and "unreadable" in reason and "AGENT_REGISTRY_ALLOW=1" in reason
    allowed = hook(held, harness, "pre-tool-use", edit(harness, held, "README.md"),
                   env={"AGENT_REGISTRY_ALLOW": "1"})
    assert verdict(harness, allowed) is None and "allowed unchecked" in allowed.stderr


def test_a_turn_end_of_an_unknown_session_names_the_closest_live_ones(held):
    proc = hook(held, "codex", "stop", base("codex", held, "Stop", native="never-started"))
    assert proc.returncode == 0 and proc.stdout == ""
    assert "unknown session codex-never-started; live sessions: kimi-1" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_claude_exports_the_session_for_its_shell(repo, tmp_path):
    env_file = tmp_path / "claude-env"
    start = hook(repo, "claude", "session-start", base("claude", repo, "SessionStart"),
                 env={"CLAUDE_ENV_FILE": str(env_file)})
    assert "exported as AGENT_REGISTRY_SESSION" in context_of("claude", start, "session-start")
    assert env_file.read_text() == f"export AGENT_REGISTRY_SESSION=claude-{NATIVE}\n"
    codex = hook(repo, "codex", "session-start", base("codex", repo, "SessionStart"))
    assert f"pass --session codex-{NATIVE}" in context_of("codex", codex, "session-start")


def test_auto_claim_for_an_ended_session_is_denied_naming_the_live_ones(held):
    sid = f"claude-{NATIVE}"
    assert hook(held, "claude", "session-start", base("claude", held, "SessionStart")).returncode == 0
    with open_registry(held) as registry:
        registry.finish(sid)
    reason = verdict("claude", hook(held, "claude", "pre-tool-use", edit("claude", held, "new.py"),
                                    "--auto-claim"))
    assert reason and f"could not claim new.py before the edit: session {sid} has ended" in reason
    assert f"session {sid} has ended; live sessions: kimi-1" in reason


@pytest.mark.parametrize("harness, variable", [("claude", "CLAUDE_PROJECT_DIR"),
                                               ("gemini", "GEMINI_PROJECT_DIR")])
def test_a_shell_that_went_outside_the_repository_is_judged_by_the_project(held, tmp_path,
                                                                          harness, variable):
    """Claude Code's cwd follows a `cd`: outside the repository, the project the harness
    started in still decides, and a command that writes nothing needs no repository."""
    outside = tmp_path / "elsewhere"
    outside.mkdir()

    def gate(payload: dict, env: dict) -> subprocess.CompletedProcess:
        return hook(held, harness, "pre-tool-use", {**payload, "cwd": str(outside)},
                    env=env, cwd=outside)
    project = {variable: str(held)}
    assert verdict(harness, gate(shell(harness, held, f"cd {held}"), {})) is None
    assert "kimi-1" in verdict(harness, gate(edit(harness, held, "src/auth.py"), project))
    assert "kimi-1" in verdict(harness, gate(shell(harness, held, f"touch {held}/src/auth.py"),
                                             project))
    assert verdict(harness, gate(shell(harness, held, "echo x > local.txt"), project)) is None
    # no project said, nothing to judge by: blocked
    assert gate(edit(harness, held, "src/auth.py"), {}).returncode == 2


def test_a_directory_or_glob_written_by_the_shell_covers_the_held_files_in_it(held):
    for command in ("rm -rf src", "rm src/*.py", "cp -r /tmp/x/. src/", "git checkout -- src/"):
        reason = verdict("claude", hook(held, "claude", "pre-tool-use", shell("claude", held, command)))
        assert reason and "src/auth.py" in reason and "kimi-1" in reason, command
    assert verdict("claude", hook(held, "claude", "pre-tool-use",
                                  shell("claude", held, "rm -rf docs"))) is None


def test_opencode_patch_tools_are_read_as_envelopes_or_unified_diffs(held):
    def gate(text: str) -> str | None:
        event = {**base("opencode", held, ""), "tool": "patch", "args": {"patchText": text}}
        return verdict("opencode", hook(held, "opencode", "pre-tool-use", event))
    assert "kimi-1" in gate(patch("*** Update File: src/auth.py", "@@", "-a", "+b"))
    assert "kimi-1" in gate("--- a/src/auth.py\n+++ b/src/auth.py\n@@ -1 +1 @@\n-a\n+b\n")
    assert gate("--- /dev/null\n+++ b/src/new.py\n@@ -0,0 +1 @@\n+x\n") is None


# the harnesses whose hooks run around a tool call, the tool of the next call (for OpenCode
# a read, which the backstop takes no note of: its plugin runs the after-tool hook only
# when the gate asks) and the after-tool event (OpenCode's plugin names none)
NEXT_CALL = {"claude": ("Bash", "PostToolUse"), "codex": ("Bash", "PostToolUse"),
             "gemini": ("run_shell_command", "AfterTool"),
             "qwen": ("run_shell_command", "PostToolUse"),
             "copilot": ("Bash", "PostToolUse"), "opencode": ("read", None)}


def next_tool_call(harness: str, repo: Path) -> tuple[str, str]:
    """One tool call as *harness* makes it, its before- and after-tool hooks run as the
    real command; (what the pre-tool answer tells the model, what the after-tool one
    does), each read in the harness's own format."""
    tool, post = NEXT_CALL[harness]
    if harness == "opencode":
        event = {**base(harness, repo, ""), "tool": tool, "callID": "c1",
                 "args": {"filePath": str(repo / "README.md")}}
    else:
        event = {**base(harness, repo, "BeforeTool" if harness == "gemini" else "PreToolUse"),
                 "tool_name": tool, "tool_input": {"command": "ls"}, "tool_use_id": "t1"}
    pre = hook(repo, harness, "pre-tool-use", event)
    assert pre.returncode == 0, pre.stderr
    before = ""
    if harness == "opencode":
        answer = json.loads(pre.stdout)
        assert answer["deny"] is False and "context" not in answer
        if answer.get("after") is not True:  # the plugin runs no after-tool hook then
            return "", ""
    elif pre.stdout.strip():
        out = json.loads(pre.stdout)["hookSpecificOutput"]
        assert harness == "claude" and out["hookEventName"] == "PreToolUse"
        assert "permissionDecision" not in out
        before = out["additionalContext"]
    after = hook(repo, harness, "post-tool-use",
                 {**event, "hook_event_name": post} if post else event)
    assert after.returncode == 0, after.stderr
    if not after.stdout.strip():
        return before, ""
    answer = json.loads(after.stdout)
    if harness == "opencode":
        return before, answer["context"]  # appended to the tool's output
    if harness == "claude":  # the reason handed to the model
        assert answer["decision"] == "block" and "hookSpecificOutput" not in answer
        return before, answer["reason"]
    # Codex's decision: block would replace the tool's output: context goes beside it
    assert harness in ("codex", "gemini", "qwen") and "decision" not in answer, answer
    out = answer["hookSpecificOutput"]  # beside, or appended to, the tool's result
    assert out["hookEventName"] == post
    return before, out["additionalContext"]


@pytest.mark.parametrize("harness", list(NEXT_CALL))
def test_a_persons_high_message_is_told_at_the_next_tool_call_once(repo, run, harness):
    """A person's high-importance message reaches the session at its next tool call, once:
    Claude Code's before it runs (PreToolUse additionalContext), the others' in their
    after-tool answer, where the backstop tells too (Copilot CLI's would replace the
    tool's result: there it waits for the prompt); a normal one waits for the prompt
    (issue 36)."""
    sid = f"{harness}-{NATIVE}"
    start = hook(repo, harness, "session-start", base(harness, repo, "SessionStart"),
                 "--pid", str(os.getpid()))
    assert start.returncode == 0, start.stderr
    assert next_tool_call(harness, repo) == ("", "")
    normal = json.loads(run("--json", "send", "--from", "alice", "--to", sid, "lunch at 1?",
                            check_untouched=False).stdout)["id"]
    assert next_tool_call(harness, repo) == ("", "")  # a normal message waits for the prompt
    high = json.loads(run("--json", "send", "--from", "alice", "--to", sid, "--importance",
                          "high", "--ack-required", "stop: the API changed",
                          check_untouched=False).stdout)["id"]
    before, after = next_tool_call(harness, repo)
    told, elsewhere = (before, after) if harness == "claude" else (after, before)
    assert elsewhere == ""  # in one answer
    if harness == "copilot":
        assert told == ""
    else:
        assert f"{high} HIGH message from alice (a person): stop: the API changed" in told
        assert f"agent-registry ack {high}" in told and normal not in told
    assert next_tool_call(harness, repo) == ("", "")  # told once
    prompt = {**base(harness, repo, "BeforeAgent" if harness == "gemini" else
                     "UserPromptSubmit"), "prompt": "go on"}
    proc = hook(repo, harness, "user-prompt-submit", prompt)
    later = json.loads(proc.stdout)["additionalContext"] if harness == "copilot" else \
        context_of(harness, proc, "user-prompt-submit")
    assert normal in later and (high in later) == (harness == "copilot")


def test_a_high_message_waiting_for_copilot_leaves_its_after_tool_hook_quick(repo, run):
    """Copilot CLI cannot be told after a tool call (its block would replace the tool's
    result), so a high message marked for it does not send its after-tool hook past the
    quick path (harness/after.py) to the whole hook, which would tell nothing: the
    adapter is never imported, and the message waits for the prompt."""
    import sys

    from test_import_budget import LAUNCHER
    sid = f"copilot-{NATIVE}"
    start = hook(repo, "copilot", "session-start", base("copilot", repo, "SessionStart"),
                 "--pid", str(os.getpid()))
    assert start.returncode == 0, start.stderr
    high = json.loads(run("--json", "send", "--from", "alice", "--to", sid, "--importance",
                          "high", "stop: the API changed", check_untouched=False).stdout)["id"]
    event = {**base("copilot", repo, "PostToolUse"), "tool_name": "bash",
             "tool_input": {"command": "ls"}, "tool_use_id": "t1"}
    proc = subprocess.run([sys.executable, "-X", "importtime", "-c", LAUNCHER, "harness",
                           "hook", "copilot", "post-tool-use"], cwd=repo,
                          input=json.dumps(event), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout == "", proc.stderr[-2000:]
    names = {line.split("|")[2].strip() for line in proc.stderr.splitlines()
             if line.startswith("import time:") and "|" in line}
    assert "agent_registry.harness.after" in names  # the quick path ran
    assert "agent_registry.harness.copilot" not in names  # and settled it
    prompt = {**base("copilot", repo, "UserPromptSubmit"), "prompt": "go on"}
    later = json.loads(hook(repo, "copilot", "user-prompt-submit", prompt).stdout)
    assert high in later["additionalContext"]


def test_the_quick_path_knows_the_harnesses_told_after_a_tool_call():
    """harness/after.py names them without importing the adapters: the same ones."""
    from agent_registry.harness.after import TELLS_AFTER_TOOL
    from agent_registry.harness.hook import HARNESSES, adapter
    assert TELLS_AFTER_TOOL == {h for h in HARNESSES if adapter(h).tells_after_tool}


def test_the_quick_path_says_nothing_as_each_adapter_does():
    """harness/after.py keeps each harness's answer that says nothing without importing
    the adapters (the after-tool hook's quick path may not): each adapter's empty()."""
    from agent_registry.harness.after import SAYS_NOTHING
    from agent_registry.harness.hook import HARNESSES, adapter
    from agent_registry.store.jsontext import dumps
    assert SAYS_NOTHING == {h: dumps(adapter(h).empty()) for h in HARNESSES
                            if adapter(h).empty() is not None}


@pytest.mark.parametrize("harness", HARNESSES)
def test_an_after_tool_hook_with_nothing_noted_answers_as_the_whole_hook(repo, harness):
    """The quick path settles an after-tool event no note was taken for, without the
    adapter, in the harness's own format: what the whole hook answers (Cursor's `{}`)."""
    import sys

    from test_import_budget import LAUNCHER

    from agent_registry.harness.hook import adapter
    from agent_registry.store.jsontext import dumps
    event = {**base(harness, repo, "postToolUse" if harness == "cursor" else "PostToolUse"),
             "cwd": str(repo), "tool_name": "Write", "tool_input": {"file_path": "a"},
             "tool": "write", "args": {"filePath": "a"}, "tool_use_id": "t1"}
    proc = subprocess.run([sys.executable, "-X", "importtime", "-c", LAUNCHER, "harness",
                           "hook", harness, "post-tool-use"], cwd=repo,
                          input=json.dumps(event), capture_output=True, text=True, timeout=120)
    empty = adapter(harness).empty()
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout == (dumps(empty) + "\n" if empty is not None else "")
    names = {line.split("|")[2].strip() for line in proc.stderr.splitlines()
             if line.startswith("import time:") and "|" in line}
    assert "agent_registry.harness.after" in names  # the quick path ran
    assert not any(n.startswith("agent_registry.harness.") and n.endswith(
        ("adapter", f".{harness}", "opencode_hook")) for n in names), names  # and settled it


def claude_in_clone_a(tmp_path):
    """Two clones, a and b, and a Claude Code session started in a (synced): (a, b, its
    session id)."""
    from test_messages import clones
    a, b = clones(tmp_path, 2)
    start = hook(a.cwd, "claude", "session-start", base("claude", a.cwd, "SessionStart"),
                 "--pid", str(os.getpid()))
    assert start.returncode == 0, start.stderr
    assert a("sync").returncode == 0
    return a, b, f"claude-{NATIVE}"


@pytest.mark.parametrize("fetching", [("sync",), ("inbox", "s0")])
def test_a_high_message_from_another_clone_is_told_at_the_next_tool_call_once(
        tmp_path, fetching):
    """A person's high message sent from clone B is marked in clone A by the first
    command there that fetches it (``sync``, another session's ``inbox``), so Claude
    Code's PreToolUse hook in A, which never fetches, tells it before the next tool
    call, once (issue 36)."""
    a, b, sid = claude_in_clone_a(tmp_path)
    repo = a.cwd
    high = json.loads(b("--json", "send", "--from", "alice", "--to", sid, "--importance",
                        "high", "stop: the API changed").stdout)["id"]
    assert next_tool_call("claude", repo) == ("", "")  # not fetched yet: no hook fetches
    assert a(*fetching).returncode == 0
    before, after = next_tool_call("claude", repo)
    assert f"{high} HIGH message from alice (a person): stop: the API changed" in before
    assert after == ""
    assert a(*fetching).returncode == 0  # fetched again: not marked twice
    assert next_tool_call("claude", repo) == ("", "")


def test_the_record_of_marked_messages_keeps_only_what_waits(tmp_path):
    """The record of what was marked (store/urgent.py) does not only grow: after a fetch,
    a message acknowledged, and one sent to a session of another clone, are no longer
    in it, a message still waiting is, and none of them is marked again (issue 35)."""
    from agent_registry.store.urgent import RECORD, folder
    a, b, sid = claude_in_clone_a(tmp_path)
    repo = a.cwd
    sent = [json.loads(b("--json", "send", "--from", "alice", "--to", sid, "--importance",
                         "high", text).stdout)["id"] for text in ("first", "second")]
    elsewhere = json.loads(a("--json", "send", "--from", "alice", "--to", "s1",
                             "--importance", "high", "to clone B").stdout)["id"]
    assert a("sync").returncode == 0
    record = os.path.join(folder(str(repo / ".git")), RECORD)

    def recorded() -> set[str]:
        with open(record, encoding="utf-8") as f:
            return set(f.read().split())

    assert set(sent) <= recorded() and elsewhere not in recorded()
    before, _ = next_tool_call("claude", repo)
    assert all(mid in before for mid in sent)
    assert a("ack", "--session", sid, sent[0]).returncode == 0
    assert a("sync").returncode == 0
    assert sent[1] in recorded() and sent[0] not in recorded()
    assert a("sync").returncode == 0
    assert next_tool_call("claude", repo) == ("", "")  # nothing marked again
