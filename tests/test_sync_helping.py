"""Helping (sync/intents.py): a clone that keeps losing the push race publishes its pending
operations as an intent, and the clones that win carry them.  Real bare remotes, real
clones, real processes racing; never more than once, never lost.

In the layout `init` makes the race is on a lock shard (claims of paths whose keys share
it), and so are the intents (``<branch>-shards/NN-intents/<clone>``, the record on the
shard's tip): each test's operations are claims recorded on one shard, HOT."""
from __future__ import annotations

import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

from agent_registry.branch.shards import lock_shards, shard_branch
from helpers import git
from test_sync import BRANCH, Team, lock_owner_on_remote, ops_on_remote, sync_parts
from test_sync_failclosed import sha256_team

HOT = lock_shards("src/auth.py", 16, None)[0]  # the lock shard every test's claims meet
HOT_BRANCH = shard_branch(BRANCH, HOT)
ON_HOT = [p for i in range(2000) if tuple(lock_shards(p := f"src/h{i}.py", 16, None)) == (HOT,)]

PUBLISH = ("import sys; from agent_registry import Registry; "
           "from agent_registry.core.sharded import shards_of; "
           "from agent_registry.sync.remote import publish_intent; "
           "from agent_registry.sync.state import load_state; "
           "r = Registry.open(sys.argv[1]); s = shards_of(r)[int(sys.argv[2])]; "
           "publish_intent(s); "
           "print(load_state(s)['clone_id'])")


