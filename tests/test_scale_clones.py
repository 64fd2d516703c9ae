"""Clone refs (layout format 3, docs/shards.md): heartbeats and diary lines go to the
writing clone's own ref, `<branch>-clones/<clone>`, so they never race another clone's
writes; readers (claims, cleanup, status, the diary, the wiki) take a session's newest
heartbeat and its whole diary from the main branch and every clone ref."""
from __future__ import annotations

import json
import os
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from helpers import CLI, FakeClock, git, make_repo, single_branch
from test_scale_shards import kill_mid_writes, remote_refs, sharded_registry, sharded_team
from test_sync import Team

from agent_registry.branch.clones import beat_path, clone_branch
from agent_registry.errors import Refused

BRANCH = "agent-registry"


def rendered_again_only(repo: Path, old: str, new: str) -> bool:
    """Whether the main branch went from *old* to *new* by registry.md rendered again
    alone (a write on a clone ref renders the main page when it is a minute old:
    core/sharded.refresh_page), not by the write itself."""
    ops = [line for line in git(repo, "log", "--format=%(trailers:key=Registry-Op,valueonly)",
                                f"{old}..{new}").splitlines() if line.strip()]
    return all(op.strip() == "refresh-page" for op in ops)


def clone_refs(refs: dict[str, str]) -> dict[str, str]:
    return {ref: tip for ref, tip in refs.items() if ref.startswith(f"refs/heads/{BRANCH}-clones/")}


def test_heartbeats_and_diary_lines_move_only_the_writing_clones_ref(tmp_path):
    team, (a, b) = sharded_team(tmp_path, 2)
    before = remote_refs(team)
    assert a("lock", "heartbeat", "--session", "s0").returncode == 0
    assert a("context", "log", "s0", "first from a").returncode == 0
    main = f"refs/heads/{BRANCH}"  # moved at most to render its page again (a minute old)
    after_a = remote_refs(team)
    moved = sorted(ref for ref in after_a if after_a[ref] != before.get(ref) and ref != main)
    assert len(moved) == 1 and moved == sorted(clone_refs(after_a)), moved
    assert b("lock", "heartbeat", "--session", "s1").returncode == 0
    after_b = remote_refs(team)
    moved_b = sorted(ref for ref in after_b if after_b[ref] != after_a.get(ref) and ref != main)
    assert len(moved_b) == 1 and moved_b[0] not in moved  # b's ref, not a's, not a shard
    assert rendered_again_only(team.bare, before[main], after_b[main])
    # another clone reads both, after a sync
    reader = team.clone("reader")
    assert reader("sync").returncode == 0
    shown = reader("context", "show", "s0")
    assert shown.returncode == 0 and "first from a" in shown.stdout
    sessions = {s["id"]: s for s in json.loads(reader("--json", "status").stdout)["sessions"]}
    beat = git(team.bare, "show", f"{moved_b[0][len('refs/heads/'):]}:{beat_path('s1')}")
    assert sessions["s1"]["heartbeat_at"] == json.loads(beat)["heartbeat_at"]


@pytest.mark.parametrize("rounds", [2, pytest.param(4, marks=pytest.mark.slow)])
def test_clones_writing_at_once_are_never_rejected_and_nothing_is_lost(tmp_path, rounds):
    """Eight clones heartbeat and log diary lines as fast as they can: the main branch
    never moves (but to render its page again, a minute old), no push is rejected (no clone ever publishes an intent, which it does
    after three rejections), each clone ref holds exactly its clone's writes, and a fresh
    clone reads every line once."""
    team, clones = sharded_team(tmp_path, 8)
    for clone in clones:  # each knows the layout (one that does not writes its first on main)
        assert clone("sync").returncode == 0
    main_before = remote_refs(team)[f"refs/heads/{BRANCH}"]

    def writer(i: int) -> list[int]:
        codes = []
        for r in range(rounds):
            codes.append(clones[i]("lock", "heartbeat", "--session", f"s{i}").returncode)
            codes.append(clones[i]("context", "log", f"s{i}", f"line {r} of s{i}").returncode)
        return codes

    with ThreadPoolExecutor(len(clones)) as pool:
        codes = [c for result in pool.map(writer, range(len(clones))) for c in result]
    assert codes == [0] * len(codes)
    refs = remote_refs(team)
    assert rendered_again_only(team.bare, main_before, refs[f"refs/heads/{BRANCH}"])
    assert not [ref for ref in refs if "-intents/" in ref]
    own = clone_refs(refs)
    assert len(own) == len(clones)
    for ref in own:
        authors = git(team.bare, "log", "--format=%an", ref).split()
        assert len(authors) == 2 * rounds and len(set(authors)) == 1, (ref, authors)
    reader = team.clone("reader")
    assert reader("sync").returncode == 0
    for i in range(len(clones)):
        diary = reader("context", "show", f"s{i}").stdout
        for r in range(rounds):
            assert diary.count(f"line {r} of s{i}\n") == 1, diary


