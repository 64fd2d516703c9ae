"""Durable messages (issue 12): send, inbox, ack, thread, handoffs.  In the layout `init`
makes (format 3) a send and an ack are committed on the writing clone's own ref, a keyed
send on the messages branch (agent-registry-messages); docs/messages.md.

Every test runs the installed CLI as a one-shot process, as agents do, and reads what was
written back through the readers (inbox, thread, the dashboard's API); "nothing written"
is checked on every registry ref."""
from __future__ import annotations

import json
import subprocess
import time

import pytest

from helpers import CLI, git, wait_for

BRANCH = "agent-registry"
MESSAGES = "agent-registry-messages"


def tip(repo, branch: str = BRANCH) -> str:
    return git(repo, "rev-parse", "-q", "--verify", f"refs/heads/{branch}", check=False).strip()


def tips(repo) -> tuple[str, str, dict[str, str]]:
    """The main and messages branches' tips, and every registry ref (shards, clone refs):
    nothing written means none moved."""
    out = git(repo, "for-each-ref", "--format=%(refname) %(objectname)", "refs/heads/")
    return tip(repo), tip(repo, MESSAGES), {
        name: at for name, at in (line.split() for line in out.splitlines())
        if name.startswith(f"refs/heads/{BRANCH}")}


def clone_tip(repo) -> str:
    """This clone's own ref (where its sends and acks without a key are committed)."""
    names = git(repo, "for-each-ref", "--format=%(objectname)", f"refs/heads/{BRANCH}-clones/")
    (only,) = names.split()
    return only


def files(repo, folder: str, branch: str = MESSAGES) -> list[str]:
    out = git(repo, "ls-tree", "-r", "--name-only", branch, "--", folder, check=False)
    return [line for line in out.splitlines() if line]


def js(proc) -> dict:
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.fixture
def team(run):
    """Three live sessions: a1 holds src/ (a directory), b1 holds README.md, c1 nothing."""
    assert run("init").returncode == 0
    for sid in ("a1", "b1", "c1"):
        assert run("register", sid, "--provider", "Codex", "--working-on", f"task {sid}").returncode == 0
    assert run("lock", "acquire", "src/", "--session", "a1").returncode == 0
    assert run("lock", "acquire", "README.md", "--session", "b1").returncode == 0
    return run


def send(run, *args):
    return run("--json", "send", *args)


def test_send_inbox_ack_round_trip_one_file_per_writer(team, repo):
    sent = js(send(team, "--from", "c1", "--to", "a1", "--subject", "auth", "may I edit token.py?"))
    mid = sent["id"]
    assert sent["created"] is True and sent["recipients"] == ["a1"]
    shown = js(team("--json", "thread", mid))["messages"]
    assert [(m["id"], m["from"], m["body"]) for m in shown] == [(mid, "c1", "may I edit token.py?")]
    plain = team("send", "--from", "c1", "--to", "a1", "second")
    assert plain.returncode == 0 and plain.stdout.strip()  # the id, alone
    inbox = js(team("--json", "inbox", "a1"))
    assert [m["id"] for m in inbox["messages"]][0] == mid
    first = inbox["messages"][0]
    assert (first["from"], first["subject"], first["body"], first["acked"]) == \
        ("c1", "auth", "may I edit token.py?", False)
    assert js(team("--json", "inbox", "c1"))["messages"] == []  # not to the sender
    acked = js(team("--json", "ack", mid, "--session", "a1"))
    assert acked["acked"] == [mid]
    assert js(team("--json", "thread", mid))["messages"][0]["acked_by"] == ["a1"]
    left = js(team("--json", "inbox", "a1"))["messages"]
    assert mid not in [m["id"] for m in left] and len(left) == 1
    every = js(team("--json", "inbox", "a1", "--all"))["messages"]
    assert {m["id"]: m["acked"] for m in every}[mid] is True
    again = js(team("--json", "ack", mid, "--session", "a1"))  # repeatable
    assert again["acked"] == [] and again["already"] == [mid]
    text = team("inbox", "a1")
    assert text.returncode == 0 and "second" in text.stdout and "c1" in text.stdout