def ok(proc: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert proc.returncode == 0, (proc.args, proc.stdout, proc.stderr)
    return proc


def offline_ops(runner, *commands: tuple[str, ...]) -> None:
    """Commit *commands* in this clone only (as if every push had been lost), then turn
    sync back on: they are its pending operations."""
    git(runner.cwd, "config", "agent-registry.remote", "none")
    for command in commands:
        ok(runner(*command))
    git(runner.cwd, "config", "--unset", "agent-registry.remote")


def publish(runner) -> str:
    """Publish the clone's intent on the HOT shard, as publish() does after its third
    lost push there (best effort, as there: whether it is out, intent_refs says); the
    clone's id."""
    proc = subprocess.run([sys.executable, "-c", PUBLISH, str(runner.cwd), str(HOT)],
                          capture_output=True, text=True, check=True)
    return proc.stdout.strip()


def hot_log(team: Team) -> list[str]:
    """The commit messages of the remote's HOT shard (the audit log of its helping)."""
    return subprocess.run(["git", "log", "--format=%B%x00", f"refs/heads/{HOT_BRANCH}"],
                          cwd=team.bare, capture_output=True, text=True,
                          check=True).stdout.split("\0")


def helped_on_remote(team: Team, clone: str | None = None) -> bool:
    """Whether a commit on the remote's HOT shard was made by a helper (for *clone*)."""
    from agent_registry.branch.trailers import TRAILER
    from agent_registry.sync.replay import HELPED
    mark = f"{TRAILER}{HELPED}: " + (f"{clone} #" if clone else "")
    return any(mark in m for m in hot_log(team))


def op_count(team: Team, op_id: str) -> int:
    """Commits of a remote registry ref that applied operation *op_id* (not resolutions
    of it), as the library's parser reads the audit log."""
    return ops_on_remote(team).get(op_id, 0)


def settled_on_remote(team: Team, clone: str) -> dict:
    """The record of *clone*'s intents settled on the remote's HOT shard, as helpers read
    it (sync/intents.settled)."""
    from agent_registry.branch.view import View
    from agent_registry.core.registry import Registry as CoreRegistry
    from agent_registry.sync.intents import settled
    with CoreRegistry.open(str(team.bare)) as reg:
        return settled(View(reg.repo, reg.repo.read_ref(f"refs/heads/{HOT_BRANCH}")), clone)


def intent_refs(team: Team) -> list[str]:
    """The intent refs on the remote: the registry branch's and every shard's."""
    out = subprocess.run(["git", "for-each-ref", "--format=%(refname)",
                          f"refs/heads/{BRANCH}-intents/", f"refs/heads/{BRANCH}-shards/"],
                         cwd=team.bare, capture_output=True, text=True, check=True).stdout
    return [ref for ref in out.split() if "-intents/" in ref]


def pending_ids(runner) -> list[str]:
    """The ids of this clone's own operations its remote has not seen, on any of its
    registry's refs, as sync and publish find them (sync/intents.own_ops)."""
    from agent_registry import Registry
    from agent_registry.core.sharded import shards_of
    from agent_registry.sync.intents import own_ops
    with Registry.open(str(runner.cwd)) as registry:
        out = []
        for reg in (registry, *shards_of(registry)):
            tip = reg.repo.read_ref(reg.ref)
            if tip:
                out += [op["id"] for op in own_ops(reg, reg.repo.read_ref(reg.tracking_ref), tip)]
        return out


def holders(runner, path: str) -> list[str]:
    locks = json.loads(ok(runner("--json", "lock", "list")).stdout)["locks"]
    return [l["owner"] for l in locks if l["path"] == path]


def claim(sid: str, *paths: str) -> tuple[str, ...]:
    return ("lock", "acquire", *paths, "--session", sid)


def warm(runner, sid: str, path: str) -> None:
    """A claim on HOT that lands: the clone has a confirmed tip of the shard, which an
    intent is based on (a clone that lost LOSSES pushes there has one)."""
    ok(runner(*claim(sid, path)))


@pytest.fixture
def team(tmp_path):
    return Team(tmp_path)


@pytest.fixture
def https_team(tmp_path, monkeypatch):
    """A team whose remote is served by a real smart-HTTPS server (tests/smart_http.py)."""
    from smart_http import SmartHTTPS, available
    if (why := available()) is not None:
        pytest.skip(why)
    with SmartHTTPS(tmp_path) as server:
        team = Team(tmp_path, url=f"{server.url}/remote.git")
        git(team.bare, "config", "http.receivepack", "true")  # pushes without a login
        monkeypatch.setenv("GIT_SSL_CAINFO", str(server.ca))
        yield team


@pytest.fixture(params=["sha1", "sha256"])
def any_team(request, tmp_path):
    return Team(tmp_path) if request.param == "sha1" else sha256_team(tmp_path)


def test_a_winner_carries_the_published_operations_of_a_loser(any_team):
    team = any_team
    a, b = team.clone("a"), team.clone("b")
    ok(a("register", "kimi-1", "Kimi", "2.7", "auth"))
    ok(b("register", "codex-2", "Codex", "1", "docs"))
    warm(a, "kimi-1", ON_HOT[0])
    offline_ops(a, claim("kimi-1", "src/auth.py"), claim("kimi-1", ON_HOT[1]))
    ids = pending_ids(a)
    assert len(ids) == 2
    clone = publish(a)
    assert intent_refs(team) == [f"refs/heads/{HOT_BRANCH}-intents/{clone}"]
    # a sync with nothing of its own to push carries nothing to the remote, and what it
    # applied locally for a is not counted as its own unpushed work
    ok(b("sync"))
    assert settled_on_remote(team, clone)["seq"] == 0
    sync_state = json.loads(ok(b("--json", "status")).stdout)["sync"]
    assert sync_state["ahead"] == 0 and sync_state["shards"]["ahead"] == 0, sync_state
    ok(b(*claim("codex-2", ON_HOT[2])))
    # b's push carried a's operations, marked as helped, and the intent is settled
    for op_id in ids:
        assert op_count(team, op_id) == 1
    assert helped_on_remote(team, clone)
    record = settled_on_remote(team, clone)
    assert record["seq"] == 1 and record["handled"] == {i: "applied" for i in ids}
    assert holders(b, "src/auth.py") == ["kimi-1"]  # b reads them held, before a syncs
    # a learns it from its next sync: nothing left to push, nothing applied twice
    ok(a("sync"))
    assert pending_ids(a) == []
    for op_id in ids:
        assert op_count(team, op_id) == 1
    assert holders(a, "src/auth.py") == ["kimi-1"]
    assert holders(a, ON_HOT[1]) == ["kimi-1"]


def test_an_operation_a_helper_refuses_is_reported_to_its_clone(team):
    a, b, c = team.clone("a"), team.clone("b"), team.clone("c")
    ok(a("register", "kimi-1", "Kimi", "2.7", "auth"))
    ok(b("register", "codex-2", "Codex", "1", "auth too"))
    ok(c("register", "gem-3", "Gemini", "1", "docs"))
    warm(a, "kimi-1", ON_HOT[0])
    offline_ops(a, claim("kimi-1", "src/auth.py"))
    ok(b(*claim("codex-2", "src/auth.py")))  # b wins first
    publish(a)
    ok(c(*claim("gem-3", ON_HOT[1])))
    out = a("--json", "sync")
    assert out.returncode == 1, out.stderr  # a pending operation was refused
    refused = [r for part in sync_parts(json.loads(out.stdout)["error"]) for r in part["refused"]]
    assert [r["paths"] for r in refused] == [["src/auth.py"]]
    assert "refused when another clone applied it for this one" in refused[0]["reason"]
    assert "codex-2" in refused[0]["reason"]
    assert holders(c, "src/auth.py") == ["codex-2"]


@pytest.mark.parametrize("round_", range(4))
def test_racing_helpers_and_the_clone_itself_apply_an_intent_once(team, round_):
    """Two helpers and the helped clone push at the same instant: each operation lands
    exactly once, whoever wins (the intent record is written under the shard's CAS)."""
    a, b, c = team.clone("a"), team.clone("b"), team.clone("c")
    ok(a("register", "kimi-1", "Kimi", "2.7", "auth"))
    ok(b("register", "codex-2", "Codex", "1", "x"))
    ok(c("register", "gem-3", "Gemini", "1", "y"))
    warm(a, "kimi-1", ON_HOT[0])
    mine = ON_HOT[1:4] + ["src/auth.py"]
    offline_ops(a, *[claim("kimi-1", path) for path in mine])
    ids = pending_ids(a)
    assert len(ids) == 4
    publish(a)
    with ThreadPoolExecutor(3) as pool:
        runs = [pool.submit(b, *claim("codex-2", ON_HOT[4])),
                pool.submit(c, *claim("gem-3", ON_HOT[5])),
                pool.submit(a, "sync")]
        for run in runs:
            ok(run.result())
    ok(a("sync"))
    for op_id in ids:
        assert op_count(team, op_id) == 1, op_id
    assert [lock_owner_on_remote(team, path) for path in mine] == [["kimi-1"]] * 4
    assert lock_owner_on_remote(team, ON_HOT[4]) == ["codex-2"]
    assert lock_owner_on_remote(team, ON_HOT[5]) == ["gem-3"]
    assert pending_ids(a) == []


def test_operations_that_landed_without_their_record_are_not_applied_again(team):
    """Another process of the clone pushed its operations from a tip made before the
    intent (so without the record that settles it): a helper finds them in the history
    since the intent's base and applies none of them twice."""
    a, b = team.clone("a"), team.clone("b")
    ok(a("register", "kimi-1", "Kimi", "2.7", "auth"))
    ok(b("register", "codex-2", "Codex", "1", "x"))
    warm(a, "kimi-1", ON_HOT[0])
    offline_ops(a, claim("kimi-1", "src/auth.py"))
    ids = pending_ids(a)
    publish(a)
    git(a.cwd, "push", "-q", "origin", HOT_BRANCH)  # as a process whose tip predates the intent
    ok(b(*claim("codex-2", ON_HOT[1])))
    assert op_count(team, ids[0]) == 1
    assert holders(b, "src/auth.py") == ["kimi-1"]


def test_an_intent_on_a_rewritten_history_is_left_to_its_clone(team):
    """A gc rewrite after the intent was published: its base is not in the new history,
    so no helper applies it (it could not tell what is new) and gc deletes its ref; the
    clone replays its own operations."""
    a, b = team.clone("a"), team.clone("b")
    ok(a("register", "kimi-1", "Kimi", "2.7", "auth"))
    ok(b("register", "codex-2", "Codex", "1", "x"))
    warm(a, "kimi-1", ON_HOT[0])
    offline_ops(a, claim("kimi-1", "src/auth.py"))
    [op_id] = pending_ids(a)
    publish(a)
    assert intent_refs(team)  # a's intent is out
    ok(b("sync"))  # b fetches the intent before its gc
    done = json.loads(ok(b("--json", "gc", "--yes", "--keep-days", "0")).stdout)
    pruned = done["pruned_intents"] + sum(p.get("pruned_intents", 0) for p in done["shards"])
    assert pruned == 1
    assert intent_refs(team) == []  # based on the replaced history: gc deleted it
    ok(b(*claim("codex-2", ON_HOT[1])))
    assert op_count(team, op_id) == 0 and holders(b, "src/auth.py") == []
    ok(a("sync"))
    assert op_count(team, op_id) == 1
    assert lock_owner_on_remote(team, "src/auth.py") == ["kimi-1"]


def test_a_remote_that_refuses_intent_refs_leaves_the_clone_on_its_own(team):
    """A forge that forbids new branches (a pre-receive hook here): publishing fails
    quietly and the clone pushes its operations itself, as before helping."""
    hook = team.bare / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\nwhile read old new ref; do case $ref in\n"
                    "  *-intents/*) echo \"no new branches\"; exit 1;;\nesac; done\nexit 0\n")
    hook.chmod(0o755)
    a, b = team.clone("a"), team.clone("b")
    ok(a("register", "kimi-1", "Kimi", "2.7", "auth"))
    warm(a, "kimi-1", ON_HOT[0])
    offline_ops(a, claim("kimi-1", "src/auth.py"))
    [op_id] = pending_ids(a)
    publish(a)
    assert intent_refs(team) == []  # refused: not out
    ok(b("register", "codex-2", "Codex", "1", "x"))
    ok(b(*claim("codex-2", ON_HOT[1])))
    assert op_count(team, op_id) == 0 and holders(b, "src/auth.py") == []
    ok(a("sync"))
    assert op_count(team, op_id) == 1
    assert lock_owner_on_remote(team, "src/auth.py") == ["kimi-1"]


