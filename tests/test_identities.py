"""Identities (issue 24, item 2): no command turns a session id into a path, none takes
over a live session because a variable was left exported or an id was typed again, and
unknown ids name the live ones likeliest meant.  Real repositories, the real CLI."""
from __future__ import annotations

import json
import subprocess

import pytest

from helpers import Runner, git


def ok(proc):
    assert proc.returncode == 0, proc.stderr
    return proc


def register(run, *args, env=None) -> str:
    return ok(run("register", *args, env=env)).stdout.strip()


def holders(run, path) -> list[str]:
    found = json.loads(run("--json", "lock", "check", path).stdout)["paths"][0]
    return [found["owner"]] if found["state"] != "free" else []


@pytest.fixture
def sleeper():
    """Processes that stand for agents: started, then killed and reaped at the end."""
    procs = []

    def start() -> subprocess.Popen:
        procs.append(subprocess.Popen(["sleep", "300"]))
        return procs[-1]
    yield start
    for proc in procs:
        proc.kill()
        proc.wait()


# -- a trailing SID ---------------------------------------------------------------------

def test_a_mistyped_trailing_id_is_refused_never_locked_as_a_path(run, repo):
    sid = register(run, "--provider", "Kimi", "--working-on", "auth")
    env = {"AGENT_REGISTRY_SESSION": sid}
    for command in (("lock", "acquire", "src/auth.py", "kimi-typo"),
                    ("lock", "release", "src/auth.py", "kimi-typo"),
                    ("lock", "check", "src/auth.py", "kimi-typo"),
                    ("lock", "heartbeat", "src/auth.py", "kimi-typo"),
                    ("lock", "heartbeat", "kimi-typo")):
        for variables in (env, None):  # the exported session never turns it into a path
            refused = run(*command, env=variables)
            assert refused.returncode == 2, (command, variables, refused.stdout)
            assert refused.stdout == ""
            assert f"unknown session kimi-typo; did you mean {sid}?" in refused.stderr
            assert "./kimi-typo" in refused.stderr and len(refused.stderr.splitlines()) == 1
    assert holders(run, "src/auth.py") == [] and holders(run, "kimi-typo") == []
    doc = json.loads(run("--json", "lock", "acquire", "src/auth.py", "kimi-typo",
                         env=env).stdout)["error"]
    assert doc["code"] == 2 and doc["session"] == "kimi-typo" and doc["closest"] == [sid]
    # the id of a registered session still wins, with or without the variable
    other = register(run, "--provider", "Claude")
    assert ok(run("lock", "acquire", "src/auth.py", other, env=env)).stdout == \
        "acquired: src/auth.py\n"
    assert holders(run, "src/auth.py") == [other]
    # a file of that name: an existing one is a path, a new one is written ./NAME
    (repo / "kimi-notes").write_text("notes\n")
    assert ok(run("lock", "acquire", "src/x.py", "kimi-notes", env=env)).stdout == \
        "acquired: src/x.py\nacquired: kimi-notes\n"
    assert ok(run("lock", "acquire", "README.md", "./kimi-typo", env=env)).stdout == \
        "acquired: README.md\nacquired: kimi-typo\n"
    # names that do not read as ids are paths, as before
    assert ok(run("lock", "acquire", "src/a.py", "Makefile", "new_file", env=env)).returncode == 0


def test_heartbeat_loop_with_a_mistyped_id_and_seconds_is_refused(run, repo):
    sid = register(run, "--provider", "Kimi")
    ok(run("lock", "acquire", "src/auth.py", sid))
    refused = run("lock", "heartbeat-loop", "src/auth.py", "kimi-typo", "30",
                  env={"AGENT_REGISTRY_SESSION": sid})
    assert refused.returncode == 2 and f"did you mean {sid}?" in refused.stderr


# -- register -----------------------------------------------------------------------------

def test_register_never_reuses_the_exported_id(run, repo):
    first = register(run, "--provider", "Kimi", "--working-on", "one")
    env = {"AGENT_REGISTRY_SESSION": first}
    # the README's recipe, run twice in one shell
    second = register(run, "--provider", "Claude", "--working-on", "two", env=env)
    assert second != first and second.startswith("claude-")
    shown = {s["id"]: s for s in json.loads(run("--json", "show").stdout)["sessions"]}
    assert (shown[first]["provider"], shown[first]["working_on"]) == ("Kimi", "one")
    assert (shown[second]["provider"], shown[second]["working_on"]) == ("Claude", "two")