def test_only_a_recipient_acks(team, repo):
    mid = js(send(team, "--from", "c1", "--to", "a1", "hello"))["id"]
    before = tips(repo)
    other = team("ack", mid, "--session", "b1")
    assert other.returncode == 1 and "not a recipient" in other.stderr
    assert len(other.stderr.strip().splitlines()) == 1
    assert tips(repo) == before


def test_idempotency_key(team, repo):
    first = js(send(team, "--from", "c1", "--to", "a1", "--key", "job-7", "done"))
    after_first = tips(repo)
    retry = js(send(team, "--from", "c1", "--to", "a1", "--key", "job-7", "done"))
    assert retry["id"] == first["id"] and retry["created"] is False
    assert tips(repo) == after_first  # no second commit
    clash = team("send", "--from", "c1", "--to", "a1", "--key", "job-7", "other text")
    assert clash.returncode == 1 and "job-7" in clash.stderr
    assert tips(repo) == after_first
    # another sender may use the same key: ids are per sender
    theirs = js(send(team, "--from", "b1", "--to", "a1", "--key", "job-7", "done"))
    assert theirs["id"] != first["id"]
    assert len(js(team("--json", "inbox", "a1"))["messages"]) == 2


@pytest.mark.parametrize("args", [
    ("--to", "a1", ""),
    ("--to", "a1", "   "),
    ("--to", "a1", "x" * (64 * 1024 + 1)),
    ("--to", "a1", "--key", "bad\x01key", "body"),
    ("--to", "a1", "--subject", "bad\x1bsubject", "body"),
    ("--to", "a1", "--reply-to", "0123456789abcdef", "body"),
    ("--to", "not a session!", "body"),
    ("--to-path", "../outside", "body"),
])
def test_bad_input_is_one_line_exit_2_and_nothing_written(team, repo, args):
    before = tips(repo)
    proc = team("send", "--from", "c1", *args)
    assert proc.returncode == 2, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert tips(repo) == before


def test_unknown_message_ids_are_bad_input(team, repo):
    before = tips(repo)
    for args in (("ack", "0123456789abcdef", "--session", "a1"), ("thread", "0123456789abcdef")):
        proc = team(*args)
        assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert tips(repo) == before


def test_a_body_of_exactly_64_kib_is_accepted(team):
    mid = js(send(team, "--from", "c1", "--to", "a1", "y" * 64 * 1024))["id"]
    assert js(team("--json", "thread", mid))["messages"][0]["body"] == "y" * 64 * 1024


def test_never_into_the_void(team, repo):
    before = tips(repo)
    unknown = team("send", "--from", "c1", "--to", "ghost-9", "hi")
    assert unknown.returncode == 1 and "ghost-9" in unknown.stderr
    nobody = team("send", "--from", "c1", "--to-path", "docs/none.md", "hi")
    assert nobody.returncode == 1 and "no live session" in nobody.stderr
    no_tag = team("send", "--from", "c1", "--to-tag", "frontend", "hi")
    assert no_tag.returncode == 1
    assert tips(repo) == before
    assert team("finish", "b1").returncode == 0
    ended = team("send", "--from", "c1", "--to", "b1", "hi")
    assert ended.returncode == 1 and "ended" in ended.stderr
    unregistered_sender = team("send", "--from", "zed-1", "--to", "a1", "hi")
    assert unregistered_sender.returncode == 1


def test_exactly_one_audience(team):
    assert team("send", "--from", "c1", "hi").returncode == 2
    assert team("send", "--from", "c1", "--to", "a1", "--all", "hi").returncode == 2