@pytest.mark.slow
def test_twelve_clones_claiming_at_once_lose_nothing_and_double_nothing(tmp_path):
    """Twelve clones claim six paths each, all recorded on one lock shard, as fast as
    they can through one remote: every claim lands once (an operation applied twice
    shows in the audit log), and helping did happen."""
    team = Team(tmp_path)
    clones = [team.clone(f"c{i}") for i in range(12)]
    for i, c in enumerate(clones):
        ok(c("register", f"s{i}", "Kimi", "1", "x"))
    paths = {i: ON_HOT[6 * i:6 * i + 6] for i in range(12)}

    def claims(i: int) -> None:
        for path in paths[i]:
            ok(clones[i](*claim(f"s{i}", path)))

    with ThreadPoolExecutor(12) as pool:
        list(pool.map(claims, range(12)))
    for c in clones:
        ok(c("sync"))
    locks = {l["path"]: l["owner"] for l in json.loads(ok(clones[0]("--json", "lock", "list")).stdout)["locks"]}
    assert locks == {path: f"s{i}" for i in range(12) for path in paths[i]}
    twice = {i: n for i, n in ops_on_remote(team, "claim").items() if n > 1}
    assert not twice, f"operations applied more than once: {twice}"
    assert helped_on_remote(team)


def test_a_tip_that_already_helped_every_intent_is_kept_not_rebuilt(team):
    """A process of b helped a's intent on top of the remote tip and has not pushed yet;
    the next process of b meets the same remote tip: it keeps b's tip instead of helping
    again on a copy of it (which, once the first push lands, would leave b on a fork
    carrying its operations twice), and what is pushed then applies a's operations once."""
    from agent_registry import Registry
    from agent_registry.core.sharded import shards_of
    from agent_registry.store.flock import file_lock
    from agent_registry.sync.remote import _rebase, fetch
    a, b = team.clone("a"), team.clone("b")
    ok(a("register", "kimi-1", "Kimi", "2.7", "auth"))
    ok(b("register", "codex-2", "Codex", "1", "docs"))
    warm(a, "kimi-1", ON_HOT[0])
    offline_ops(a, claim("kimi-1", "src/auth.py"))
    [op_id] = pending_ids(a)
    publish(a)
    with Registry.open(str(b.cwd)) as main:
        registry = shards_of(main)[HOT]
        remote = fetch(registry)
        with file_lock(registry.lock_file):
            helped = _rebase(registry, remote).tip
        assert helped != remote  # a's claim applied, and its intent settled, on b's tip
        with file_lock(registry.lock_file):  # the next process, the same remote tip
            again = _rebase(registry, fetch(registry)).tip
        assert again == helped == registry.repo.read_ref(registry.ref)
    ok(b(*claim("codex-2", ON_HOT[1])))
    assert op_count(team, op_id) == 1
    assert holders(b, "src/auth.py") == ["kimi-1"]


