"""Messages that survive what others wrote (issue 24): a malformed record on a branch is
skipped with a warning naming it, never a traceback hiding the good ones; a `repo:` room
reaches the sessions present when it was sent; an idempotency key names one message
across clones; C1 and bidi controls are refused like C0.  Real CLI processes, real
clones of a bare remote."""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from helpers import CLI, Runner, git
from test_messages import js
from test_messages_branch import _commit_on
from test_sync import Team

BRANCH = "agent-registry"
MESSAGES = "agent-registry-messages"


def bad_record(mid: str, sender: str, to: str, **broken) -> str:
    record = {"id": mid, "kind": "message", "from": sender, "to": {"session": to},
              "recipients": [to], "subject": None, "body": "fine", "key": None,
              "reply_to": None, "document": None, "thread": mid,
              "at": "2026-01-01T00:00:00Z", "ts": 1767225600.0}
    return json.dumps({**record, **broken}, indent=1) + "\n"


def pair(tmp_path: Path) -> tuple[Team, Runner, Runner]:
    team = Team(tmp_path)
    a, b = team.clone("a"), team.clone("b")
    assert a("register", "s0", "--provider", "Codex").returncode == 0
    assert b("register", "s1", "--provider", "Codex").returncode == 0
    assert a("sync").returncode == 0
    return team, a, b


@pytest.mark.parametrize("sharded", [False, True], ids=["messages-branch", "clone-refs"])
def test_a_malformed_record_is_skipped_with_a_warning_naming_it(tmp_path, sharded):
    """Damaged records beside a good message on the ref it was sent on: the writing
    clone's own ref (a send), or the messages branch (a send with a key)."""
    team, a, b = pair(tmp_path)
    keyed = () if sharded else ("--key", "good")
    good = js(a("--json", "send", "--from", "s0", "--to", "s1", *keyed, "the good one"))["id"]
    if sharded:  # sends go to the writing clone's own ref
        [ref] = [r for r in git(a.cwd, "for-each-ref", "--format=%(refname:short)",
                                f"refs/heads/{BRANCH}-clones/").split()]
    else:
        ref = MESSAGES
    bad_body, bad_at = "0123456789abcdef", "fedcba9876543210"
    _commit_on(a.cwd, ref, {
        f"messages/s0/{bad_body}.json": bad_record(bad_body, "s0", "s1", body=123),
        f"messages/s0/{bad_at}.json": bad_record(bad_at, "s0", "s1", at=5, thread=good,
                                                 reply_to=good),
    }, "two damaged records")
    git(a.cwd, "push", "-q", "origin", ref)
    for clone in (a, b):  # on every clone
        inbox = clone("--json", "inbox", "s1")
        assert inbox.returncode == 0, inbox.stderr
        assert [m["id"] for m in json.loads(inbox.stdout)["messages"]] == [good]
        assert "Traceback" not in inbox.stderr
        for mid in (bad_body, bad_at):
            [line] = [l for l in inbox.stderr.splitlines() if mid in l]
            assert f"{ref}:messages/s0/{mid}.json" in line and "skipped" in line, line
        text = clone("inbox", "s1")
        assert text.returncode == 0 and "the good one" in text.stdout
        thread = clone("--json", "thread", good)
        assert thread.returncode == 0, thread.stderr
        assert [m["id"] for m in json.loads(thread.stdout)["messages"]] == [good]
        assert bad_at in thread.stderr
        # the bad one is not a message anyone can answer or ack
        assert clone("thread", bad_body).returncode == 2
    # the other readers: the prompt hook's and the dashboard's (the same library calls)
    from agent_registry.core import messages
    from agent_registry.core.registry import Registry
    from agent_registry.harness.messages import unseen
    with Registry.open(str(b.cwd)) as registry:
        lines = unseen(registry, "s1", tmp_path / "shown.json")
        assert any(good in line for line in lines) and not any(bad_at in l for l in lines)
        assert [m["id"] for m in messages.inbox(registry, "s1")["messages"]] == [good]
        assert any(bad_body in w for w in registry.warnings)
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from agent_registry.dashboard.app import create_app
    with TestClient(create_app(str(b.cwd)), base_url="http://127.0.0.1") as client:
        inbox = client.get("/api/sessions/s1/inbox")
        assert inbox.status_code == 200 and [m["id"] for m in inbox.json()["messages"]] == [good]
        thread = client.get(f"/api/messages/{good}/thread")
        assert thread.status_code == 200 and [m["id"] for m in thread.json()["messages"]] == [good]


@pytest.mark.parametrize("planted", ["not json\n", '{"id": "%s", "session": "s0"}\n'])
def test_a_malformed_ack_file_is_reported_and_acknowledges_nothing(run, repo, planted):
    """A file at acks/<recipient>/<id>.json that is not an ack record (issue 34): the
    message still waits in the inbox, the file is named in a warning, thread lists no
    acknowledgement, and the recipient's own ack writes a real one over it."""
    assert run("register", "s0", "--provider", "Codex").returncode == 0
    assert run("register", "s1", "--provider", "Codex").returncode == 0
    mid = js(run("--json", "send", "--from", "s0", "--to", "s1", "look at this"))["id"]
    [ref] = [r for r in git(repo, "for-each-ref", "--format=%(refname:short)", "refs/heads/")
             .split() if git(repo, "ls-tree", "-r", "--name-only", r).count(f"/{mid}.json")]
    _commit_on(repo, ref, {f"acks/s1/{mid}.json": planted.replace("%s", mid)}, "a stray file")
    inbox = run("--json", "inbox", "s1")
    assert [m["id"] for m in js(inbox)["messages"]] == [mid]
    [line] = [l for l in inbox.stderr.splitlines() if f"acks/s1/{mid}.json" in l]
    assert f"{ref}:acks/s1/{mid}.json is not counted" in line, line
    thread = run("--json", "thread", mid)
    assert js(thread)["messages"][0]["acked_by"] == [] and f"acks/s1/{mid}.json" in thread.stderr
    assert js(run("--json", "ack", mid, "--session", "s1"))["acked"] == [mid]
    inbox = run("--json", "inbox", "s1")
    assert js(inbox)["messages"] == [] and inbox.stderr == ""
    assert js(run("--json", "thread", mid))["messages"][0]["acked_by"] == ["s1"]