def test_to_path_reaches_every_live_holder_that_covers_it(team):
    for sid in ("d1", "e1"):
        assert team("register", sid, "--provider", "Kimi", "--working-on", "docs").returncode == 0
        assert team("lock", "acquire", "docs/", "--shared", "--session", sid).returncode == 0
    to_docs = js(send(team, "--from", "c1", "--to-path", "docs/guide.md", "who writes docs?"))
    assert sorted(to_docs["recipients"]) == ["d1", "e1"]
    to_src = js(send(team, "--from", "c1", "--to-path", "src/auth.py", "who owns auth?"))
    assert to_src["recipients"] == ["a1"]  # via its lock on the directory src/
    # the sender is never its own audience
    own = js(send(team, "--from", "d1", "--to-path", "docs/guide.md", "me too"))
    assert own["recipients"] == ["e1"]
    assert [m["id"] for m in js(team("--json", "inbox", "a1"))["messages"]] == [to_src["id"]]


def test_to_tag_reaches_sessions_registered_with_it(team):
    assert team("register", "f1", "--provider", "Gemini", "--working-on", "ui",
                "--tag", "frontend", "--tag", "css").returncode == 0
    assert team("register", "g1", "--provider", "Gemini", "--working-on", "ui",
                "--tag", "frontend").returncode == 0
    assert "frontend, css" in team("show", "f1").stdout
    sent = js(send(team, "--from", "c1", "--to-tag", "frontend", "new tokens in css"))
    assert sorted(sent["recipients"]) == ["f1", "g1"]
    assert js(send(team, "--from", "c1", "--to-tag", "css", "x"))["recipients"] == ["f1"]
    assert team("register", "h1", "--provider", "X", "--tag", "bad tag!").returncode == 2


def test_all_reaches_every_other_live_session(team):
    sent = js(send(team, "--from", "c1", "--all", "standup"))
    assert sorted(sent["recipients"]) == ["a1", "b1"]


def test_thread_follows_replies(team):
    root = js(send(team, "--from", "c1", "--to", "a1", "--subject", "q", "may I?"))["id"]
    reply = js(send(team, "--from", "a1", "--to", "c1", "--reply-to", root, "yes"))["id"]
    again = js(send(team, "--from", "c1", "--to", "a1", "--reply-to", reply, "thanks"))["id"]
    js(send(team, "--from", "b1", "--to", "a1", "unrelated"))
    for mid in (root, reply, again):
        thread = js(team("--json", "thread", mid))
        assert thread["thread"] == root
        assert [m["id"] for m in thread["messages"]] == [root, reply, again]
    text = team("thread", again)
    assert text.returncode == 0
    assert text.stdout.index("may I?") < text.stdout.index("yes") < text.stdout.index("thanks")


def test_session_from_the_environment(team):
    proc = team("--json", "send", "--to", "a1", "hi", env={"AGENT_REGISTRY_SESSION": "c1"})
    mid = js(proc)["id"]
    inbox = js(team("--json", "inbox", env={"AGENT_REGISTRY_SESSION": "a1"}))
    assert [m["id"] for m in inbox["messages"]] == [mid]
    assert js(team("--json", "ack", mid, env={"AGENT_REGISTRY_SESSION": "a1"}))["acked"] == [mid]


