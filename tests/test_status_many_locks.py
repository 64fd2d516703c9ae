"""`status` at many locks (issue 35): the reasons of its sessions' locks come from their
records read in one batch, and only the records whose bytes may hold a reason are parsed;
what it shows is what reading and parsing every record one by one shows, in both layouts."""
from __future__ import annotations

import os
import subprocess

import pytest

from agent_registry.core.registry import Registry
from agent_registry.branch.records import DEFAULT_TTL


def per_record_reasons(registry) -> list[dict]:
    """The reasons `lock list` shows (Registry.locks: every record read and parsed, one
    lookup each)."""
    return sorted(({"path": lock["path"], "owner": lock["owner"], "reason": lock["reason"]}
                   for lock in registry.locks() if lock["reason"]),
                  key=lambda r: (r["path"], r["owner"]))


@pytest.mark.parametrize("shards", [0, 4])
def test_status_at_many_locks_shows_what_each_record_says(repo, clock, shards):
    from agent_registry.sync import Registry as Sharding
    gone = subprocess.Popen(["sleep", "60"])
    kind = Sharding if shards else Registry
    with kind.open(str(repo), clock=clock) as registry:
        registry.init(shards=shards)
        registry.register("s1", provider="test", pid=gone.pid)
        registry.register("s2", provider="test")
        registry.register("s3", provider="test")
        gone.kill()
        gone.wait()
        # s1: 60 locks without a reason, 2 with; a path that says "reason" has none
        registry.claim("s1", [f"src/a/f{i:03d}.py" for i in range(60)] + ["src/reasons.py"])
        registry.claim("s1", ["src/a/why.py"], reason="fixing the login")
        registry.claim("s1", ["src/a/f007.py"], reason='a "quoted" \\ reason')
        # s2: bound to no process, past the default TTL, but one lock's TTL outlives it
        registry.claim("s2", [f"src/b/f{i:03d}.py" for i in range(40)])
        registry.claim("s2", ["src/b/long.py"], ttl=3 * DEFAULT_TTL, reason="a long job")
        # s3: shares a folder with s2, with a reason of its own (s2 gave none)
        registry.claim("s2", ["docs/"], shared=True)
        registry.claim("s3", ["docs/"], shared=True, reason="docs pass")
        registry.claim("s3", [f"src/c/f{i:03d}.py" for i in range(30)])
        clock.advance(DEFAULT_TTL + 60)  # s1 and s2 past the default TTL
        status = registry.status()
        expected = per_record_reasons(registry)
    assert status["reasons"] == expected
    assert [(r["path"], r["owner"], r["reason"]) for r in expected] == [
        ("docs/", "s3", "docs pass"),
        ("src/a/f007.py", "s1", 'a "quoted" \\ reason'),
        ("src/a/why.py", "s1", "fixing the login"),
        ("src/b/long.py", "s2", "a long job")]
    zombie = {s["id"]: s["zombie"] for s in status["sessions"]}
    assert "gone" in zombie["s1"], zombie  # its process exited
    assert zombie["s2"] is None, zombie  # judged by its long lock's TTL
    assert "no heartbeat" in zombie["s3"], zombie  # bound to no process, past the TTL


def test_a_record_found_without_a_reason_is_not_read_again_but_a_new_one_is(repo, clock,
                                                                            monkeypatch):
    """status keeps the blob ids of the records it found without a reason
    (branch/reasonless.py): the next status does not read them again, and a record
    claimed anew, with a reason now, is a new blob, read and shown."""
    from agent_registry.branch import reasonless
    from agent_registry.branch.view import View
    monkeypatch.setattr(reasonless, "KEEP_FROM", 30)
    paths = [f"src/a/f{i:03d}.py" for i in range(30)]
    with Registry.open(str(repo), clock=clock) as registry:
        registry.init()
        registry.register("s1", provider="test")
        registry.claim("s1", paths)
        assert registry.status()["reasons"] == []
    read = []
    prefetch = View.prefetch
    monkeypatch.setattr(View, "prefetch", lambda view, names: read.extend(names) or
                        prefetch(view, names))
    with Registry.open(str(repo), clock=clock) as registry:
        assert registry.status()["reasons"] == []
        assert read == []  # not one record read again
        registry.claim("s1", ["src/a/f003.py"], reason="now with a why")
        read.clear()
        assert registry.status()["reasons"] == [
            {"path": "src/a/f003.py", "owner": "s1", "reason": "now with a why"}]
    assert len(set(read)) == 1, read  # the one record written since


def test_the_ids_kept_follow_the_records_status_meets(repo, clock, monkeypatch):
    """Released locks' records leave the kept ids as new ones come in: the file does not
    grow with every claim a clone ever made."""
    from agent_registry.branch import reasonless
    from agent_registry.branch.paths import record_name
    monkeypatch.setattr(reasonless, "KEEP_FROM", 1)
    with Registry.open(str(repo), clock=clock) as registry:
        registry.init()
        registry.register("s1", provider="test")
        registry.claim("s1", [f"src/a/f{i:03d}.py" for i in range(20)])
        registry.status()
        registry.release("s1", [f"src/a/f{i:03d}.py" for i in range(20)])
        registry.claim("s1", ["src/b/one.py", "src/b/two.py"])
        reasonless._known.clear()  # a new process: it reads the file
        registry.status()
        ids = reasonless.record_ids(registry.view(), [record_name("src/b/one.py"),
                                                      record_name("src/b/two.py")])
        reasonless._known.clear()
        assert reasonless.known(registry.repo) == set(ids.values())


def test_a_status_of_few_records_keeps_no_file(repo, clock):
    """Below reasonless.KEEP_FROM records, status reads them and writes nothing: a small
    registry's status stays read-only on disk (tests/test_repos.py across repositories);
    from it on, the ids are kept."""
    from agent_registry.branch import reasonless
    with Registry.open(str(repo), clock=clock) as registry:
        registry.init()
        registry.register("s1", provider="test")
        registry.claim("s1", [f"src/a/f{i:03d}.py" for i in range(reasonless.KEEP_FROM - 1)])
        registry.status()
        kept = registry.repo.state_path(reasonless.FILE)
        assert not os.path.exists(kept)
        registry.claim("s1", ["src/b/one.py"])
        registry.status()
        assert os.path.exists(kept)
