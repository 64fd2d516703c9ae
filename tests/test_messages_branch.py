"""Messages never slow claims (issue 12).

In the layout `init` makes (format 3) a send and an ack are committed on the writing
clone's own ref, a keyed send on `agent-registry-messages`, a sibling of the registry
branch written by a second registry synced like the first (docs/messages.md); readers
read the clone refs, the messages branch and the registry branch, so messages written on
the registry branch before either existed (and kept there by the conversion) lose
nothing.  Real git, real processes, real bare remotes; what was written is read back
through inbox and thread, which refs moved through git."""
from __future__ import annotations

import json
import os
import subprocess

from helpers import git
from test_messages import clones as team_of

BRANCH = "agent-registry"
MESSAGES = "agent-registry-messages"


def ref(where, branch: str) -> str:
    return git(where, "rev-parse", "-q", "--verify", f"refs/heads/{branch}", check=False).strip()


def listing(where, branch: str, folder: str) -> list[str]:
    out = git(where, "ls-tree", "-r", "--name-only", branch, "--", folder, check=False)
    return [line for line in out.splitlines() if line]


def js(proc) -> dict:
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def registry_refs(where) -> dict[str, str]:
    out = git(where, "for-each-ref", "--format=%(refname) %(objectname)", "refs/heads/")
    return {name: tip for name, tip in (line.split() for line in out.splitlines())
            if name.startswith(f"refs/heads/{BRANCH}")}


def moved(before: dict[str, str], after: dict[str, str]) -> list[str]:
    return sorted(r for r in after if after[r] != before.get(r))


def team(run) -> None:
    assert run("init").returncode == 0
    for sid in ("a1", "b1", "c1"):
        assert run("register", sid, "--provider", "Codex").returncode == 0
    assert run("lock", "acquire", "src/", "--session", "a1").returncode == 0


def test_a_send_and_an_ack_move_only_the_writers_ref_and_a_keyed_send_the_messages_branch(
        run, repo):
    team(run)
    before = registry_refs(repo)
    sent = js(run("--json", "send", "--from", "c1", "--to-path", "src/auth.py", "may I?"))
    assert sent["recipients"] == ["a1"]
    clone = [r for r in moved(before, registry_refs(repo))]
    assert len(clone) == 1 and f"{BRANCH}-clones/" in clone[0], clone  # its ref alone
    assert js(run("--json", "ack", sent["id"], "--session", "a1"))["acked"] == [sent["id"]]
    assert moved(before, registry_refs(repo)) == clone
    assert js(run("--json", "thread", sent["id"]))["messages"][0]["acked_by"] == ["a1"]
    assert ref(repo, MESSAGES) == ""  # no keyed send yet: no messages branch
    keyed = js(run("--json", "send", "--from", "c1", "--to", "a1", "--key", "k1", "keyed"))
    after_keyed = registry_refs(repo)
    assert moved(before, after_keyed) == sorted([*clone, f"refs/heads/{MESSAGES}"])
    assert after_keyed[clone[0]] == registry_refs(repo)[clone[0]]
    assert js(run("--json", "ack", keyed["id"], "--session", "a1"))["acked"] == [keyed["id"]]
    sent = keyed  # the messages branch's log below: the keyed send and its ack
    # the messages branch's page says what it is and where the registry is, not an empty
    # sessions table; its README explains the branch
    page = git(repo, "show", f"{MESSAGES}:registry.md")
    assert "Live sessions" not in page and "agent-registry" in page and "registry.md" in page
    assert "ack" in page
    readme = git(repo, "show", f"{MESSAGES}:README.md")
    assert f"`{MESSAGES}`" in readme and f"`{BRANCH}`" in readme
    # the registry branch's page is still the registry's, untouched by messages
    assert "a1" in git(repo, "show", f"{BRANCH}:registry.md")
    # each commit is one operation, replayable
    log = git(repo, "log", "--format=%s", MESSAGES)
    assert log.splitlines()[0] == f"message {sent['id']} from c1 to a1", log  # one operation


