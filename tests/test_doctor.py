"""``agent-registry doctor [--fix]`` on real broken setups: hooks removed, another tool's
hook in our place, a hook pointing at a Python that is gone, a corrupt record committed to
the branch, an unreachable remote, a zombie session holding a lock, a remote commit from a
clock that runs ahead, stale harness settings, a wiki index never built.  Each check's
verdict is read, and ``--fix`` must fix what it says it fixes (and nothing else)."""
from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from helpers import git
from test_dashboard_support import agents, commit_raw  # noqa: F401  (agents: a fixture)

PYTHON_LINE = "AGENT_REGISTRY_PYTHON='"


def doctor(run, *args: str, untouched: bool = True) -> tuple[int, dict]:
    """doctor's exit code and JSON; a check never touches the worktree (a fix of the
    harness settings writes theirs: *untouched* False)."""
    proc = run("--json", "doctor", *args, check_untouched=untouched)
    assert proc.returncode in (0, 1) and proc.stdout.startswith("{"), proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def check(report: dict, name: str) -> dict:
    return next(c for c in report["checks"] if c["name"] == name)


def hooks_dir(repo: Path) -> Path:
    return Path(git(repo, "rev-parse", "--path-format=absolute", "--git-path", "hooks").strip())


@pytest.fixture
def synced(pushing, run):
    """A clone with hooks, a bare remote ``origin`` and the registry branch pushed."""
    assert run("sync").returncode == 0
    return pushing


def test_a_healthy_clone_exits_0_with_a_line_per_check(synced, run):
    code, report = doctor(run)
    assert code == 0 and report["healthy"] is True, report
    assert [c["name"] for c in report["checks"]] == [
        "git", "branch", "hooks", "harness", "extras", "sync", "clock", "owners", "stale", "wiki index"]
    assert all(c["status"] == "ok" for c in report["checks"]), report
    assert check(report, "git")["verdict"].startswith("git 2.")
    assert "object format sha1" in check(report, "git")["verdict"]
    assert "origin reachable, 0 ahead, 0 behind, shards ahead 0 of 16" == \
        check(report, "sync")["verdict"]
    text = run("doctor")
    assert text.returncode == 0
    lines = text.stdout.splitlines()
    assert lines[0].startswith("ok    git: git 2.") and lines[-1] == "healthy"
    assert len(lines) == 11


def test_missing_hooks_fail_and_fix_installs_them(repo, run):
    assert run("init").returncode == 0
    code, report = doctor(run)
    hooks = check(report, "hooks")
    assert code == 1 and report["healthy"] is False
    assert hooks["status"] == "fail" and "no agent-registry git hook is installed" in hooks["verdict"]
    assert hooks["fix"] == "agent-registry hooks install" and hooks["fixable"]
    text = run("doctor")
    assert text.returncode == 1 and "fail  hooks: no agent-registry git hook" in text.stdout
    assert "      fix: agent-registry hooks install" in text.stdout
    code, report = doctor(run, "--fix")
    assert code == 0 and report["fixed"] == ["hooks"], report
    assert check(report, "hooks")["status"] == "ok"
    assert (hooks_dir(repo) / "pre-commit").exists()


def test_a_hook_pointing_at_a_python_that_is_gone(guarded, run):
    hook = hooks_dir(guarded) / "pre-commit"
    lines = [f"{PYTHON_LINE}/nowhere/bin/python3'" if line.startswith(PYTHON_LINE) else line
             for line in hook.read_text().splitlines()]
    hook.write_text("\n".join(lines) + "\n")
    code, report = doctor(run)
    assert code == 1
    assert check(report, "hooks")["verdict"] == "pointing at a Python that is gone: pre-commit"
    code, report = doctor(run, "--fix")
    assert code == 0 and report["fixed"] == ["hooks"]
    assert "/nowhere/" not in hook.read_text()


def test_another_tools_hook_is_chained_by_the_fix(repo, run):
    assert run("init").returncode == 0
    theirs = hooks_dir(repo) / "pre-commit"
    theirs.parent.mkdir(parents=True, exist_ok=True)
    theirs.write_text("#!/bin/sh\necho lint\n")
    theirs.chmod(0o755)
    assert run("hooks", "install").returncode == 0
    for name in ("pre-commit", "pre-push"):  # another tool takes our place again
        (hooks_dir(repo) / f"{name}.agent-registry-chained").unlink(missing_ok=True)
        (hooks_dir(repo) / name).write_text("#!/bin/sh\necho theirs\n")
    code, report = doctor(run)
    assert code == 1
    assert check(report, "hooks")["verdict"] == \
        "another tool's hook in our place: pre-commit, pre-push"
    code, report = doctor(run, "--fix")
    assert code == 0, report
    assert check(report, "hooks")["verdict"].endswith("chaining the existing pre-commit, pre-push")
    assert (hooks_dir(repo) / "pre-commit.agent-registry-chained").read_text() == \
        "#!/bin/sh\necho theirs\n"


