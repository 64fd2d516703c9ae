"""What a new team meets with a bare remote and clones of it (issue 37), each through
the real CLI, the guard and Claude's edit gate as they run:

- a `gc` in one clone rewrites the shard histories on the remote (a squash): another
  clone that fetched them, with its own older copy of a shard as its local tip, reads the
  fetched tip as the truth, never as "nothing held"; so does a shard where this clone's
  unpushed commits sit beside other clones' fetched claims;
- `repo:NAME` is the repository's room, named the same in every clone;
- a session past its TTL is shown as a zombie, not as working.
"""
from __future__ import annotations

import json
import os
import subprocess

import pytest
from helpers import CLI, git
from test_sync import Team

FILE = "src/auth.py"


def ok(proc: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert proc.returncode == 0, (proc.args, proc.stdout, proc.stderr)
    return proc


def claude_edit(clone, sid: str, path: str) -> str | None:
    """The deny reason Claude Code's edit gate gives for a Write of *path*, or None."""
    event = {"session_id": sid, "transcript_path": "/tmp/t.jsonl", "cwd": str(clone.cwd),
             "hook_event_name": "PreToolUse", "tool_name": "Write",
             "tool_input": {"file_path": str(clone.cwd / path), "content": "x"}}
    proc = subprocess.run([CLI, "harness", "hook", "claude", "pre-tool-use"], cwd=clone.cwd,
                          input=json.dumps(event), capture_output=True, text=True, timeout=120,
                          env={**os.environ, "AGENT_REGISTRY_SESSION": sid})
    assert proc.returncode == 0, proc.stderr
    if not proc.stdout.strip():
        return None
    out = json.loads(proc.stdout).get("hookSpecificOutput", {})
    return out.get("permissionDecisionReason") if out.get("permissionDecision") == "deny" else None


def reads_held_by(clone, holder: str, me: str, path: str = FILE) -> None:
    """Every reader in *clone* says *path* is held by *holder*."""
    check = clone("--json", "lock", "check", path)
    assert check.returncode == 1, check.stdout + check.stderr
    assert holder in check.stdout
    guard = clone("guard", path, env={"AGENT_REGISTRY_SESSION": me})
    assert guard.returncode == 1 and holder in guard.stderr + guard.stdout, guard.stderr
    listed = json.loads(ok(clone("--json", "lock", "list")).stdout)["locks"]
    assert [(lock["path"], lock["owner"]) for lock in listed
            if lock["path"] == path] == [(path, holder)], listed
    reason = claude_edit(clone, me, path)
    assert reason is not None and holder in reason, reason


@pytest.mark.parametrize("fetched_by", ["git fetch", "the read itself"])
def test_a_gc_in_another_clone_leaves_held_locks_held(tmp_path, fetched_by, monkeypatch):
    monkeypatch.setenv("AGENT_REGISTRY_PID", "none")
    team = Team(tmp_path)
    x, y, z = team.clone("x"), team.clone("y"), team.clone("z")
    for clone, sid in ((x, "x1"), (y, "y1"), (z, "z1")):
        ok(clone("register", sid, "--provider", "Codex", "--working-on", "auth"))
    # y once held the file: its shard of FILE has a local tip of y's own
    ok(y("lock", "acquire", FILE, "--session", "y1"))
    ok(y("lock", "release", FILE, "--session", "y1"))
    ok(x("lock", "acquire", FILE, "--session", "x1"))
    ok(z("sync"))
    ok(z("gc", "--keep-days", "0", "--yes"))
    if fetched_by == "git fetch":
        git(y.cwd, "fetch", "-q", "origin")
    else:  # a read older than readFreshness fetches first
        git(y.cwd, "config", "agent-registry.readFreshness", "0")
    reads_held_by(y, "x1", "y1")
    # a claim is refused, as it was before
    assert y("lock", "acquire", FILE, "--session", "y1").returncode == 1


def test_an_unpushed_release_beside_a_fetched_claim_reads_both(tmp_path, monkeypatch):
    """y's shard tip holds a commit the remote has not taken (a release made offline),
    beside x's claim, fetched from the remote, of another file of the same shard (both
    under lib/core: one key): neither tip alone tells the truth; read as both, x's file is
    held by x."""
    monkeypatch.setenv("AGENT_REGISTRY_PID", "none")
    team = Team(tmp_path)
    x, y = team.clone("x"), team.clone("y")
    ok(x("register", "x1", "--provider", "Codex", "--working-on", "auth"))
    ok(y("register", "y1", "--provider", "Codex", "--working-on", "auth"))
    mine, theirs = "lib/core/mine.py", "lib/core/theirs.py"
    ok(y("lock", "acquire", mine, "--session", "y1"))
    hidden = team.bare.with_name("hidden.git")
    team.bare.rename(hidden)
    try:  # offline: committed in y, not pushed
        released = y("lock", "release", mine, "--session", "y1")
        assert released.returncode == 0 and "kept in this clone" in released.stderr
    finally:
        hidden.rename(team.bare)
    ok(x("lock", "acquire", theirs, "--session", "x1"))
    git(y.cwd, "fetch", "-q", "origin")
    reads_held_by(y, "x1", "y1", theirs)


def test_a_repository_room_is_named_the_same_in_every_clone(tmp_path, monkeypatch):
    """`repo:NAME` is the repository's room, not the clone folder's (issue 37): two clones
    of one remote in folders A and B are both in repo:remote, and a message sent there
    from A reaches the session working in B."""
    monkeypatch.setenv("AGENT_REGISTRY_PID", "none")
    team = Team(tmp_path)
    a, b = team.clone("A"), team.clone("B")
    ok(a("register", "a1", "--provider", "Codex", "--working-on", "api"))
    ok(b("register", "b1", "--provider", "Claude", "--working-on", "web"))
    repos = {(s["id"], s["repo"]) for clone in (a, b)
             for s in json.loads(ok(clone("--json", "status")).stdout)["sessions"]}
    assert repos == {("a1", "remote"), ("b1", "remote")}  # remote.git's name, not A or B
    sent = json.loads(ok(a("--json", "send", "--from", "a1", "--room", "repo:remote",
                           "schema v2 is in")).stdout)
    assert sent["recipients"] == ["b1"], sent
    inbox = json.loads(ok(b("--json", "inbox", "b1")).stdout)["messages"]
    assert [m["id"] for m in inbox] == [sent["id"]]


def test_a_zombie_is_shown_as_one(repo, run, clock):
    """A session 40 minutes past its TTL is no working session (issue 37): `status`
    shows it as a zombie with the reason, in text and JSON; a fresh one stays OnWorking."""
    from agent_registry import Registry
    with Registry.open(str(repo), clock=clock) as registry:
        registry.register("old-1", provider="Codex", pid=None)
        registry.claim("old-1", ["src/auth.py"])
        clock.advance(40 * 60)
        registry.register("new-1", provider="Claude", pid=None)
        doc = registry.status()
    zombies = {s["id"]: s["zombie"] for s in doc["sessions"]}
    assert zombies["new-1"] is None
    assert zombies["old-1"] and "heartbeat" in zombies["old-1"], zombies
    text = ok(run("status", env={"AGENT_REGISTRY_PID": "none"})).stdout
    row = next(line for line in text.splitlines() if line.startswith("old-1"))
    assert "zombie" in row and "OnWorking" not in row, text
    assert any(line.startswith("zombie: old-1:") for line in text.splitlines()), text


def test_an_ack_of_a_message_from_another_clone_fetches_first(tmp_path, monkeypatch):
    """b registered before a sent: b's copy has never seen the message, and `ack` fetches
    as a read does instead of answering "unknown message id" (issue 37)."""
    monkeypatch.setenv("AGENT_REGISTRY_PID", "none")
    team = Team(tmp_path)
    a, b = team.clone("a"), team.clone("b")
    ok(a("register", "a1", "--provider", "Codex", "--working-on", "api"))
    ok(b("register", "b1", "--provider", "Claude", "--working-on", "web"))
    for text in ("first", "second"):  # the second: b's copy of a's clone ref is stale
        sent = json.loads(ok(a("--json", "send", "--from", "a1", "--to", "b1", text)).stdout)
        acked = json.loads(ok(b("--json", "ack", sent["id"], "--session", "b1")).stdout)
        assert acked["acked"] == [sent["id"]], acked
    assert b("ack", "0123456789abcdef", "--session", "b1").returncode == 2  # still unknown


def test_gc_dry_run_in_a_fresh_clone_counts_what_the_real_run_squashes(tmp_path, monkeypatch):
    """A fresh clone has the shards only as the remote's copies: the dry run reads those,
    as the real run (which syncs first) squashes them (issue 37)."""
    monkeypatch.setenv("AGENT_REGISTRY_PID", "none")
    team = Team(tmp_path)
    x = team.clone("x")
    ok(x("register", "x1", "--provider", "Codex", "--working-on", "auth"))
    for n in range(3):
        ok(x("lock", "acquire", f"src/f{n}.py", "--session", "x1"))
        ok(x("lock", "release", f"src/f{n}.py", "--session", "x1"))
    fresh = team.clone("fresh")
    dry = json.loads(ok(fresh("--json", "gc", "--keep-days", "0", "--dry-run")).stdout)
    would = {part["branch"]: part["squashed"] for part in dry["shards"]}
    real = json.loads(ok(fresh("--json", "gc", "--keep-days", "0", "--yes")).stdout)
    done = {part["branch"]: part["squashed"] for part in real["shards"]}
    assert any(would.values()), would
    assert would == done, (would, done)


def history_to_squash(tmp_path, monkeypatch):
    """A team whose clone x has a claim and its release to squash: (team, x, the
    remote's refs before)."""
    monkeypatch.setenv("AGENT_REGISTRY_PID", "none")
    team = Team(tmp_path)
    x = team.clone("x")
    ok(x("register", "x1", "--provider", "Codex", "--working-on", "auth"))
    ok(x("lock", "acquire", FILE, "--session", "x1"))
    ok(x("lock", "release", FILE, "--session", "x1"))
    return team, x, git(team.bare, "for-each-ref", "--format=%(refname) %(objectname)")


def test_gc_on_a_terminal_asks_about_every_ref_it_rewrites(tmp_path, monkeypatch):
    """The question names the shards gc would rewrite and force-push, not only the
    registry branch; answered no, nothing changes (issue 37)."""
    import pty
    team, x, before = history_to_squash(tmp_path, monkeypatch)
    main, follower = pty.openpty()
    os.write(main, b"n\n")
    proc = subprocess.run([CLI, "gc", "--keep-days", "0"], cwd=x.cwd, stdin=follower,
                          capture_output=True, text=True, timeout=120)
    os.close(follower)
    os.close(main)
    assert proc.returncode == 1 and "not confirmed" in proc.stderr, proc.stderr
    assert "agent-registry-shards/" in proc.stderr, proc.stderr  # the shard is asked about
    assert git(team.bare, "for-each-ref", "--format=%(refname) %(objectname)") == before


def test_gc_without_a_terminal_needs_yes_to_rewrite_the_remote(tmp_path, monkeypatch):
    """An agent's gc (no terminal) that would force-push rewritten history asks for
    --yes: exit 2, one line, nothing changed there; with --yes it runs."""
    team, x, before = history_to_squash(tmp_path, monkeypatch)
    for args in (("gc",), ("--json", "gc")):
        proc = x(*args, "--keep-days", "0")
        assert proc.returncode == 2, proc
        assert proc.stderr.count("\n") == 1 and "--yes" in proc.stderr, proc.stderr
        assert git(team.bare, "for-each-ref", "--format=%(refname) %(objectname)") == before
    ok(x("gc", "--keep-days", "0", "--yes"))
    assert git(team.bare, "for-each-ref", "--format=%(refname) %(objectname)") != before


def test_gc_with_json_on_a_terminal_needs_yes_too(tmp_path, monkeypatch):
    """--json asks no question: on a terminal (an agent's pty) it would force-push the
    rewrite unasked, so it needs --yes as without a terminal."""
    import pty
    team, x, before = history_to_squash(tmp_path, monkeypatch)
    main, follower = pty.openpty()
    try:
        proc = subprocess.run([CLI, "--json", "gc", "--keep-days", "0"], cwd=x.cwd,
                              stdin=follower, capture_output=True, text=True, timeout=120)
    finally:
        os.close(follower)
        os.close(main)
    assert proc.returncode == 2 and "--yes" in proc.stderr, (proc.stdout, proc.stderr)
    assert git(team.bare, "for-each-ref", "--format=%(refname) %(objectname)") == before


def test_init_says_it_pushed_the_registry_and_a_second_clone_that_it_adopted_it(tmp_path):
    """init with a remote changes what every clone shares: it says so, and a clone that
    finds the registry there says it adopted it, not that it already had it."""
    team = Team(tmp_path)
    x = team.clone("x")
    made = ok(x("init")).stdout
    refs = git(team.bare, "for-each-ref", "--format=%(refname)").split()
    assert f"pushed to origin ({len(refs) - 1} branches)" in made, (made, refs)
    assert json.loads(ok(x("--json", "init")).stdout)["pushed"] is None  # nothing again
    y = team.clone("y")
    shown = json.loads(ok(y("--json", "init")).stdout)
    assert shown["adopted"] == "origin" and not shown["created"] and not shown["pushed"]
    assert ok(y("init")).stdout.startswith("already have")


@pytest.mark.parametrize("home, expected", [
    ("pipx/venvs/agent-registry", "pipx inject agent-registry '{src}[web]'"),
    ("uv/tools/agent-registry", "uv tool install '{src}' --with '{src}[web]'"),
    ("plain-venv", "pip install '{src}[web]'")])
def test_the_missing_extra_hint_speaks_the_installers_words(tmp_path, home, expected):
    """pipx and uv keep the tool in a venv of their own, where `pip install` does not
    reach: the hint names `pipx inject` or `uv tool install --with` there (issue 37).
    A real venv at the place each installer makes one, with this checkout on its path."""
    import sys
    from helpers import ROOT
    venv = tmp_path / home
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next((venv / "lib").glob("python*/site-packages"))
    (site / "checkout.pth").write_text(f"{ROOT}\n")
    out = subprocess.run([str(venv / "bin" / "python"), "-c",
                          "from agent_registry.store.extras import install_command\n"
                          "print(install_command('web'))"],
                         capture_output=True, text=True, check=True).stdout.strip()
    # no distribution installed: the checkout it runs from, never the name (not on PyPI)
    assert out == expected.format(src=ROOT), out


@pytest.mark.parametrize("args", [["status"], ["--json", "status"], ["lock", "list"]])
def test_a_reader_that_stops_early_is_no_error(repo, run, args):
    """`status | head` with many sessions: the reader closes the pipe; the command ends
    with exit 0 and says nothing, never 'system error: Broken pipe' exit 1 (issue 36)."""
    from agent_registry import Registry
    with Registry.open(str(repo)) as registry:
        for n in range(60):
            registry.register(f"s{n}", provider="Codex", working_on="w" * 60, pid=None)
            registry.claim(f"s{n}", [f"src/f{n}.py"])
    proc = subprocess.run(f"'{CLI}' {' '.join(args)} | head -c 10; exit ${{PIPESTATUS[0]}}",
                          shell=True, executable="/bin/bash", cwd=repo, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0 and proc.stderr == "", (proc.returncode, proc.stderr)


def test_the_predecessors_variables_are_named_not_ignored(repo, run):
    """AGENT_REGISTRY_PATH and AGENT_REGISTRY_LOCK_DIR point the predecessor at its
    files; here they name nothing, and a user who set them is told so (issue 36)."""
    ok(run("init"))
    for name in ("AGENT_REGISTRY_PATH", "AGENT_REGISTRY_LOCK_DIR"):
        for args in (["status"], ["lock", "list"]):  # the click-free route and click's
            proc = ok(run(*args, env={name: "/home/me/.agent-registry/registry.md"}))
            assert f"${name}" in proc.stderr and "ignored" in proc.stderr, (args, proc.stderr)
    assert "ignored" not in ok(run("status")).stderr


def test_a_refused_commit_names_the_message_that_asks_the_owner(guarded, run, monkeypatch):
    """The guard's advice names `send` to the holder and the override, not only "ask the
    owner" (issue 37): a real `git commit` through the installed hook."""
    monkeypatch.setenv("AGENT_REGISTRY_PID", "none")
    ok(run("register", "o1", "--provider", "Codex", "--working-on", "auth"))
    ok(run("lock", "acquire", "src/auth.py", "--session", "o1"))
    ok(run("register", "me", "--provider", "Claude"))
    (guarded / "src" / "auth.py").write_text("auth = 2\n")
    git(guarded, "add", "src/auth.py")
    proc = subprocess.run(["git", "commit", "-q", "-m", "t"], cwd=guarded, capture_output=True,
                          text=True, env={**os.environ, "AGENT_REGISTRY_SESSION": "me"})
    assert proc.returncode != 0
    assert "agent-registry send --to o1 'please release src/auth.py'" in proc.stderr, proc.stderr
    assert "AGENT_REGISTRY_ALLOW=1 git commit" in proc.stderr


def claude_start(clone, native: str) -> str:
    """The context Claude Code's session-start hook gives the agent in *clone*."""
    event = {"session_id": native, "transcript_path": "/tmp/t.jsonl", "cwd": str(clone.cwd),
             "hook_event_name": "SessionStart", "source": "startup"}
    proc = subprocess.run([CLI, "harness", "hook", "claude", "session-start"], cwd=clone.cwd,
                          input=json.dumps(event), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)["hookSpecificOutput"]["additionalContext"]


def test_the_start_hook_does_not_call_stale_locks_held(tmp_path, monkeypatch):
    """A session whose heartbeat is long past its TTL (registered on another clone with a
    clock months back) still lists its locks; the start hook in another clone says they
    are stale and free to claim, and "holds" only what a live session holds (issue 37)."""
    from agent_registry import Registry
    from helpers import FakeClock
    monkeypatch.setenv("AGENT_REGISTRY_PID", "none")
    team = Team(tmp_path)
    x, y = team.clone("x"), team.clone("y")
    with Registry.open(str(x.cwd), clock=FakeClock()) as registry:
        registry.register("old-1", provider="Codex", working_on="auth", pid=None)
        registry.claim("old-1", [FILE])
    ok(x("register", "x1", "--provider", "Codex", "--working-on", "docs"))
    ok(x("lock", "acquire", "README.md", "--session", "x1"))
    lines = claude_start(y, "c0ffee").splitlines()
    old = next(line for line in lines if line.startswith("- old-1 "))
    assert "holds" not in old and "stale" in old and FILE in old, lines
    live = next(line for line in lines if line.startswith("- x1 "))
    assert "holds README.md" in live and "stale" not in live, lines
    assert ok(y("lock", "acquire", FILE, "--session", "claude-c0ffee")).returncode == 0


def test_a_reply_goes_to_the_sender_without_to(tmp_path, monkeypatch):
    """`send --reply-to ID` names no audience: the reply goes to the original's sender,
    across clones (issue 37); a reply to one's own message must name its audience."""
    monkeypatch.setenv("AGENT_REGISTRY_PID", "none")
    team = Team(tmp_path)
    a, b = team.clone("a"), team.clone("b")
    ok(a("register", "a1", "--provider", "Codex", "--working-on", "api"))
    ok(b("register", "b1", "--provider", "Claude", "--working-on", "web"))
    asked = json.loads(ok(a("--json", "send", "--from", "a1", "--to", "b1", "may I?")).stdout)
    reply = json.loads(ok(b("--json", "send", "--from", "b1", "--reply-to", asked["id"],
                            "yes")).stdout)
    assert reply["recipients"] == ["a1"], reply
    inbox = json.loads(ok(a("--json", "inbox", "a1")).stdout)["messages"]
    assert [(m["id"], m["reply_to"]) for m in inbox] == [(reply["id"], asked["id"])]
    own = a("send", "--from", "a1", "--reply-to", asked["id"], "again?")
    assert own.returncode == 2 and "--to" in own.stderr, own.stderr
    assert len(own.stderr.strip().splitlines()) == 1


def test_a_reply_to_a_room_message_goes_back_through_the_room(tmp_path):
    """A message that came through a shared room (the hub) is answered there, to its
    sender in the other repository, with only --reply-to (issue 37)."""
    from test_rooms import js
    hub = tmp_path / "hub.git"
    git(tmp_path, "init", "-q", "--bare", str(hub))
    team = Team(tmp_path)
    api, web = team.clone("api"), team.clone("web")
    for clone in (api, web):
        git(clone.cwd, "config", "agent-registry.hub", str(hub))
    for clone, sid in ((api, "api-1"), (web, "web-1")):
        js(clone("--json", "register", sid, "--provider", "Codex", "--room", "room:contract",
                 env={"AGENT_REGISTRY_PID": "none"}))
    sent = js(api("--json", "send", "--from", "api-1", "--room", "room:contract", "paged"))
    reply = js(web("--json", "send", "--from", "web-1", "--reply-to", sent["id"], "adapting"))
    assert reply["recipients"] == [sent["message"]["from"]], (reply, sent)
    assert [m["id"] for m in js(api("--json", "inbox", "api-1"))["messages"]] == [reply["id"]]


def test_an_offline_register_says_one_true_thing(tmp_path, monkeypatch):
    """With its remote out of reach, `register` says in one line that the session is
    registered in this clone only and what shares it; no second line about the messages
    branch ("0 operation(s) wait") contradicts it (issue 37).  Then `sync` shares it."""
    monkeypatch.setenv("AGENT_REGISTRY_PID", "none")
    team = Team(tmp_path)
    x = team.clone("x")
    ok(x("init"))
    y = team.clone("y")
    hidden = team.bare.with_name("hidden.git")
    team.bare.rename(hidden)
    try:
        proc = ok(y("register", "y1", "--provider", "Codex", "--working-on", "auth"))
    finally:
        hidden.rename(team.bare)
    said = [line for line in proc.stderr.splitlines() if "bound to" not in line]
    assert len(said) == 1, proc.stderr
    assert "y1 is registered in this clone only" in said[0], said
    assert "agent-registry sync" in said[0], said
    ok(y("sync"))
    assert [s["id"] for s in json.loads(ok(x("--json", "status")).stdout)["sessions"]] == ["y1"]


def claim_offline_then_refused(team, x, y, path: str, sync_y) -> None:
    """y claims *path* with the remote out of reach (exit 3, kept in y), x claims it
    online, and y's sync (*sync_y*) has the remote refuse y's claim."""
    hidden = team.bare.with_name("hidden.git")
    team.bare.rename(hidden)
    try:
        assert y("lock", "acquire", path, "--session", "y1").returncode == 3
    finally:
        hidden.rename(team.bare)
    ok(x("lock", "acquire", path, "--session", "x1"))
    sync_y()


def refused_months_ago_and_now(tmp_path):
    """Clone y of a team whose remote refused two of y's claims: src/old.py at a sync run
    with a clock months back (its refusal is dated then), src/new.py just now."""
    from agent_registry import Registry
    from agent_registry.sync.shardsync import sync_all
    from helpers import FakeClock
    team = Team(tmp_path)
    x = team.clone("x")
    ok(x("init"))
    y = team.clone("y")
    ok(x("register", "x1", "--provider", "Codex", "--working-on", "auth"))
    ok(y("register", "y1", "--provider", "Claude", "--working-on", "auth"))

    def sync_months_ago() -> None:
        with Registry.open(str(y.cwd), clock=FakeClock()) as registry:
            sync_all(registry)
    claim_offline_then_refused(team, x, y, "src/old.py", sync_months_ago)
    claim_offline_then_refused(team, x, y, "src/new.py", lambda: y("sync"))
    return y


def test_the_sync_card_lets_old_refusals_go(tmp_path, monkeypatch):
    """The dashboard's Sync card (GET /api/sync, from the dashboard the CLI serves) shows
    the claims the remote refused in the last hour, not one refused months ago (issue 37;
    tests/test_dashboard_browser.py reads the card as drawn)."""
    import urllib.request
    from test_dashboard_support import served
    monkeypatch.setenv("AGENT_REGISTRY_PID", "none")
    y = refused_months_ago_and_now(tmp_path)
    with served(y.cwd) as info:
        with urllib.request.urlopen(info["url"] + "api/sync", timeout=30) as response:
            card = json.loads(response.read())
    assert [r["paths"] for r in card["refused"]] == [["src/new.py"]], card["refused"]


def test_one_collision_is_one_message_per_session_and_one_row(tmp_path, monkeypatch):
    """Three sessions in one worktree and one in another change one function: one
    overlap (one dashboard row), one message to each session, b1 told once, not once per
    session over there; a fourth session joining that worktree is told, b1 is not told
    again (issue 37)."""
    import urllib.request
    from test_dashboard_support import served
    monkeypatch.setenv("AGENT_REGISTRY_PID", "none")
    team = Team(tmp_path)
    x = team.clone("x")
    ok(x("init"))
    billing = x.cwd / "src" / "billing.py"
    billing.write_text("".join(f"def f{i}():\n    return {i}\n\n" for i in range(12)))
    git(x.cwd, "add", "-A")
    git(x.cwd, "commit", "-q", "-m", "billing")
    trees = {}
    for name in ("a", "b"):
        trees[name] = tmp_path / f"wt-{name}"
        git(x.cwd, "worktree", "add", "-q", "-b", f"feat-{name}", str(trees[name]))
        code = trees[name] / "src" / "billing.py"
        code.write_text(code.read_text().replace("return 3\n", f"return 3{name}\n"))
        git(trees[name], "commit", "-q", "-am", name)
    for sid, name in (("a1", "a"), ("a2", "a"), ("a3", "a"), ("b1", "b")):
        ok(x("register", sid, "--provider", "Codex", "--working-on", f"task {name}",
             cwd=trees[name]))

    def notify() -> dict:
        return json.loads(ok(x("--json", "overlap", "--notify")).stdout)
    report = notify()
    assert [o["sessions"] for o in report["overlaps"]] == [["a1", "a2", "a3", "b1"]]
    told = sorted(n["to"] for n in report["notified"] if n["created"])
    assert told == ["a1", "a2", "a3", "b1"], report["notified"]
    assert {n["from"] for n in report["notified"] if n["to"] != "b1"} == {"b1"}
    ok(x("register", "a4", "--provider", "Codex", "--working-on", "task a", cwd=trees["a"]))
    again = notify()
    assert [n["to"] for n in again["notified"] if n["created"]] == ["a4"], again["notified"]
    inbox = json.loads(ok(x("--json", "inbox", "b1")).stdout)["messages"]
    assert len(inbox) == 1 and "a3 (and 2 more sessions there)" in inbox[0]["body"], inbox
    with served(x.cwd) as info:
        with urllib.request.urlopen(info["url"] + "api/overlaps", timeout=60) as response:
            rows = json.loads(response.read())["overlaps"]
    assert [[s["sessions"] for s in row["sides"]] for row in rows] == \
        [[["a1", "a2", "a3", "a4"], ["b1"]]], rows