def test_registering_a_live_id_from_another_process_is_refused(run, repo, sleeper):
    """The issue's finding: the second process took the session over, and when it
    exited, the first agent's lock was taken over while it still worked."""
    agent, intruder = sleeper(), sleeper()
    ok(run("register", "kimi-1", "--provider", "Kimi", "--working-on", "auth",
           "--pid", str(agent.pid)))
    ok(run("lock", "acquire", "src/auth.py", "kimi-1"))
    refused = run("register", "kimi-1", "--provider", "Claude", "--working-on", "two",
                  "--pid", str(intruder.pid))
    assert refused.returncode == 1 and refused.stdout == ""
    assert "session kimi-1 is live" in refused.stderr and "--resume" in refused.stderr
    assert f"bound to pid {agent.pid}" in refused.stderr
    # the same from a shell with no owner, and in the predecessor's positional form
    assert run("register", "kimi-1", "--provider", "Claude").returncode == 1
    assert run("register", "kimi-1", "Claude", "4", "two").returncode == 1
    intruder.kill()
    intruder.wait()
    ok(run("register", "other-1", "--provider", "Codex"))
    held = run("lock", "acquire", "src/auth.py", "other-1")
    assert held.returncode == 1 and "locked by kimi-1" in held.stderr
    session = json.loads(run("--json", "show", "kimi-1").stdout)["sessions"][0]
    assert (session["provider"], session["working_on"], session["pid"]) == \
        ("Kimi", "auth", agent.pid)
    # its own vouched-for owner may register it again (a harness's second start hook)
    again = ok(run("register", "kimi-1", "--provider", "Kimi", "--working-on", "auth, more",
                   "--pid", str(agent.pid)))
    assert again.stdout == "kimi-1\n"
    # --resume takes it over deliberately
    resumed = sleeper()
    ok(run("register", "kimi-1", "--resume", "--provider", "Kimi", "--pid", str(resumed.pid)))
    session = json.loads(run("--json", "show", "kimi-1").stdout)["sessions"][0]
    assert session["pid"] == resumed.pid and session["locks"] == ["src/auth.py"]
    assert "resume kimi-1" in git(repo, "log", "-1", "--format=%s", "agent-registry")
    # once its vouched-for owner has exited here, nobody is left to take it from
    resumed.kill()
    resumed.wait()
    ok(run("register", "kimi-1", "--provider", "Kimi", "--working-on", "after a restart"))
    assert run("register", "--resume", "--provider", "Kimi").returncode == 2


def test_a_resume_keeps_every_field_it_is_not_given(run, repo):
    """A reviewer's finding: `register SID --resume --provider Kimi` (the README's form)
    emptied the session's working-on, ai-version and space; and a resume required
    --provider, which the session already has."""
    sid = register(run, "--provider", "Kimi", "--ai-version", "2.7", "--working-on",
                   "Refactoring auth", "--space", "src/auth.py", "--todo-present", "tokens",
                   "--tag", "backend")
    ok(run("lock", "acquire", "src/auth.py", sid))
    kept = ("provider", "ai_version", "working_on", "space", "todo_present", "tags", "locks")

    def fields() -> dict:
        session = json.loads(run("--json", "show", sid).stdout)["sessions"][0]
        return {key: session[key] for key in kept}
    before = fields()
    assert before["working_on"] == "Refactoring auth" and before["space"] == ["src/auth.py"]
    ok(run("register", sid, "--resume", "--provider", "Kimi"))
    assert fields() == before
    # without --provider: the session's own; what is given changes, the rest stays
    ok(run("register", sid, "--resume", "--working-on", "Token expiry"))
    assert fields() == {**before, "working_on": "Token expiry"}
    ok(run("register", sid, "--resume", "--space", "src/oauth.py", "--ai-version", "2.8"))
    assert fields() == {**before, "working_on": "Token expiry", "space": ["src/oauth.py"],
                        "ai_version": "2.8"}
    # a resume of no session here has no provider to keep: unknown, nothing written
    tip = git(repo, "rev-parse", "agent-registry")
    unknown = run("register", "kimi-nobody", "--resume")
    assert unknown.returncode == 1 and "unknown session kimi-nobody" in unknown.stderr
    assert git(repo, "rev-parse", "agent-registry") == tip
    # a new id still needs one
    for args in (("register", "kimi-new"), ("register", "kimi-new", "--provider", " "),
                 ("register", sid, "--resume", "--provider", "")):
        refused = run(*args)
        assert refused.returncode == 2 and "--provider is required" in refused.stderr, args


def test_another_clone_cannot_register_a_live_id(tmp_path):
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    a = tmp_path / "a"
    git(tmp_path, "clone", "-q", str(remote), str(a))
    (a / "README.md").write_text("x\n")
    git(a, "add", "-A")
    git(a, "commit", "-q", "-m", "initial")
    git(a, "push", "-q", "origin", "HEAD")
    b = tmp_path / "b"
    git(tmp_path, "clone", "-q", str(remote), str(b))
    in_a, in_b = Runner(a), Runner(b)
    ok(in_a("register", "kimi-1", "--provider", "Kimi", "--working-on", "auth"))
    taken = in_b("register", "kimi-1", "--provider", "Claude", "--working-on", "two")
    assert taken.returncode == 1 and "session kimi-1 is live" in taken.stderr
    ok(in_a("sync"))
    session = json.loads(in_a("--json", "show", "kimi-1").stdout)["sessions"][0]
    assert (session["provider"], session["working_on"]) == ("Kimi", "auth")