def test_a_corrupt_record_on_the_branch_is_named_and_not_fixed(guarded, run):
    commit_raw(guarded, {"sessions/live/broken-1.yaml": "id: [unclosed\n"}, "a bad hand edit")
    code, report = doctor(run, "--fix")
    branch = check(report, "branch")
    assert code == 1 and branch["status"] == "fail" and not branch["fixable"]
    assert "records do not parse: sessions/live/broken-1.yaml (" in branch["verdict"]
    assert branch["fix"].startswith("fix or remove them on the branch by hand")
    assert report["fixed"] == []


def test_no_branch_fails_and_fix_runs_init(repo, run):
    code, report = doctor(run)
    assert code == 1 and check(report, "branch")["verdict"] == "no registry branch 'agent-registry' yet"
    assert git(repo, "branch", "--list", "agent-registry") == ""  # a check writes nothing
    code, report = doctor(run, "--fix")
    assert "branch" in report["fixed"] and check(report, "branch")["status"] == "ok"
    assert git(repo, "rev-parse", "--verify", "-q", "refs/heads/agent-registry").strip()


def test_an_unreachable_remote(guarded, run):
    git(guarded, "remote", "add", "origin", "http://127.0.0.1:9/nothing.git")
    code, report = doctor(run, "--fix")
    sync = check(report, "sync")
    assert code == 1 and sync["status"] == "fail" and not sync["fixable"]
    assert sync["verdict"].startswith("origin is unreachable: ")
    assert "127.0.0.1" in sync["verdict"] and "port 9" in sync["verdict"]
    assert "once" in sync["fix"] and "reachable" in sync["fix"]


def test_unpushed_claims_fail_and_fix_pushes_them(synced, run, tmp_path, agents):
    agents.register("kimi-1")
    remote = git(synced, "remote", "get-url", "origin").strip()
    git(synced, "remote", "set-url", "origin", str(tmp_path / "gone.git"))
    assert run("lock", "acquire", "src/auth.py", "--session", "kimi-1").returncode == 3
    git(synced, "remote", "set-url", "origin", remote)
    code, report = doctor(run)
    sync = check(report, "sync")
    assert code == 1 and "1 claim(s) not confirmed by origin: src/auth.py (kimi-1)" in sync["verdict"]
    code, report = doctor(run, "--fix")
    assert code == 0 and report["fixed"] == ["sync"], report
    assert check(report, "sync")["verdict"] == \
        "origin reachable, 0 ahead, 0 behind, shards ahead 0 of 16"
    pushed = json.loads(run("--json", "lock", "check", "src/auth.py").stdout)["paths"][0]
    assert pushed["owner"] == "kimi-1" and pushed["confirmed"] is True


def test_a_zombie_session_holding_a_lock_is_cleaned_up_by_fix(guarded, run, agents):
    agents.register("kimi-1")
    agents.claim("kimi-1", "src/auth.py")
    agents.die("kimi-1")
    code, report = doctor(run)
    stale = check(report, "stale")
    assert code == 1 and stale["fix"] == "agent-registry cleanup"
    assert stale["verdict"].startswith("1 zombie session(s) holding 1 lock(s): kimi-1 (its process")
    code, report = doctor(run, "--fix")
    assert code == 0 and report["fixed"] == ["stale"]
    assert check(report, "stale")["verdict"] == "no zombie sessions, no stale locks"
    locks = json.loads(run("--json", "lock", "check", "src/auth.py").stdout)
    assert locks["paths"][0]["state"] == "free"
    status = json.loads(run("--json", "status", "--all").stdout)  # cleanup stopped it
    [kimi] = [s for s in status["sessions"] if s["id"] == "kimi-1"]
    assert kimi["status"] != "OnWorking", kimi


def test_a_session_without_a_vouched_owner_is_a_warning_only(guarded, run):
    assert run("register", "kimi-1", "--provider", "Kimi", "--working-on", "x").returncode == 0
    code, report = doctor(run)
    owners = check(report, "owners")
    assert code == 0 and owners["status"] == "warn", report
    assert owners["verdict"].startswith("1 of 1 live session(s) have no owner process vouched for (kimi-1)")