def intent_beside_a_claimer(team: Team):
    """a's claim of src/auth.py published as an intent on HOT (after its push there was
    lost, say) just after b claimed on HOT, so b's next claims may decide on b's own tip
    within FRESH: (a, b, the claim's operation id)."""
    a, b = team.clone("a"), team.clone("b")
    ok(a("register", "kimi-1", "Kimi", "2.7", "auth"))
    ok(b("register", "codex-2", "Codex", "1", "x"))
    warm(a, "kimi-1", ON_HOT[0])
    ok(b(*claim("codex-2", ON_HOT[1])))
    offline_ops(a, claim("kimi-1", "src/auth.py"))
    [op_id] = pending_ids(a)
    publish(a)
    assert intent_refs(team)
    return a, b, op_id


def test_a_push_that_sees_an_intent_carries_it_before_its_claim_ends(team):
    """b claims back to back on its own tip, without a fetch (within FRESH of its last
    one); a, losing the race there, has published an intent.  b's next push is told of
    it by the remote, and once it landed that same claim fetches, carries a's claim and
    pushes it: on the remote, applied once, though a pushed nothing itself and b made no
    other claim.  (Before, b fetched, and helped, only once FRESH ran out; then at its
    claim after the one told.)"""
    the_claim_told_carries_the_intent(team)