def test_claims_and_cleanup_judge_a_session_by_its_clone_ref_heartbeat(tmp_path):
    clock = FakeClock(1_800_000_000)
    with sharded_registry(tmp_path, clock, "old", "new", "idle") as registry:
        registry.claim("old", ["src/auth/x.py"])
        main_tip = registry.repo.read_ref(registry.ref)
        clock.advance(500)
        registry.heartbeat("old")  # its clone's ref (and the main page, 500 s old)
        assert rendered_again_only(tmp_path / "repo", main_tip, registry.repo.read_ref(registry.ref))
        git(tmp_path / "repo", "pack-refs", "--all")  # read from packed-refs as well
        clock.advance(500)  # 1,000 s since "old" wrote the main branch or its shard
        with pytest.raises(Refused, match="locked by old"):  # the holder beat 500 s ago
            registry.claim("new", ["src/auth/x.py"])
        stopped = [s["session"] for s in registry.cleanup(by="test")["stopped"]]
        assert stopped == ["idle", "new"]  # not "old": its beat is 500 s old
        assert registry.session("old").live
        # registry.md on the main branch is rendered with the beat: "old" is not stale
        page = git(tmp_path / "repo", "show", f"{BRANCH}:registry.md")
        row = next(line for line in page.splitlines() if line.startswith("| old "))
        assert "stale" not in row, row


def test_an_unreadable_beat_counts_as_written_when_its_ref_last_moved(tmp_path):
    """Fail closed: a beat that cannot be read does not make its session look older than
    what its clone last wrote."""
    clock = FakeClock(1_800_000_000)
    with sharded_registry(tmp_path, clock, "old", "new") as registry:
        registry.claim("old", ["src/auth/x.py"])
        clock.advance(500)
        registry.heartbeat("old")
        repo = tmp_path / "repo"
        ref, = git(repo, "for-each-ref", "--format=%(refname)",
                   f"refs/heads/{BRANCH}-clones/").split()
        blob = subprocess.run(["git", "hash-object", "-w", "--stdin"], cwd=repo, input=b"{oops",
                              capture_output=True, check=True).stdout.decode().strip()
        tree = subprocess.run(["git", "mktree"], cwd=repo, capture_output=True, check=True,
                              input=f"100644 blob {blob}\t{beat_path('old').split('/')[1]}\n".encode()
                              ).stdout.decode().strip()
        root = subprocess.run(["git", "mktree"], cwd=repo, capture_output=True, check=True,
                              input=f"040000 tree {tree}\tbeats\n".encode()).stdout.decode().strip()
        at = str(int(clock()))
        env = {"GIT_COMMITTER_DATE": f"{at} +0000", "GIT_AUTHOR_DATE": f"{at} +0000"}
        commit = subprocess.run(["git", "commit-tree", root, "-m", "by hand"], cwd=repo,
                                capture_output=True, check=True,
                                env={**os.environ, **env}).stdout.decode().strip()
        git(repo, "update-ref", ref, commit)
        clock.advance(500)
        with pytest.raises(Refused, match="locked by old"):
            registry.claim("new", ["src/auth/x.py"])
        assert any("unreadable" in w for w in registry.warnings), registry.warnings


def test_a_diary_reads_whole_across_the_move_and_a_line_replayed_after_it(tmp_path):
    """Lines logged before the conversion (on the main branch), a line committed offline
    before it and replayed after it, and lines logged after it (on clone refs) read as one
    diary, in time order, each once; `end` writes them all into the wiki entry."""
    team = Team(tmp_path)
    a, c = team.clone("a"), team.clone("c")
    with single_branch(a.cwd) as old:  # the single branch of an older version
        old.register("s0", provider="Codex")
        old.context_log("s0", "before the move")
    with single_branch(c.cwd) as old:  # adopted by c, which logs a line offline
        git(c.cwd, "remote", "set-url", "origin", str(tmp_path / "nowhere.git"))
        old.context_log("s0", "offline in c")
        assert old.unpushed.get("confirmed") is False, old.unpushed
    time.sleep(1.1)  # entries are ordered by their second: make each its own
    assert a("shard", "--count", "4").returncode == 0
    assert a("context", "log", "s0", "after the move from a").returncode == 0
    time.sleep(1.1)
    git(c.cwd, "remote", "set-url", "origin", str(team.bare))
    assert c("sync").returncode == 0
    assert c("context", "log", "s0", "after the move from c").returncode == 0
    assert a("sync").returncode == 0
    diary = a("context", "show", "s0").stdout
    lines = [line.split("Z ", 1)[1] for line in diary.splitlines() if line.startswith("- 20")]
    assert lines == ["before the move", "offline in c", "after the move from a",
                     "after the move from c"], diary
    assert diary.count("# Diary of s0") == 1
    assert a("end", "s0", "--what", "done").returncode == 0
    entry = team.remote_file("wiki/s0.md")
    assert entry and all(text in entry for text in lines), entry