def test_a_handoff_document_updates_the_session_on_the_registry_branch(run, repo):
    team(run)
    sent = js(run("--json", "handoff", "a1", ".handoff/H-1.md", "--to", "c1"))
    assert [m["id"] for m in js(run("--json", "thread", sent["id"]))["messages"]] == [sent["id"]]
    sessions = {s["id"]: s for s in js(run("--json", "status"))["sessions"]}
    assert sessions["a1"]["handoff"] == ".handoff/H-1.md"
    assert [m["id"] for m in js(run("--json", "inbox", "c1"))["messages"]] == [sent["id"]]


def _commit_on(repo, branch: str, files: dict[str, str], subject: str) -> None:
    """Commit *files* on *branch* with plain git, through an index of its own (the
    single-branch layout wrote messages like this, on the registry branch)."""
    env = {**os.environ, "GIT_INDEX_FILE": str(repo / ".git" / "legacy-index")}

    def g(*args, stdin=None):
        return subprocess.run(["git", *args], cwd=repo, env=env, input=stdin, text=True,
                              capture_output=True, check=True).stdout.strip()
    g("read-tree", branch)
    for path, text in files.items():
        blob = g("hash-object", "-w", "--stdin", stdin=text)
        g("update-index", "--add", "--cacheinfo", f"100644,{blob},{path}")
    tree = g("write-tree")
    commit = g("commit-tree", tree, "-p", branch, "-m", subject)
    g("update-ref", f"refs/heads/{branch}", commit)
    os.unlink(env["GIT_INDEX_FILE"])


def _old_message(mid: str, sender: str, to: str, body: str, ts: float) -> str:
    return json.dumps({"id": mid, "kind": "message", "from": sender, "to": {"session": to},
                       "recipients": [to], "subject": None, "body": body, "key": None,
                       "reply_to": None, "document": None, "thread": mid,
                       "at": "2026-01-01T00:00:00Z", "ts": ts}, indent=1) + "\n"


def test_messages_of_the_single_branch_layout_are_still_read_and_acked(run, repo):
    team(run)
    old, done = "0123456789abcdef", "fedcba9876543210"
    _commit_on(repo, BRANCH, {
        f"messages/c1/{old}.json": _old_message(old, "c1", "a1", "written before", 1767225600.0),
        f"messages/b1/{done}.json": _old_message(done, "b1", "a1", "acked before", 1767225500.0),
        f"acks/a1/{done}.json": json.dumps({"id": done, "session": "a1",
                                            "at": "2026-01-01T00:00:00Z"}) + "\n",
    }, "message written by the single-branch layout")
    main = ref(repo, BRANCH)
    inbox = js(run("--json", "inbox", "a1"))["messages"]
    assert [m["id"] for m in inbox] == [old]
    every = js(run("--json", "inbox", "a1", "--all"))["messages"]
    assert [(m["id"], m["acked"]) for m in every] == [(done, True), (old, False)]
    reply = js(run("--json", "send", "--from", "a1", "--to", "c1", "--reply-to", old, "yes"))
    assert reply["message"]["thread"] == old
    thread = js(run("--json", "thread", reply["id"]))
    assert [m["id"] for m in thread["messages"]] == [old, reply["id"]]
    # acknowledging an old message writes the ack where this clone's acks go
    before = registry_refs(repo)
    assert js(run("--json", "ack", old, "--session", "a1"))["acked"] == [old]
    assert [r for r in moved(before, registry_refs(repo))] == \
        [r for r in registry_refs(repo) if f"{BRANCH}-clones/" in r]
    assert js(run("--json", "ack", done, "--session", "a1"))["already"] == [done]
    stranger = run("ack", old, "--session", "b1")
    assert stranger.returncode == 1 and "not a recipient" in stranger.stderr
    assert ref(repo, BRANCH) == main
    assert js(run("--json", "inbox", "a1"))["messages"] == []
    assert reply["id"] in run("register", "c1", "--provider", "Codex", "--resume").stderr  # waits
    assert js(run("--json", "thread", old))["messages"][0]["acked_by"] == ["a1"]


# -- through a remote -------------------------------------------------------------------

def clones(tmp_path, n: int) -> tuple:
    """The bare remote and *n* clones of it (test_messages.clones)."""
    return tmp_path / "remote.git", team_of(tmp_path, n)