# -- C1 and bidi controls ---------------------------------------------------------------

@pytest.mark.parametrize("char", ["\u202e", "\u0085", "\u009b", "\u2066", "\u200f", "\u061c"])
def test_c1_and_bidi_controls_are_refused_like_c0(run, repo, char):
    assert run("register", "s0", "--provider", "Codex").returncode == 0
    assert run("register", "s1", "--provider", "Codex").returncode == 0
    before = git(repo, "for-each-ref")
    for args in (("send", "--from", "s0", "--to", "s1", f"evil{char}txt.exe"),
                 ("send", "--from", "s0", "--to", "s1", "--subject", f"a{char}b", "body"),
                 ("update", "s0", "--working-on", f"a{char}b"),
                 ("context", "log", "s0", f"line{char}"),
                 ("register", "s2", "--provider", "Codex", "--working-on", f"x{char}")):
        proc = run(*args)
        assert proc.returncode == 2, (args, proc.stderr)
        assert "control character" in proc.stderr and len(proc.stderr.splitlines()) == 1
    assert git(repo, "for-each-ref") == before  # nothing written
    # text that is merely not ASCII still goes through
    assert run("send", "--from", "s0", "--to", "s1", "größe 日本 עברית").returncode == 0


# -- a repository's room reaches who is there when it is sent -------------------------------

def test_a_repo_room_message_reaches_the_sessions_present_when_sent(run, repo):
    for sid in ("a1", "a2"):
        assert run("register", sid, "--provider", "Codex").returncode == 0
    sent = js(run("--json", "send", "--from", "a1", "--room", "repo:repo", "lunch?"))
    assert sent["recipients"] == ["a2"]
    late = js(run("--json", "register", "a3", "--provider", "Codex"))
    assert late.get("waiting", []) == []
    assert js(run("--json", "inbox", "a3"))["messages"] == []
    assert run("ack", sent["id"], "--session", "a3").returncode == 1  # not a recipient
    assert [m["id"] for m in js(run("--json", "inbox", "a2"))["messages"]] == [sent["id"]]
    # a room shared through a hub is a topic: who joins later hears it (test_rooms.py)


# -- an idempotency key names one message across clones ------------------------------------

def bodies(clone: Runner, sid: str = "s1") -> dict[str, str]:
    proc = clone("--json", "inbox", sid, "--all")
    assert proc.returncode == 0, proc.stderr
    return {m["key"]: m["body"] for m in json.loads(proc.stdout)["messages"] if m["key"]}


def test_one_key_two_contents_from_two_clones_at_once(tmp_path):
    """Both clones send the same key with their own body at the same instant: one exits
    0, the other 1 (refused when its push lost and the replay met the first), and every
    clone reads the winner's body."""
    team, a, b = pair(tmp_path)  # a keyed send decides on the messages branch
    assert a("register", "s2", "--provider", "Codex").returncode == 0  # a sender seen by both
    assert b("sync").returncode == 0
    winners = {}
    for i in range(4):
        procs = {name: subprocess.Popen([CLI, "send", "--from", "s2", "--to", "s1", "--key",
                                         f"k{i}", f"{name} says {i}"], cwd=clone.cwd,
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for name, clone in (("a", a), ("b", b))}
        codes = {name: p.wait(timeout=120) for name, p in procs.items()}
        assert sorted(codes.values()) == [0, 1], (i, codes, {n: p.stderr.read() for n, p in procs.items()})
        [winner] = [n for n, c in codes.items() if c == 0]
        assert "already used" in procs["b" if winner == "a" else "a"].stderr.read()
        winners[f"k{i}"] = f"{winner} says {i}"
    fresh = team.clone("fresh")
    for clone in (a, b, fresh):
        assert clone("sync").returncode in (0, 1)
        assert bodies(clone) == winners


def test_the_second_content_sent_offline_exits_1_at_sync(tmp_path):
    team, a, b = pair(tmp_path)  # a keyed send decides on the messages branch
    url = git(b.cwd, "remote", "get-url", "origin").strip()
    git(b.cwd, "remote", "set-url", "origin", str(tmp_path / "nowhere"))
    offline = b("send", "--from", "s1", "--to", "s0", "--key", "q1", "from b, offline")
    assert offline.returncode in (0, 3) and "not pushed" in offline.stderr
    assert a("send", "--from", "s1", "--to", "s0", "--key", "q1", "from a").returncode == 0
    git(b.cwd, "remote", "set-url", "origin", url)
    synced = b("sync")
    assert synced.returncode == 1 and "key 'q1' was already used" in synced.stdout + synced.stderr
    for clone in (a, b, team.clone("fresh")):
        assert bodies(clone, "s0") == {"q1": "from a"}