def test_each_clone_names_its_ref_once(tmp_path):
    team, (a, _) = sharded_team(tmp_path, 2)
    named = Path(a.cwd) / ".git" / "agent-registry" / "clone"
    assert a("status").returncode == 0 and a("sync").returncode == 0
    assert not named.exists()  # reading and syncing name nothing: the clone wrote nothing
    assert a("lock", "heartbeat", "--session", "s0").returncode == 0
    name = named.read_text().strip()
    assert f"refs/heads/{clone_branch(BRANCH, name)}" in remote_refs(team)
    worktree = tmp_path / "wt"
    git(a.cwd, "worktree", "add", "-q", str(worktree))
    proc = a("lock", "heartbeat", "--session", "s0", cwd=worktree)
    assert proc.returncode == 0, proc.stderr
    assert len(clone_refs(remote_refs(team))) == 1  # the worktree writes the same ref


def test_kill_9_mid_heartbeat_or_diary_line_leaves_the_clone_ref_valid(tmp_path):
    repo = make_repo(tmp_path / "repo")
    run = lambda *args: subprocess.run([CLI, *args], cwd=repo, capture_output=True, text=True)
    assert run("init", "--shards", "4").returncode == 0
    assert run("register", "k1", "--provider", "Codex").returncode == 0

    def reads() -> None:
        proc = run("context", "show", "k1")
        assert proc.returncode in (0, 1) and "unreadable" not in proc.stderr, proc.stderr
    kill_mid_writes(repo, ["; ".join(f"{CLI} lock heartbeat --session k1 && {CLI} context log "
                                     f"k1 'round {round_} line {k}'" for k in range(20))
                           for round_ in range(8)], 11, reads)
    assert run("context", "log", "k1", "after the kills").returncode == 0
    diary = run("context", "show", "k1").stdout
    assert diary.rstrip().endswith("after the kills") and diary.count("# Diary of k1") == 1
    assert run("lock", "heartbeat", "--session", "k1").returncode == 0


def test_a_heartbeat_the_remote_did_not_take_says_so(tmp_path):
    team, (a, _) = sharded_team(tmp_path, 2)
    assert a("lock", "heartbeat", "--session", "s0").returncode == 0
    git(a.cwd, "remote", "set-url", "origin", str(tmp_path / "nowhere.git"))
    proc = a("--json", "lock", "heartbeat", "--session", "s0")
    assert proc.returncode == 0 and "not pushed" in proc.stderr, proc.stderr
    answer = json.loads(proc.stdout)
    assert answer["confirmed"] is False and answer["remote_error"]["kind"] == "not-found"


@pytest.mark.parametrize("rounds", [2, pytest.param(3, marks=pytest.mark.slow)])
def test_sends_and_acks_go_to_the_writers_clone_ref_and_race_no_one(tmp_path, rounds):
    """Six clones send to each other at once and acknowledge what they got: every send
    and ack is on its writer's clone ref (the messages branch and the registry branch do
    not move, no clone publishes an intent), and each recipient reads each message once."""
    team, clones = sharded_team(tmp_path, 6)
    for clone in clones:
        assert clone("sync").returncode == 0
    before = remote_refs(team)
    n = len(clones)

    def sender(i: int) -> list[str]:
        ids = []
        for r in range(rounds):
            proc = clones[i]("--json", "send", "--from", f"s{i}", "--to", f"s{(i + 1) % n}",
                             f"message {r} from s{i}")
            assert proc.returncode == 0, proc.stderr
            ids.append(json.loads(proc.stdout)["id"])
        return ids

    with ThreadPoolExecutor(n) as pool:
        sent = list(pool.map(sender, range(n)))
    for i, clone in enumerate(clones):
        got = json.loads(clone("--json", "inbox", f"s{i}").stdout)["messages"]
        assert sorted(m["id"] for m in got) == sorted(sent[(i - 1) % n]), got
        proc = clone("--json", "ack", "--session", f"s{i}", *[m["id"] for m in got])
        assert proc.returncode == 0 and len(json.loads(proc.stdout)["acked"]) == rounds, proc.stderr
        assert json.loads(clone("--json", "inbox", f"s{i}").stdout)["messages"] == []
    after = remote_refs(team)
    moved = {ref for ref in after if after[ref] != before.get(ref)}
    assert moved == set(clone_refs(after)) and len(moved) == n, moved
    assert not [ref for ref in after if "-intents/" in ref]
    # another clone sees the whole conversation, with who acknowledged each message
    reader = team.clone("reader")
    assert reader("sync").returncode == 0
    thread = json.loads(reader("--json", "thread", sent[0][0]).stdout)["messages"]
    assert [(m["id"], m["acked_by"]) for m in thread] == [(sent[0][0], ["s1"])]