def test_a_push_over_https_that_sees_an_intent_carries_it_too(https_team):
    """The same through a real smart-HTTPS server: there git-remote-https reads the
    remote's refs, and its packet trace names them as ``git<``, not ``push<`` (before,
    the check read only the latter and never saw an intent over HTTPS) (issue 35)."""
    the_claim_told_carries_the_intent(https_team)


def the_claim_told_carries_the_intent(team: Team) -> None:
    a, b, op_id = intent_beside_a_claimer(team)
    ok(b(*claim("codex-2", ON_HOT[2])))  # decided on b's tip: its push sees the intent
    assert op_count(team, op_id) == 1  # and carried it once its own claim landed
    assert lock_owner_on_remote(team, "src/auth.py") == ["kimi-1"]
    ok(b(*claim("codex-2", ON_HOT[3])))  # nothing left to carry: not applied again
    assert op_count(team, op_id) == 1
    assert lock_owner_on_remote(team, "src/auth.py") == ["kimi-1"]
    assert [lock_owner_on_remote(team, p) for p in ON_HOT[1:4]] == [["codex-2"]] * 3
    ok(a("sync"))
    assert op_count(team, op_id) == 1 and pending_ids(a) == []


def test_a_carry_whose_fetch_fails_is_left_to_the_next_claim(team):
    """b's push is told of a's intent and lands, but the fetch to carry it fails (here b's
    upload-pack is a program that exits 1; on a network, a dropped connection): b's claim
    stands, confirmed, and says nothing of it; b's next claim fetches first and carries
    a's claim, applied once."""
    a, b, op_id = intent_beside_a_claimer(team)
    git(b.cwd, "config", "remote.origin.uploadpack", "false")
    done = ok(b(*claim("codex-2", ON_HOT[2])))
    assert done.stderr == "" and lock_owner_on_remote(team, ON_HOT[2]) == ["codex-2"]
    assert op_count(team, op_id) == 0
    git(b.cwd, "config", "--unset", "remote.origin.uploadpack")
    ok(b(*claim("codex-2", ON_HOT[3])))
    assert op_count(team, op_id) == 1
    assert lock_owner_on_remote(team, "src/auth.py") == ["kimi-1"]