def test_a_remote_commit_from_the_future_is_clock_skew(synced, run, registry, clock):
    assert run("register", "kimi-1", "--provider", "Kimi", "--working-on", "x").returncode == 0
    clock.now = time.time() + 3600  # a clone whose clock runs an hour ahead writes next
    registry.context_log("kimi-1", "from the future")
    code, report = doctor(run)
    verdict = check(report, "clock")["verdict"]
    assert code == 1 and verdict.startswith("the newest commit on origin is dated 3")
    assert "s after this machine's clock" in verdict


def test_stale_claude_settings_and_mcp_entry_are_rewritten_by_fix(guarded, run):
    assert run("harness", "install", "claude", "--mcp", check_untouched=False).returncode == 0
    code, report = doctor(run)
    # installed, but Claude Code starts the server only once approved: a warning
    assert code == 0 and check(report, "harness")["status"] == "warn"
    assert check(report, "harness")["verdict"].startswith(
        "installed, not trusted/approved: claude (approve the agent-registry MCP server")
    settings = guarded / ".claude" / "settings.json"
    settings.write_text(settings.read_text().replace("harness hook claude stop",
                                                     "harness hook claude stop --old"))
    mcp = guarded / ".mcp.json"
    mcp.write_text(mcp.read_text().replace('"mcp"', '"mcp-old"'))
    code, report = doctor(run)
    assert code == 1 and check(report, "harness")["verdict"] == "not current: claude hooks, mcp"
    code, report = doctor(run, "--fix", untouched=False)
    assert code == 0 and report["fixed"] == ["harness"]
    assert "--old" not in settings.read_text() and '"mcp-old"' not in mcp.read_text()
    assert run("harness", "install", "claude", "--trust", check_untouched=False).returncode == 0
    code, report = doctor(run)
    assert check(report, "harness") == {"name": "harness", "status": "ok",
                                        "verdict": "current: claude", "fix": None,
                                        "fixable": False}


def test_a_wiki_index_never_built_is_built_by_fix(guarded, run):
    assert run("register", "kimi-1", "--provider", "Kimi", "--working-on", "x").returncode == 0
    assert run("end", "kimi-1", "--what", "auth").returncode == 0
    code, report = doctor(run)
    index = check(report, "wiki index")
    assert code == 0 and index["status"] == "warn"
    assert index["verdict"] == "not built in this clone: the next `wiki query` builds it first"
    code, report = doctor(run, "--fix")
    assert report["fixed"] == ["wiki index"]
    assert check(report, "wiki index")["verdict"].startswith("up to date with ")


def test_bad_input_exits_2(repo, run, tmp_path):
    bad = run("doctor", "--bogus")
    assert bad.returncode == 2
    elsewhere = run("-C", str(tmp_path / "nowhere"), "doctor", check_untouched=False)
    assert elsewhere.returncode == 2 and len(elsewhere.stderr.splitlines()) == 1


def test_a_chained_hook_that_is_not_executable_is_a_warning(repo, run):
    assert run("init").returncode == 0
    theirs = hooks_dir(repo) / "pre-commit"
    theirs.parent.mkdir(parents=True, exist_ok=True)
    theirs.write_text("#!/bin/sh\necho lint\n")  # never made executable
    assert run("hooks", "install").returncode == 0
    code, report = doctor(run)
    hooks = check(report, "hooks")
    assert code == 0 and hooks["status"] == "warn", report
    assert hooks["verdict"].endswith("the chained pre-commit is not executable, so it does "
                                     "not run (as git would not run it)")
    (hooks_dir(repo) / "pre-commit.agent-registry-chained").chmod(0o755)
    assert check(doctor(run)[1], "hooks")["status"] == "ok"


def test_a_lock_record_stored_under_another_name_is_named(guarded, run):
    """A lock record whose target does not match where it is stored goes unseen by every
    lookup of its target (commands treat it as unreadable): doctor says so too."""
    import hashlib
    name = hashlib.sha1(b"src/other.py").hexdigest()
    record = '{"path": "src/auth.py", "mode": "exclusive", "holders": []}\n'
    commit_raw(guarded, {f"locks/{name[:2]}/{name}.json": record}, "a record moved by hand")
    code, report = doctor(run)
    branch = check(report, "branch")
    assert code == 1 and branch["status"] == "fail"
    assert f"locks/{name[:2]}/{name}.json (lock record of 'src/auth.py' stored as" in \
        branch["verdict"]