def test_inbox_wait_returns_when_a_message_arrives(team, repo):
    waiter = subprocess.Popen([CLI, "--json", "inbox", "a1", "--wait", "60"], cwd=repo,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(0.5)
        assert waiter.poll() is None  # nothing yet: it waits
        mid = js(send(team, "--from", "c1", "--to", "a1", "wake up"))["id"]
        out, err = waiter.communicate(timeout=60)
    finally:
        if waiter.poll() is None:
            waiter.kill()
    assert waiter.returncode == 0, err
    assert [m["id"] for m in json.loads(out)["messages"]] == [mid]


def test_inbox_wait_times_out_empty(team):
    proc = team("--json", "inbox", "a1", "--wait", "1")
    assert proc.returncode == 0 and js(proc)["messages"] == []


def test_refused_claim_says_how_to_reach_the_holder(team):
    proc = team("lock", "acquire", "src/auth.py", "--session", "c1")
    assert proc.returncode == 1
    assert "agent-registry send --to a1" in proc.stderr
    data = json.loads(team("--json", "lock", "acquire", "src/auth.py", "--session", "c1").stdout)
    assert data["error"]["conflicts"][0]["reach"].startswith("agent-registry send --to a1")


def test_handoff_text_waits_for_whoever_takes_the_path(team, repo):
    proc = team("--json", "handoff", "a1", "--text", "token refresh half done; see TODO in auth.py",
                "--to-path", "src/auth.py")
    handoff = js(proc)
    assert handoff["message"]["kind"] == "handoff"
    assert team("finish", "a1").returncode == 0
    # the next session whose space covers the path hears of it at register
    reg = team("register", "n1", "--provider", "Claude", "--working-on", "auth",
               "--space", "src/auth.py")
    assert reg.returncode == 0
    assert "token refresh half done" in reg.stderr and handoff["id"] in reg.stderr
    data = js(team("--json", "register", "n2", "--provider", "Claude", "--space", "src/"))
    assert [m["id"] for m in data["waiting"]] == [handoff["id"]]
    inbox = js(team("--json", "inbox", "n1"))
    assert [m["id"] for m in inbox["messages"]] == [handoff["id"]]
    assert js(team("--json", "ack", handoff["id"], "--session", "n1"))["acked"] == [handoff["id"]]
    # taken: no longer waiting for the others
    assert js(team("--json", "inbox", "n2"))["messages"] == []
    unrelated = js(team("--json", "register", "n3", "--provider", "Claude", "--space", "docs/"))
    assert unrelated["waiting"] == []


def test_handoff_to_a_session_and_the_old_path_form(team, repo):
    handoff = js(team("--json", "handoff", "a1", "--text", "yours now", "--to", "c1"))
    assert handoff["recipients"] == ["c1"]
    assert [m["id"] for m in js(team("--json", "inbox", "c1"))["messages"]] == [handoff["id"]]
    old = team("handoff", "b1", ".handoff/HANDOFF-007.md")
    assert old.returncode == 0 and ".handoff/HANDOFF-007.md" in old.stdout
    shown = team("show", "b1")
    assert ".handoff/HANDOFF-007.md" in shown.stdout
    assert team("handoff", "b1", "--text", "").returncode == 2
    assert team("handoff", "b1").returncode == 2  # neither PATH nor --text


def test_register_prints_unread_messages_for_a_re_registered_session(team):
    js(send(team, "--from", "c1", "--to", "a1", "ping while you were away"))
    again = team("register", "a1", "--resume", "--provider", "Codex", "--working-on", "back")
    assert again.returncode == 0 and "ping while you were away" in again.stderr


def test_replay_validates_operations(registry):
    """An operation replayed from another clone's commit is validated like a new one:
    a malformed send is refused, never written."""
    import agent_registry.core.messages  # noqa: F401  (registers send and ack, as `send` does)
    from agent_registry.errors import BadInput, Refused
    registry.init()
    registry.register("a1", provider="x")
    registry.register("b1", provider="x")
    good = registry.new_op("send", session="a1", message={
        "id": "0" * 16, "kind": "message", "to": {"session": "b1"}, "subject": "",
        "body": "hi", "key": None, "reply_to": None})
    before = registry.tip()
    for bad in ({"body": ""}, {"body": "x" * (64 * 1024 + 1)}, {"key": "a\nb"},
                {"to": {"session": "b1", "path": "x"}}, {"id": "../../etc"}, {"body": 7}):
        op = dict(good, message={**good["message"], **bad})
        with pytest.raises(Refused):
            registry.build(registry.tip(), op)
    for broken in ({**good, "session": None}, {k: v for k, v in good.items() if k != "session"}):
        with pytest.raises((Refused, BadInput)):  # core/shapes.py checks the common fields
            registry.build(registry.tip(), broken)
    assert registry.tip() == before
    assert registry.apply(good)["id"] == "0" * 16


# -- through a remote -------------------------------------------------------------------

def clones(tmp_path, n: int) -> list:
    """A bare remote and *n* clones of it, each with session s<i> registered."""
    from helpers import Runner, make_repo
    bare = tmp_path / "remote.git"
    seed = make_repo(tmp_path / "seed")
    git(tmp_path, "init", "-q", "--bare", str(bare))
    git(seed, "push", "-q", str(bare), "main")
    out = []
    for i in range(n):
        git(tmp_path, "clone", "-q", str(bare), str(tmp_path / f"c{i}"))
        runner = Runner(tmp_path / f"c{i}")
        assert runner("register", f"s{i}", "--provider", "Codex").returncode == 0
        out.append(runner)
    return out


def test_a_message_crosses_clones(tmp_path):
    a, b = clones(tmp_path, 2)
    mid = js(a("--json", "send", "--from", "s0", "--to", "s1", "across"))["id"]
    inbox = js(b("--json", "inbox", "s1"))  # fetches first
    assert [m["id"] for m in inbox["messages"]] == [mid]
    assert js(b("--json", "ack", mid, "--session", "s1"))["acked"] == [mid]
    assert js(a("--json", "inbox", "s1", "--all"))["messages"][0]["acked"] is True


def at_once(tmp_path, team, scripts: list[str], name: str) -> list[str]:
    """Run one bash script per clone, all released at the same instant; their stdouts."""
    go = tmp_path / name
    procs = [subprocess.Popen(["bash", "-c", f'while [ ! -e "{go}" ]; do sleep 0.005; done; {script}'],
                              cwd=clone.cwd, text=True, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE) for clone, script in zip(team, scripts)]
    go.touch()
    outs = [p.communicate(timeout=600) for p in procs]
    assert all(p.returncode == 0 for p in procs), [e for _, e in outs]
    return [out for out, _ in outs]


@pytest.mark.parametrize("n, each", [(4, 2), pytest.param(16, 3, marks=pytest.mark.slow)])
def test_clones_sending_at_once_none_lost_none_doubled(tmp_path, n, each):
    """Every clone sends to the next one at once, each message twice (a retry after a
    timeout: the key keeps it single); then every clone acknowledges what it got at once,
    twice too.  All of it lands on the remote's messages branch, once; the registry
    branch holds none of it."""
    team = clones(tmp_path, n)
    main = git(tmp_path / "remote.git", "rev-parse", BRANCH).strip()
    sends = []
    for i in range(n):
        to = f"s{(i + 1) % n}"
        sends.append("; ".join(f"{CLI} send --from s{i} --to {to} --key k{j} 'from s{i} #{j}' "
                               f"&& {CLI} send --from s{i} --to {to} --key k{j} 'from s{i} #{j}' "
                               "|| exit $?" for j in range(each)))
    outs = at_once(tmp_path, team, sends, "go-send")
    ids = [out.split() for out in outs]
    assert sum(map(len, ids)) == 2 * n * each
    assert len({i for got in ids for i in got}) == n * each  # each retry, the same id
    remote = tmp_path / "remote.git"
    on_remote = git(remote, "ls-tree", "-r", "--name-only", MESSAGES, "--", "messages").split()
    assert len(on_remote) == n * each
    for j, clone in enumerate(team):  # each inbox holds what the previous clone sent
        inbox = js(clone("--json", "inbox", f"s{j}"))["messages"]
        assert sorted(m["body"] for m in inbox) == \
            sorted(f"from s{(j - 1) % n} #{k}" for k in range(each))
    acks = [f"{CLI} ack {' '.join(dict.fromkeys(ids[(j - 1) % n]))} --session s{j} && "
            f"{CLI} ack {' '.join(dict.fromkeys(ids[(j - 1) % n]))} --session s{j}"
            for j in range(n)]
    at_once(tmp_path, team, acks, "go-ack")
    from helpers import Runner
    fresh = tmp_path / "fresh"  # a clone made now reads every acknowledgement once
    git(tmp_path, "clone", "-q", str(remote), str(fresh))
    reader = Runner(fresh)
    for j in range(n):
        got = js(reader("--json", "inbox", f"s{j}", "--all"))["messages"]
        assert sorted((m["id"], m["acked"]) for m in got) == \
            sorted((mid, True) for mid in set(ids[(j - 1) % n])), j
        for mid in set(ids[(j - 1) % n]):
            assert js(reader("--json", "thread", mid))["messages"][0]["acked_by"] == [f"s{j}"]
    from test_scale_clones import rendered_again_only
    assert rendered_again_only(remote, main, git(remote, "rev-parse", BRANCH).strip())
    assert js(team[0]("--json", "inbox", "s0"))["messages"] == []


# -- Claude Code: messages reach the agent's context ----------------------------------

CLAUDE_ID = "7d2e4c1a-9b8f-4e3d-8c2b-1a0f9e8d7c6b"


def fire(repo, event: str, payload: dict) -> subprocess.CompletedProcess:
    """The installed hook command, run as Claude Code runs it: through a shell, in the
    project, with the event's JSON on stdin."""
    settings = json.loads((repo / ".claude" / "settings.json").read_text())
    [command] = [h["command"] for g in settings["hooks"][event] for h in g["hooks"]
                 if "harness hook claude" in h["command"]]
    body = {"session_id": CLAUDE_ID, "transcript_path": "/tmp/t.jsonl", "cwd": str(repo),
            "hook_event_name": event, **payload}
    return subprocess.run(command, shell=True, cwd=repo, input=json.dumps(body),
                          capture_output=True, text=True, timeout=60)


def test_claude_code_hears_of_messages_on_its_next_prompt(team, repo):
    assert team("harness", "install", "claude", check_untouched=False).returncode == 0
    start = fire(repo, "SessionStart", {"source": "startup"})
    assert start.returncode == 0, start.stderr
    sid = f"claude-{CLAUDE_ID}"
    quiet = fire(repo, "UserPromptSubmit", {"prompt": "go on"})
    assert quiet.returncode == 0 and quiet.stdout == "", quiet.stderr
    mid = js(send(team, "--from", "a1", "--to", sid, "--subject", "auth",
                  "please leave src/auth.py to me until noon"))["id"]
    told = fire(repo, "UserPromptSubmit", {"prompt": "next step"})
    assert told.returncode == 0, told.stderr
    out = json.loads(told.stdout)["hookSpecificOutput"]
    assert out["hookEventName"] == "UserPromptSubmit"
    assert mid in out["additionalContext"] and "leave src/auth.py to me" in out["additionalContext"]
    assert "a1" in out["additionalContext"]
    # told once: the next prompt does not repeat it
    assert fire(repo, "UserPromptSubmit", {"prompt": "more"}).stdout == ""
    assert [m["id"] for m in js(team("--json", "inbox", sid))["messages"]] == [mid]


def test_a_denied_edit_says_how_to_ask_the_holder(team, repo):
    assert team("harness", "install", "claude", check_untouched=False).returncode == 0
    assert fire(repo, "SessionStart", {"source": "startup"}).returncode == 0
    denied = fire(repo, "PreToolUse", {"tool_name": "Edit", "tool_use_id": "toolu_01",
                                       "tool_input": {"file_path": "src/auth.py"}})
    reason = json.loads(denied.stdout)["hookSpecificOutput"]["permissionDecisionReason"]
    assert "agent-registry send --to a1" in reason


def test_claude_code_session_start_brings_the_waiting_handoff(team, repo):
    handoff = js(team("--json", "handoff", "a1", "--text", "refresh tokens half done",
                      "--to", "c1"))
    assert handoff["recipients"] == ["c1"]
    note = js(team("--json", "handoff", "a1", "--text", "README needs the new flags",
                   "--to-path", "README.md"))
    assert team("harness", "install", "claude", check_untouched=False).returncode == 0
    start = fire(repo, "SessionStart", {"source": "startup"})
    assert start.returncode == 0, start.stderr
    # the new session holds nothing yet: it hears nothing of the README handoff ...
    assert note["id"] not in json.loads(start.stdout)["hookSpecificOutput"]["additionalContext"]
    sid = f"claude-{CLAUDE_ID}"
    assert team("lock", "acquire", "README.md", "--session", "b1").returncode == 0
    assert team("finish", "b1").returncode == 0
    assert team("lock", "acquire", "README.md", "--session", sid).returncode == 0
    # ... until it claims the path: then its next prompt brings it
    told = fire(repo, "UserPromptSubmit", {"prompt": "go"})
    assert note["id"] in json.loads(told.stdout)["hookSpecificOutput"]["additionalContext"]


# -- the dashboard ------------------------------------------------------------------------

def test_dashboard_inbox_thread_and_live_areas(team, repo):
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from agent_registry import Registry
    from agent_registry.dashboard.app import create_app
    from agent_registry.dashboard.events import changed_paths, describe_change, signature
    root = js(send(team, "--from", "c1", "--to", "a1", "--subject", "q", "may I?"))["id"]
    before = tips(repo)
    mine = clone_tip(repo)  # the sends and the ack go to this clone's ref
    with Registry.open(str(repo)) as registry:
        seen = signature(registry)
    reply = js(send(team, "--from", "a1", "--to", "c1", "--reply-to", root, "yes"))["id"]
    assert team("ack", root, "--session", "a1").returncode == 0
    app = create_app(str(repo))
    with TestClient(app, base_url="http://127.0.0.1") as client:
        inbox = client.get("/api/sessions/a1/inbox").json()
        assert inbox["messages"] == []
        every = client.get("/api/sessions/a1/inbox?all=true").json()["messages"]
        assert [(m["id"], m["acked"]) for m in every] == [(root, True)]
        assert [m["id"] for m in client.get("/api/sessions/c1/inbox").json()["messages"]] == [reply]
        thread = client.get(f"/api/messages/{reply}/thread").json()
        assert [m["id"] for m in thread["messages"]] == [root, reply]
        assert thread["messages"][0]["acked_by"] == ["a1"]
        assert client.get("/api/messages/0123456789abcdef/thread").status_code == 400
        assert client.get("/api/sessions/ghost-1/inbox").status_code == 404
    # what the SSE stream says after the reply and the ack: both areas, both sessions
    with Registry.open(str(repo)) as registry:
        assert signature(registry) != seen  # only the clone ref moved
        change = describe_change(changed_paths(registry, mine, clone_tip(repo)))
    assert tips(repo)[0] == before[0]
    assert {"messages", "acks"} <= set(change["areas"])
    assert {"a1"} <= set(change["sessions"])


# -- the MCP server -------------------------------------------------------------------------

def test_messages_through_the_mcp_server(team, repo):
    pytest.importorskip("mcp", reason="the mcp extra is not installed")
    import anyio
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    async def call(session, tool, **arguments):
        result = await session.call_tool(tool, arguments)
        text = "".join(c.text for c in result.content if c.type == "text")
        return result.is_error, text, result.structured_content or {}

    async def script():
        params = StdioServerParameters(command=CLI, args=["-C", str(repo), "mcp"])
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                sent = await call(session, "send", session_id="c1", to_path="src/auth.py",
                                  body="may I?", key="q1")
                again = await call(session, "send", session_id="c1", to_path="src/auth.py",
                                   body="may I?", key="q1")
                inbox = await call(session, "inbox", session_id="a1")
                acked = await call(session, "ack", session_id="a1",
                                   message_ids=[sent[2]["id"]])
                stranger = await call(session, "ack", session_id="b1",
                                      message_ids=[sent[2]["id"]])
                both = await call(session, "send", session_id="c1", to="a1", all=True, body="x")
                thread = await call(session, "thread", message_id=sent[2]["id"])
                return sent, again, inbox, acked, stranger, both, thread

    sent, again, inbox, acked, stranger, both, thread = anyio.run(script)
    assert not sent[0] and sent[2]["recipients"] == ["a1"]
    assert again[2]["id"] == sent[2]["id"] and again[2]["created"] is False
    assert [m["id"] for m in inbox[2]["messages"]] == [sent[2]["id"]]
    assert acked[2]["acked"] == [sent[2]["id"]]
    assert stranger[0] and "not a recipient" in stranger[1]
    assert both[0] and "exactly one" in both[1]
    assert thread[2]["messages"][0]["acked_by"] == ["a1"]


def test_to_path_reaches_a_later_holder_spelled_otherwise_where_case_is_ignored(team, repo):
    """Where the repository ignores case (core.ignorecase), a message to a new file
    `notes/Plan.md` reaches a later holder of `notes/plan.md` (its inbox, its ack): the
    two spellings name one file there."""
    git(repo, "config", "core.ignorecase", "true")
    assert team("register", "d1", "--provider", "Kimi", "--working-on", "notes").returncode == 0
    assert team("lock", "acquire", "notes/Plan.md", "--session", "d1").returncode == 0
    sent = js(send(team, "--from", "c1", "--to-path", "notes/Plan.md", "the plan?"))
    assert sent["recipients"] == ["d1"]
    assert team("finish", "d1").returncode == 0
    assert team("register", "e1", "--provider", "Kimi", "--working-on", "notes").returncode == 0
    assert team("lock", "acquire", "notes/plan.md", "--session", "e1").returncode == 0
    assert [m["id"] for m in js(team("--json", "inbox", "e1"))["messages"]] == [sent["id"]]
    assert js(team("--json", "ack", sent["id"], "--session", "e1"))["acked"] == [sent["id"]]


def test_a_person_sends_high_and_asks_for_an_acknowledgement(team, repo):
    """A person (a name, no session) sends; importance and ack-required are stored and
    shown by inbox, thread and --json (issue 36)."""
    sent = js(team("--json", "send", "--from", "alice", "--to", "a1", "--importance", "high",
                   "--ack-required", "stop: the API changed"))
    record = sent["message"]
    assert record["from"] == "alice" and record["sender"] == "person"
    assert record["importance"] == "high" and record["ack_required"] is True
    plain = js(send(team, "--from", "c1", "--to", "a1", "lunch?"))["message"]
    assert (plain["sender"], plain["importance"], plain["ack_required"]) == \
        ("session", "normal", False)
    text = team("inbox", "a1").stdout
    assert f"{sent['id']}" in text and "HIGH message from alice (a person)" in text
    assert "ack required" in text and "message from c1" in text
    listed = {m["id"]: m for m in js(team("--json", "inbox", "a1"))["messages"]}
    assert listed[sent["id"]]["importance"] == "high" and listed[sent["id"]]["ack_required"]
    js(team("--json", "ack", sent["id"], "--session", "a1"))
    thread = js(team("--json", "thread", sent["id"]))["messages"][0]
    assert thread["acked_by"] == ["a1"] and thread["sender"] == "person"
    assert "ack required (acked by a1)" in team("thread", sent["id"]).stdout
    # a name like a session's is never taken for a person; nothing written
    before = tips(repo)
    for args, code in ((("--from", "c2", "--to", "a1", "hi"), 1),  # a typo of c1
                       (("--from", "zed-1", "--to", "a1", "hi"), 1),  # shaped like an id
                       (("--from", "alice", "--to", "a1", "--importance", "urgent", "hi"), 2)):
        proc = team("send", *args)
        assert proc.returncode == code and len(proc.stderr.strip().splitlines()) == 1, \
            proc.stderr
    assert tips(repo) == before


def test_a_force_release_tells_the_holder_who_took_it_and_why(team):
    """The holder of a force-released lock gets a high message naming who and why
    (issue 36); its inbox was empty before."""
    freed = js(team("--json", "lock", "force-release", "README.md", "--force", "--by", "alice",
                    "--reason", "b1 looks stuck; I am fixing the README"))
    assert freed["previous"] == ["b1"] and [t["session"] for t in freed["told"]] == ["b1"]
    (message,) = js(team("--json", "inbox", "b1"))["messages"]
    assert message["id"] == freed["told"][0]["id"] and message["importance"] == "high"
    assert message["from"] == "alice" and message["sender"] == "person"
    assert "README.md was taken by alice while you were live: b1 looks stuck" in message["body"]
    text = team("lock", "force-release", "src/", "--force", "--by", "c1", "--reason", "mine now")
    assert text.returncode == 0 and "told a1" in text.stdout
    inbox = team("inbox", "a1").stdout
    assert "HIGH message from c1\n  your lock on src/ was taken by c1" in inbox