def test_a_push_after_which_the_next_claim_fetches_anyway_takes_no_trace(team):
    """The trace of what the remote advertised matters only while the next claim may
    skip its fetch: once b's fetches are older than FRESH, b's push takes none, so it
    owes no fetch though a's intent is out (the next claim's own fetch brings it); the
    push itself lands as before (issue 35)."""
    import os
    import time
    from agent_registry import Registry
    from agent_registry.core.sharded import shards_of
    from agent_registry.store.freshness import mark_path
    from agent_registry.sync.intents import fetch_owed
    from agent_registry.sync.remote import FRESH, push
    _, b, _ = intent_beside_a_claimer(team)
    with Registry.open(str(b.cwd)) as main:
        registry = shards_of(main)[HOT]
        marks = os.path.dirname(mark_path(registry.repo.info.common_dir, registry.branch))
        long_ago = time.time() - 2 * FRESH
        for name in os.listdir(marks):  # every fetch of b, the branch's and all shards'
            os.utime(os.path.join(marks, name), (long_ago, long_ago))
        assert push(registry, registry.repo.read_ref(registry.tracking_ref)).ok
        assert not fetch_owed(registry)


def test_a_clone_that_fetched_an_intent_while_waiting_carries_it_with_its_next_claim(team):
    """b fetched a's intent while it was itself waiting to be carried (a rebase that
    helps no one, as publish makes between polls): its next claim, though within FRESH
    of that fetch, fetches again and carries a's claim instead of deciding on b's tip."""
    from agent_registry import Registry
    from agent_registry.core.sharded import shards_of
    from agent_registry.store.flock import file_lock
    from agent_registry.sync.remote import _rebase, fetch
    _, b, op_id = intent_beside_a_claimer(team)
    with Registry.open(str(b.cwd)) as main:
        registry = shards_of(main)[HOT]
        remote = fetch(registry)
        with file_lock(registry.lock_file):
            assert _rebase(registry, remote, help=False).tip == remote
    ok(b(*claim("codex-2", ON_HOT[2])))
    assert op_count(team, op_id) == 1
    assert lock_owner_on_remote(team, "src/auth.py") == ["kimi-1"]


def test_a_push_whose_tracking_ref_of_an_intent_is_damaged_keeps_its_own_outcome(team):
    """The intent check after a push never raises: b's tracking ref of a's intent holds
    garbage, so b cannot tell whether it has that intent; its claim's push still
    confirms it (before, the damaged ref's error replaced the push's outcome and the
    claim failed though the remote had taken it), and b owes a fetch instead."""
    a, b, _ = intent_beside_a_claimer(team)
    [ref] = intent_refs(team)
    damaged = b.cwd / ".git" / "refs" / "remotes" / "origin" / ref[len("refs/heads/"):]
    damaged.parent.mkdir(parents=True, exist_ok=True)
    damaged.write_text("not an object id\n")
    ok(b(*claim("codex-2", ON_HOT[2])))
    assert lock_owner_on_remote(team, ON_HOT[2]) == ["codex-2"]
    owed = [p.name for p in (b.cwd / ".git" / "agent-registry").rglob("*.intent")]
    assert owed, "no fetch owed"  # sync/intents.owe_fetch's mark