def test_claims_confirm_while_the_remote_refuses_where_messages_go(tmp_path):
    """A remote that refuses the refs messages are written on (this clone's own ref, and
    the messages branch for a keyed send) leaves them unconfirmed, kept in the clone and
    said so, while claims still confirm; once it takes them, sync pushes them."""
    bare, (a, b) = clones(tmp_path, 2)
    hook = bare / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\nwhile read old new ref; do\n"
                    f"  case \"$ref\" in refs/heads/{MESSAGES}|refs/heads/{BRANCH}-clones/*) "
                    "echo 'messages are frozen' >&2; exit 1;; esac\ndone\nexit 0\n")
    hook.chmod(0o755)
    main = ref(bare, BRANCH)
    for args in (["hello"], ["--key", "k1", "keyed hello"]):
        sent = a("--json", "send", "--from", "s0", "--to", "s1", *args)
        assert sent.returncode == 0, sent.stderr
        data = json.loads(sent.stdout)
        assert data["confirmed"] is False and data["remote_error"]["kind"] == "denied", data
        assert "not pushed to origin" in sent.stderr
    assert ref(bare, MESSAGES) == "" and not [r for r in registry_refs(bare) if "-clones/" in r]
    assert ref(bare, BRANCH) == main
    claim = a("--json", "lock", "acquire", "src/auth.py", "--session", "s0")
    assert claim.returncode == 0, claim.stderr  # confirmed by the remote
    assert b("sync").returncode == 0
    check = b("--json", "lock", "check", "src/auth.py", "--session", "s1")
    assert check.returncode == 1  # another clone reads the claim: locked
    assert json.loads(check.stdout)["paths"][0]["owner"] == "s0"
    assert b("lock", "acquire", "README.md", "--session", "s1").returncode == 0
    status = js(a("--json", "status"))
    assert status["sync"]["messages"]["ahead"] == 1
    assert status["sync"]["clone"]["ahead"] >= 1, status["sync"]
    assert a("sync").returncode == 3  # the messages still wait
    hook.unlink()
    synced = js(a("--json", "sync"))
    assert synced["messages"]["pushed"] is True
    assert sorted(m["body"] for m in js(b("--json", "inbox", "s1"))["messages"]) == \
        ["hello", "keyed hello"]


def test_gc_squashes_the_messages_branch_too(tmp_path):
    bare, (a, b) = clones(tmp_path, 2)
    ids = [js(a("--json", "send", "--from", "s0", "--to", "s1", "--key", f"k{i}", f"m{i}"))["id"]
           for i in range(3)]  # keyed: on the messages branch
    ids.append(js(a("--json", "send", "--from", "s0", "--to", "s1", "m3"))["id"])  # a's ref
    assert js(b("--json", "ack", *ids, "--session", "s1"))["acked"] == ids
    before = int(git(bare, "rev-list", "--count", MESSAGES))
    assert before >= 3
    result = js(a("--json", "gc", "--yes", "--keep-days", "0"))
    assert result["messages"]["squashed"] >= 2
    assert int(git(bare, "rev-list", "--count", MESSAGES)) < before
    # nothing lost: every message and acknowledgement reads as before
    every = js(b("--json", "inbox", "s1", "--all"))["messages"]
    assert sorted((m["id"], m["acked"]) for m in every) == sorted((i, True) for i in ids)
    # the other clone takes the rewrite in its stride: its next ack and inbox work
    later = js(a("--json", "send", "--from", "s0", "--to", "s1", "--key", "k9", "after gc"))["id"]
    assert js(b("--json", "ack", later, "--session", "s1"))["acked"] == [later]
    assert js(b("--json", "inbox", "s1", "--all"))["messages"][-1]["body"] == "after gc"


def test_register_in_another_clone_hears_of_a_handoff_sent_there(tmp_path):
    """register syncs the registry branch as every change does, and the messages branch
    too before it lists what waits: a handoff from another clone is there."""
    _, (a, b) = clones(tmp_path, 2)
    sent = js(a("--json", "handoff", "s0", "--text", "tokens half done", "--to-path", "src/auth.py"))
    assert sent["recipients"] == []  # waits for whoever takes the path
    reg = js(b("--json", "register", "n1", "--provider", "Claude", "--space", "src/"))
    assert [m["id"] for m in reg["waiting"]] == [sent["id"]]