# -- unknown ids ----------------------------------------------------------------------------

def test_unknown_ids_name_the_closest_live_ones_everywhere(run, repo):
    sid = register(run, "--provider", "Kimi", "--working-on", "auth")
    register(run, "--provider", "Claude")
    for command in (("finish", "kimi-typo"), ("update", "kimi-typo", "--working-on", "x"),
                    ("kill", "kimi-typo"), ("show", "kimi-typo"),
                    ("context", "log", "kimi-typo", "a line"), ("context", "show", "kimi-typo"),
                    ("lock", "acquire", "--session", "kimi-typo", "src/auth.py"),
                    ("lock", "heartbeat", "--session", "kimi-typo"),
                    ("end", "kimi-typo", "--what", "x"),
                    ("send", "--from", sid, "--to", "kimi-typo", "hello"),
                    ("send", "--from", "kimi-typo", "--to", sid, "hello"),
                    ("inbox", "kimi-typo"), ("handoff", "kimi-typo", "notes.md")):
        failed = run(*command)
        assert failed.returncode == 1, (command, failed.stderr)
        assert failed.stderr == \
            f"agent-registry: unknown session kimi-typo; did you mean {sid}?\n", command
    doc = json.loads(run("--json", "finish", "kimi-typo").stdout)["error"]
    assert doc == {"code": 1, "message": f"unknown session kimi-typo; did you mean {sid}?",
                   "session": "kimi-typo", "closest": [sid]}
    # nothing close: a few live ids; nothing live: say so
    far = run("finish", "zz-9")
    assert far.returncode == 1 and "unknown session zz-9; live sessions: " in far.stderr
    for s in json.loads(run("--json", "show").stdout)["sessions"]:
        ok(run("finish", s["id"]))
    assert run("finish", "kimi-typo").stderr == \
        "agent-registry: unknown session kimi-typo; no session is live: register one first\n"


def test_closest_prefers_the_callers_own_sessions():
    from agent_registry.branch.sessionids import closest, looks_like_session_id, unknown_text
    live = ["kimi-1796160374-de95", "kimi-1796160374-de96", "claude-1796160000-0001"]
    assert closest("kimi-1796160374-de9", live)[:2] == live[:2]
    assert closest("kimi-1796160374-de9", live, prefer=[live[1]])[0] == live[1]
    assert closest("x", live, prefer=[live[2]]) == [live[2]]  # the only own one
    assert unknown_text("kimi-typo", live[:1]) == \
        "unknown session kimi-typo; did you mean kimi-1796160374-de95?"
    assert all(map(looks_like_session_id, ["kimi-typo", "claude-1-ab", "kimi-1720000000",
                                           "claude-5f0e+1796160000"]))
    assert not any(map(looks_like_session_id, ["README", "setup.py", "src/a-b", "a-b.py",
                                               "Makefile", "new_file", "-x", "kimi-"]))


# -- MCP ------------------------------------------------------------------------------------

def test_mcp_register_refuses_a_live_id_and_unknown_ids_name_the_closest(run, repo):
    pytest.importorskip("mcp", reason="the mcp extra is not installed")
    from test_mcp import call, talk
    ok(run("register", "kimi-1", "--provider", "Kimi", "--working-on", "auth"))
    ok(run("register", "kimi-2", "--provider", "Kimi", "--working-on", "docs"))

    async def script(session):
        taken = await call(session, "register", provider="Claude", session_id="kimi-1",
                           working_on="two")
        resumed = await call(session, "register", provider="Kimi", session_id="kimi-1",
                             working_on="auth", resume=True)
        again = await call(session, "register", provider="Kimi", session_id="kimi-1",
                           working_on="auth, again")  # this server owns it now
        to_typo = await call(session, "send", to="kimi-typo", body="hello")
        claim_typo = await call(session, "lock_acquire", paths=["src/auth.py"],
                                session_id="kimi-3")
        return taken, resumed, again, to_typo, claim_typo
    taken, resumed, again, to_typo, claim_typo = talk(repo, script)
    assert taken[0] and "session kimi-1 is live" in taken[1] and "resume" in taken[1]
    assert not resumed[0], resumed[1]
    assert resumed[2]["session"]["pid"] and resumed[2]["session"]["owner"] == "given"
    assert not again[0], again[1]
    # the server's own session first, once; the core's hint not repeated
    for error, text, _ in (to_typo, claim_typo):
        assert error and text.lower().count("did you mean") == 1, text
        assert "Did you mean kimi-1?" in text and "Live sessions: kimi-1, kimi-2" in text
    assert "unknown session kimi-typo." in to_typo[1]