def test_a_claim_that_fetches_to_carry_an_intent_fetches_its_shard_alone(team, monkeypatch):
    """b's push was told of a's intent on HOT; c then claimed on another shard.  b's next
    claim on HOT fetches first (within FRESH of its last fetch), to carry a's claim: that
    fetch brings HOT with its intents, the main branch and the clone refs, not c's shard,
    so it lands sooner and a waits less (issue 35).  a's claim is applied once."""
    from agent_registry import Registry
    from agent_registry.branch.shards import lock_shards
    from agent_registry.core.sharded import shards_of
    from agent_registry.sync import remote as R
    a, b, op_id = intent_beside_a_claimer(team)
    ok(b(*claim("codex-2", ON_HOT[2])))  # decided on b's tip: its push sees the intent
    c = team.clone("c")
    ok(c("register", "c-3", "Codex", "1", "y"))
    cold = next(p for i in range(1000)
                if lock_shards(p := f"src/c{i}.py", 16, None)[0] != HOT)
    ok(c(*claim("c-3", cold)))
    monkeypatch.setattr(R, "FRESH", 3600.0)  # no clock decides whether b fetched lately
    with Registry.open(str(b.cwd)) as main:
        other = shards_of(main)[lock_shards(cold, 16, None)[0]]
        seen = other.repo.read_ref(other.tracking_ref)
        main.claim("codex-2", [ON_HOT[3]])
        assert other.repo.read_ref(other.tracking_ref) == seen  # c's shard: not fetched
    assert op_count(team, op_id) == 1
    assert lock_owner_on_remote(team, "src/auth.py") == ["kimi-1"]
    assert lock_owner_on_remote(team, cold) == ["c-3"]


def test_a_waiting_loser_reads_from_the_fetched_tip_whether_it_was_carried(team):
    """While its intent is out a loser polls the remote and replays nothing until a
    helper settled the intent there (sync/remote.publish): sync/intents.carried says so
    from the fetched tip, before and after b carried a's claim."""
    from agent_registry import Registry
    from agent_registry.core.sharded import shards_of
    from agent_registry.sync.intents import carried
    from agent_registry.sync.remote import fetch
    a, b, op_id = intent_beside_a_claimer(team)
    with Registry.open(str(a.cwd)) as main:
        registry = shards_of(main)[HOT]
        assert not carried(registry, fetch(registry))
        ok(b(*claim("codex-2", ON_HOT[2])))  # told of the intent (or carries it)
        ok(b(*claim("codex-2", ON_HOT[3])))  # fetches first, and carries a's claim
        assert carried(registry, fetch(registry))
    assert op_count(team, op_id) == 1



def lose_then_poll(team: Team, monkeypatch, before: dict, check=None):
    """a's claim of src/auth.py on HOT, pushed by a's publish in this process: b claims
    on HOT after each of a's first LOSSES - 1 fetches, so a loses LOSSES pushes and
    publishes its intent; then a polls.  *before*: what happens just before a's poll
    number n (1: the first poll after the intent; its fetch number is LOSSES - 1 + n);
    *check*: called with a's registry after publish.  (publish's outcome, a's clone id,
    the narrow flag of each fetch, b, the claim's operation id)."""
    from agent_registry import Registry
    from agent_registry.core.sharded import shards_of
    from agent_registry.sync import remote as R
    from agent_registry.sync.state import load_state
    a, b = team.clone("a"), team.clone("b")
    ok(a("register", "kimi-1", "Kimi", "2.7", "auth"))
    ok(b("register", "codex-2", "Codex", "1", "x"))
    warm(a, "kimi-1", ON_HOT[0])
    ok(b(*claim("codex-2", ON_HOT[1])))  # a's confirmed tip of HOT is behind: it loses
    offline_ops(a, claim("kimi-1", "src/auth.py"))
    [op_id] = pending_ids(a)
    real, fetches = R.fetch, []

    def fetch(registry, narrow=False):
        fetches.append(narrow)
        poll = len(fetches) - (R.LOSSES - 1)
        if poll in before:
            before[poll](b)
        tip = real(registry, narrow)
        if poll < 1:
            ok(b(*claim("codex-2", ON_HOT[1 + len(fetches)])))
        return tip

    monkeypatch.setattr(R, "fetch", fetch)
    with Registry.open(str(a.cwd)) as main:
        registry = shards_of(main)[HOT]
        outcome = R.publish(registry, watch=op_id)
        clone = load_state(registry)["clone_id"]
        if check:
            check(main)
    monkeypatch.undo()
    assert outcome["pushed"] and "dropped" not in outcome
    ok(a("sync"))
    assert pending_ids(a) == [] and op_count(team, op_id) == 1
    assert lock_owner_on_remote(team, "src/auth.py") == ["kimi-1"]
    return outcome, clone, fetches, b, op_id


