"""`watch` as a person hears it (issue 24): the shard fence and internal sessions are never
announced; more than `agent-registry.watchDigest` events of one pass arrive as one
digest; a history rewritten by `gc` between two passes loses no event, even a start
committed by a machine whose clock is 90 s slow; Apprise gets plain text, so HTML in
`working_on` is not markup.  Real `watch --once` passes, a real webhook on 127.0.0.1."""
from __future__ import annotations

import json
import time

import pytest

from helpers import FakeClock, git
from test_watch import Receiver, receiver, title, watch  # noqa: F401 (fixture)

pytest.importorskip("apprise")


def posts(receiver: Receiver) -> list[dict]:
    return [p for p in receiver.posts if p["accepted"]]


def test_the_shard_fence_is_never_announced(repo, run, receiver):
    assert run("init").returncode == 0
    assert watch(run, receiver).returncode == 0  # cold start
    assert run("register", "s0", "--provider", "Codex").returncode == 0
    converted = run("shard", "--count", "4")
    assert converted.returncode == 0, converted.stderr
    assert run("register", "s1", "--provider", "Codex").returncode == 0
    first = watch(run, receiver, "--idle-minutes", "0.001")
    assert first.returncode == 0, first.stderr
    time.sleep(0.2)
    assert watch(run, receiver, "--idle-minutes", "0.001").returncode == 0
    said = json.dumps(receiver.posts)
    assert "agent-registry-format-2" not in said and "layout format" not in said
    assert {title("s0", "started"), title("s1", "started")} <= set(receiver.accepted())


def test_a_burst_arrives_as_one_digest(repo, run, receiver):
    assert run("init").returncode == 0
    assert watch(run, receiver).returncode == 0
    for i in range(7):
        assert run("register", f"b{i}", "--provider", "Codex", "--working-on",
                   f"task {i}").returncode == 0
    result = watch(run, receiver)
    assert result.returncode == 0, result.stderr
    assert len(json.loads(result.stdout)["events"]) == 7
    [digest] = posts(receiver)
    assert digest["title"] == "agent-registry: 7 events"
    lines = digest["message"].splitlines()
    assert len(lines) == 7 and all(f"b{i} started" in lines[i] for i in range(7))
    assert watch(run, receiver).returncode == 0  # none of them again, alone
    assert len(posts(receiver)) == 1
    # at most N events of a pass go out one by one; N is git config agent-registry.watchDigest
    git(repo, "config", "agent-registry.watchDigest", "3")
    for i in range(3):
        assert run("register", f"c{i}", "--provider", "Codex").returncode == 0
    assert watch(run, receiver).returncode == 0
    assert receiver.accepted()[1:] == [title(f"c{i}", "started") for i in range(3)]
    for i in range(4):
        assert run("finish", f"b{i}").returncode == 0
    assert watch(run, receiver).returncode == 0
    assert receiver.accepted()[-1] == "agent-registry: 4 events"
    git(repo, "config", "agent-registry.watchDigest", "many")
    bad = watch(run, receiver)
    assert bad.returncode == 2 and "watchDigest" in bad.stderr


def test_a_rewritten_history_loses_no_event_even_from_a_slow_clock(repo, run, receiver):
    from agent_registry import Registry
    with Registry.open(str(repo), clock=FakeClock(time.time() - 3 * 86400)) as old:
        old.init()
        old.register("ancient", provider="Claude")
        old.finish("ancient")
        old.register("old-live", provider="Claude")
    assert watch(run, receiver).returncode == 0  # cold start
    assert run("register", "g1", "--provider", "Kimi").returncode == 0
    assert watch(run, receiver).returncode == 0
    assert receiver.accepted() == [title("g1", "started")]
    time.sleep(1.1)  # the last pass's newest commit is a second or more old
    # a machine whose clock is 90 s slow commits a start after that pass ...
    with Registry.open(str(repo), clock=FakeClock(time.time() - 90)) as slow:
        slow.register("slow-1", provider="Codex")
    # ... and gc rewrites the history before the next pass
    gc = run("--json", "gc", "--keep-days", "1")
    assert gc.returncode == 0 and json.loads(gc.stdout)["squashed"] > 1, gc.stderr
    assert run("finish", "g1").returncode == 0
    assert watch(run, receiver).returncode == 0
    assert watch(run, receiver).returncode == 0
    assert receiver.accepted() == [title("g1", "started"), title("slow-1", "started"),
                                   title("g1", "executed")]


def test_notifications_are_plain_text(repo, run, receiver):
    assert run("init").returncode == 0
    target = receiver.url + "&format=html"  # a service that reads HTML
    env = {"AGENT_REGISTRY_NOTIFY_URLS": target}
    assert run("--json", "watch", "--once", env=env).returncode == 0
    assert run("register", "h1", "--provider", "Codex", "--working-on",
               "<b>bold</b> <img src=x onerror=alert(1)>").returncode == 0
    assert run("--json", "watch", "--once", env=env).returncode == 0
    [post] = posts(receiver)
    assert "<b>" not in post["message"] and "<img" not in post["message"]
    assert "&lt;b&gt;bold&lt;/b&gt;" in post["message"]