def carry(b) -> None:
    """b claims twice on HOT: the first claim's push is told of a's intent, the second
    fetches and carries it (if the first did not)."""
    ok(b(*claim("codex-2", ON_HOT[4])))
    ok(b(*claim("codex-2", ON_HOT[5])))


def test_a_waiting_loser_whose_poll_finds_the_remote_unmoved_waits_for_its_helper(team, monkeypatch):
    """a loses LOSSES pushes on HOT to b's claims and publishes its intent; its first poll
    finds the remote moved, its second and third find it where the first did.  That is
    no sign that no one is left to carry a (a carry takes 2-3 polls): a polls once more
    instead of replaying and pushing, b's next claims carry a's claim, and a's next poll
    finds it carried.  (Before, a pushed at once after one unmoved poll, and then after
    two; under load that push only lost to the helper's, 1.4-2.8 s of the slowest claims
    at 16 clones.)  a's polls fetch HOT alone: b's claim on another
    shard meanwhile is not brought.  a's claim is on the remote once, as a helper
    applied it (issue 35)."""
    from agent_registry.branch.shards import lock_shards
    from agent_registry.core.sharded import shards_of
    from agent_registry.sync.remote import LOSSES
    cold = next(p for i in range(1000) if lock_shards(p := f"src/c{i}.py", 16, None)[0] != HOT)

    def polls_fetched_hot_alone(main) -> None:
        other = shards_of(main)[lock_shards(cold, 16, None)[0]]
        assert other.view_at(other.repo.read_ref(other.tracking_ref)).lock(cold) is None

    outcome, clone, fetches, b, op_id = lose_then_poll(team, monkeypatch, {
        1: lambda b: ok(b(*claim("codex-2", cold))), 4: carry}, polls_fetched_hot_alone)
    assert helped_on_remote(team, clone)  # not a's own push after the unmoved polls
    # one after each lost push but the last, three polls, then the one that finds it carried
    assert len(fetches) == LOSSES - 1 + 4, fetches
    b_claimed = ON_HOT[1:LOSSES + 1] + ON_HOT[4:6]
    assert [lock_owner_on_remote(team, p) for p in b_claimed] == [["codex-2"]] * len(b_claimed)
    assert lock_owner_on_remote(team, cold) == ["codex-2"]


def test_a_waiting_loser_counts_towards_pushing_again_only_polls_that_found_moves(
        team, monkeypatch):
    """After its intent, a's polls find HOT moved (b), unmoved, moved by a clone that
    carries no one (c, as an older agent-registry would), unmoved, then carried by b.
    Only the polls that found it moved count towards pushing again (MOVED, three, as
    before polls were narrow): a narrow poll takes a fraction of a carry, so counting
    every poll pushed again, and lost, before the helper's push landed; and so did
    counting to LOSSES once that became two (issue 35)."""
    from agent_registry import Registry
    from agent_registry.core.sharded import shards_of
    from agent_registry.store.flock import file_lock
    from agent_registry.sync import remote as R
    c = team.clone("c")
    ok(c("register", "c-3", "Codex", "1", "y"))
    offline_ops(c, claim("c-3", ON_HOT[6]))
    fetch = R.fetch

    def moved_by_c(_b) -> None:
        with Registry.open(str(c.cwd)) as main:
            registry = shards_of(main)[HOT]
            with file_lock(registry.lock_file):
                tip = R._rebase(registry, fetch(registry), help=False).tip
            assert R.push(registry, tip).ok

    outcome, clone, fetches, b, op_id = lose_then_poll(team, monkeypatch, {
        3: moved_by_c, 5: carry})
    assert helped_on_remote(team, clone)  # not a's own push after the fourth poll
    assert len(fetches) == R.LOSSES - 1 + 5, fetches
    assert lock_owner_on_remote(team, ON_HOT[6]) == ["c-3"]
