"""The shard map (issue 11): every pair of locks that could cover one path is recorded in
a common shard, checked by brute force over generated files, directories and globs with
the registry's own matching functions (paths.covers, paths.overlaps); each branch file
has exactly one place; the layout marker refuses what it does not know; the shard refs
live beside the registry branch in real git."""
from __future__ import annotations

import itertools
import json
import subprocess

import pytest
from helpers import git, single_branch

from agent_registry.branch import paths as P
from agent_registry.branch import shards as S
from agent_registry.branch.records import UnreadableRecord, load_session

NAMES = ("a", "b", "a.py", "x[1]")
SHARD_COUNTS = (1, 2, 3, 16)


def files(depth: int = 4) -> list[str]:
    out = []
    for d in range(1, depth + 1):
        out += ["/".join(parts) for parts in itertools.product(NAMES, repeat=d)]
    return out


FILES = files()
WILD = ("*", "**", "?", "[ab]", "a*", "*.py")


def globs() -> list[str]:
    """Each file and directory of depth <= 3 with every non-empty subset of its
    components replaced by each wildcard form, plus a few hand-written patterns."""
    out = {"*", "**", "**/*.py", "*/", "**/a", "a/**", "a/b/**", "a/**/b", "[", "a/b/c["}
    shallow = [p for p in FILES if p.count("/") < 3 and "[" not in p]
    for path in shallow:
        parts = path.split("/")
        for mask in itertools.product((False, True), repeat=len(parts)):
            if not any(mask):
                continue
            for wild in WILD:
                pattern = "/".join(wild if m else part for m, part in zip(mask, parts))
                out.update((pattern, pattern + "/"))
    return sorted(out)


def literals() -> list[str]:
    """File and directory targets as claims store them (``:(literal)`` for glob chars)."""
    dirs = {"/".join(p.split("/")[:i]) + "/" for p in FILES for i in range(1, p.count("/") + 1)}
    return sorted({P.literal(p) for p in FILES} | {P.literal(d) for d in dirs})


TARGETS = literals() + globs()


def test_the_generated_targets_are_the_kinds_claims_store():
    kinds = {("glob" if P.is_glob(t) else "dir" if P.is_dir(P.plain(t)) else "file") for t in TARGETS}
    assert kinds == {"glob", "dir", "file"}
    assert any(t.startswith(P.LITERAL) for t in TARGETS)
    assert len(TARGETS) > 900 and len(FILES) > 300


def test_every_path_a_target_covers_has_the_targets_key():
    """covers(t, p) => t is recorded in every shard, or in the shard of p's key."""
    checked = 0
    for target in TARGETS:
        key = S.target_key(target)
        for path in FILES:
            if P.covers(target, path):
                checked += 1
                assert key is None or key == S.path_key(path), (target, path, key)
    assert checked > 10_000


def test_a_covered_path_is_read_where_the_lock_is_recorded(shards=16):
    """What the guard and `lock check` rely on: reading path_shard(p) finds every lock
    that covers p."""
    for target in TARGETS:
        where = set(S.lock_shards(target, shards))
        for path in FILES:
            if P.covers(target, path):
                assert S.path_shard(path, shards) in where, (target, path)


def test_every_overlapping_pair_shares_a_shard():
    """Two claims the registry would find in conflict (paths.overlaps, the conservative
    test claims use) both write a common shard, whose compare-and-swap decides: one of
    them is in every shard, or both have one key (hence one shard, whatever the count)."""
    keyed = [(t, S.target_key(t)) for t in TARGETS]
    keyed = [(t, k) for t, k in keyed if k is not None]
    pairs = 0
    for (a, ka), (b, kb) in itertools.combinations(keyed, 2):
        if ka != kb:
            assert not (P.overlaps(a, b) or P.overlaps(b, a)), (a, b)
        else:
            pairs += 1
    assert pairs > 5_000 and len(keyed) > 500


def test_narrow_locks_stay_in_one_shard_and_broad_ones_go_everywhere():
    assert S.target_key("src/auth/token.py") == "src/auth"
    assert S.target_key("src/auth/") == "src/auth"
    assert S.target_key("src/auth/deep/") == "src/auth"
    assert S.target_key("src/auth/*.py") == "src/auth"
    assert S.target_key("README.md") == "README.md"
    assert S.target_key(":(literal)a[1]/b/c") == "a[1]/b"
    for broad in ("src/", "src/*.py", "src/**/x.py", "*.md", "**", "sr*/auth/x.py"):
        assert S.target_key(broad) is None, broad
        assert S.lock_shards(broad, 16) == tuple(range(16))
    assert len(S.lock_shards("src/auth/token.py", 16)) == 1


def test_a_claim_writes_its_locks_shards_and_its_sessions_shard():
    sid = "kimi-1"
    one = S.claim_shards(sid, ["src/auth/token.py"], 16)
    assert set(one) == {S.path_shard("src/auth/token.py", 16), S.session_shard(sid, 16)}
    assert S.claim_shards(sid, ["src/"], 16) == tuple(range(16))
    assert list(one) == sorted(one)


def test_distinct_work_spreads_over_the_shards():
    """Not a correctness property: the reason for sharding.  48 agents each working in
    its own package hit most of 16 shards."""
    used = {S.path_shard(f"pkg{i:02d}/mod/f.py", 16) for i in range(48)}
    assert len(used) >= 12
    sessions = {S.session_shard(f"s{i:03d}", 16) for i in range(48)}
    assert len(sessions) >= 12


@pytest.mark.parametrize("shards", SHARD_COUNTS)
def test_every_branch_file_has_one_place(shards):
    """Layout format 2 ("lock shards"): everything but lock records and held lists stays
    on the main branch, sessions and diaries included."""
    sid = "codex-7.a:b@c+d"
    for archive in (f"sessions/live/{sid}.yaml", f"contexts/{sid}.md",
                    f"messages/{sid}/0001.json", f"acks/{sid}/0123456789abcdef.json",
                    "sessions/done/ab/kimi-1.yaml", "sessions/recent.json", "wiki/kimi-1.md",
                    S.LAYOUT, "sessions/live/notes.txt", "contexts/a/b.md", "messages/x",
                    "acks/x", "intents/clone.json"):
        assert S.place(archive, shards) == S.MAIN, archive
    for rendered in ("README.md", "registry.md"):
        assert S.place(rendered, shards) == S.EVERY
    for spread in ("locks/ab/abcdef.json", "locks/patterns/abcdef.json", S.held_path(sid)):
        with pytest.raises(ValueError):
            S.place(spread, shards)


def test_the_layout_marker_refuses_writers_of_other_formats_in_one_line():
    assert S.layout_of(None) == {"format": 1}
    S.require_writable(None)  # the single branch: this version writes it
    sharded = S.layout_of(S.layout_bytes(16))
    assert (sharded["format"], sharded["shards"], sharded["requires"]) == (3, 16, S.REQUIRES)
    S.require_writable(S.layout_bytes(16))  # lock shards and clone refs: written too
    S.require_writable(json.dumps({"format": 2, "shards": 16}).encode())  # and format 2
    assert S.WRITES == (1, 2, 3)
    newer = json.dumps({"format": 7, "shards": 64, "requires": "9.1"}).encode()
    with pytest.raises(S.NewerFormat) as info:
        S.require_writable(newer)
    message = info.value.message
    assert "format 7" in message and "install agent-registry >= 9.1" in message
    assert "\n" not in message and info.value.exit_code == 1
    for bad in (b"", b"{", b"[]", b"7", b'{"format": "2"}', b'{"format": 0}', b'{"shards": 2}'):
        with pytest.raises(S.NewerFormat):
            S.require_writable(bad)


def test_shard_branches_live_beside_the_registry_branch(tmp_path):
    """Real git: `agent-registry` and `agent-registry-shards/NN` coexist (a ref below
    `agent-registry/` could not), and one fetch with fetch_refspecs brings all of them."""
    def git(cwd, *args):
        return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                              text=True, env={"GIT_CONFIG_NOSYSTEM": "1", "HOME": str(tmp_path),
                                              "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
                                              "GIT_COMMITTER_NAME": "t",
                                              "GIT_COMMITTER_EMAIL": "t@t", "PATH": "/usr/bin:/bin"}
                              ).stdout.strip()
    remote, clone = tmp_path / "remote.git", tmp_path / "clone"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    git(tmp_path, "init", "-q", str(clone))
    tree = git(clone, "mktree", "--missing")
    commit = git(clone, "commit-tree", tree, "-m", "root")
    refs = ["refs/heads/agent-registry", *S.shard_refs("agent-registry", 3)]
    for ref in refs:
        git(clone, "check-ref-format", ref)
        git(clone, "update-ref", ref, commit)
    git(clone, "push", "-q", "--atomic", str(remote), *[f"{r}:{r}" for r in refs])
    other = tmp_path / "other"
    git(tmp_path, "init", "-q", str(other))
    git(other, "fetch", "-q", str(remote), *S.fetch_refspecs("origin", "agent-registry"))
    fetched = git(other, "for-each-ref", "--format=%(refname)", "refs/remotes/").split()
    assert fetched == ["refs/remotes/origin/agent-registry",
                       *[f"refs/remotes/origin/agent-registry-shards/{i:02d}" for i in range(3)]]
    blocked = subprocess.run(["git", "update-ref", "refs/heads/agent-registry/00", commit],
                             cwd=clone, capture_output=True)
    assert blocked.returncode != 0


@pytest.fixture
def one_branch(repo, clock):
    """A registry in the single-branch layout (format 1) that the conversion splits,
    built through the core (no face writes it: their first write converts it)."""
    registry = single_branch(repo, clock=clock)
    assert registry.repo.read_blob(f"{registry.tip()}:{S.LAYOUT}") is None
    yield registry
    registry.close()


def tree_files(registry) -> dict[str, bytes]:
    """Every file of the registry branch's tip tree, by path."""
    tip = registry.repo.read_ref(registry.ref)
    names = git(registry.repo.info.git_dir, "ls-tree", "-r", "--name-only", tip).split("\n")
    return {name: registry.repo.read_blob(f"{tip}:{name}") for name in names if name}


def check_split(files: dict[str, bytes], main: dict[str, bytes], parts: list[dict[str, bytes]],
                count: int) -> dict:
    """Nothing lost, everything where format 2 reads it: each file of the single branch
    *files* is on the main branch as it was (a live session's ``locks:`` list emptied),
    or, a lock record, in exactly the shards of its target (every shard when it cannot
    be read); each live session's held lists, over all shards, are its ``locks:`` list,
    each target in the shards that record it, with the session's heartbeat; the main
    branch adds only the fence, the marker and the rendered pages; a shard holds only
    lock records, held lists and its rendered pages.  Returns what was counted."""
    assert len(parts) == count
    added = set(S.fence_files(0)) | {S.LAYOUT}
    assert set(main) >= added and S.layout_of(main[S.LAYOUT])["shards"] == count
    sessions, records = {}, 0
    for path, data in files.items():
        homes = [i for i, part in enumerate(parts) if path in part]
        if path in S.RENDERED:
            continue
        if path.startswith("locks/"):
            records += 1
            try:
                target = json.loads(data)["path"]
                assert P.record_name(target) == path
                where = list(S.lock_shards(target, count))
            except (ValueError, KeyError, TypeError, AssertionError):
                where = list(range(count))
            assert homes == where, path
            assert path not in main or path in added, path
            assert all(parts[i][path] == data for i in homes), path
            continue
        assert homes == [], path
        if path.startswith("sessions/live/") and path.endswith(".yaml"):
            try:
                before = load_session(data)
            except UnreadableRecord:
                assert main[path] == data, path  # kept as it is
                continue
            after = load_session(main[path])
            assert after.locks == [] and {**after.to_dict(), "locks": before.locks} == \
                before.to_dict(), path
            sessions[before.id] = before
        else:
            assert main[path] == data, path
    assert set(main) <= {p for p in files if p not in S.RENDERED} | added | set(S.RENDERED)
    held: dict[str, list[tuple[int, str]]] = {}
    for index, part in enumerate(parts):
        for path, data in part.items():
            if path in S.RENDERED or path.startswith("locks/"):
                continue
            sid = path[len(S.HELD_DIR) + 1:-len(".json")]
            assert path == S.held_path(sid) and sid in sessions, path
            targets, beat = S.parse_held(data)
            assert beat == sessions[sid].heartbeat_at and targets
            held.setdefault(sid, []).extend((index, t) for t in targets)
    for sid, session in sessions.items():
        expected = [(i, t) for t in session.locks for i in S.lock_shards(t, count)]
        assert sorted(held.get(sid, [])) == sorted(expected), sid
    return {"records": records, "sessions": len(sessions),
            "held": sum(1 for part in parts for p in part if p.startswith(S.HELD_DIR + "/"))}


def test_the_conversion_loses_nothing_and_puts_everything_in_its_place(one_branch):
    """A real single-branch registry (sessions, diaries, file, directory and glob locks, a
    shared lock, an ended session with its wiki entry, and a message and acknowledgement
    of the layout before messages had a ref of their own) split for 16 shards in layout
    format 2: every file but the lock records stays on the main branch, the live
    sessions' held lists move to the shards of their targets, each lock is in every shard
    of its target, so in the shard of each path it covers."""
    registry = one_branch
    for sid in ("kimi-1", "codex-2", "gemini-3"):
        registry.register(sid, provider="test", working_on=f"work of {sid}")
        registry.context_log(sid, f"diary of {sid}")
    registry.claim("kimi-1", ["src/auth/token.py", "docs/"])
    registry.claim("codex-2", ["src/api/*.py", "README.md"])
    registry.claim("gemini-3", ["tests/unit/"], shared=True)
    registry.claim("codex-2", ["tests/unit/"], shared=True)
    registry.finish("gemini-3")
    files = tree_files(registry)
    message = "69d4f37b664fc43d"  # written on the registry branch by the earlier layout
    files[f"messages/kimi-1/{message}.json"] = b'{"id": "69d4f37b664fc43d"}\n'
    files[f"acks/codex-2/{message}.json"] = b'{"id": "69d4f37b664fc43d"}\n'
    corrupt = "locks/ff/" + "f" * 40 + ".json"
    files[corrupt] = b"{not json"
    misnamed = "locks/ee/" + "e" * 40 + ".json"  # a record of another target's name
    files[misnamed] = files[P.record_name("src/auth/token.py")]
    files["sessions/live/broken-9.yaml"] = b"locks: [unclosed\n"
    main, parts = S.split(files, 16, 1_790_000_000.0)

    counted = check_split(files, main, parts, 16)
    assert counted["sessions"] == 2 and counted["records"] >= 6
    for shard in (corrupt, misnamed):
        assert all(shard in part for part in parts)
    assert main["sessions/live/broken-9.yaml"] == b"locks: [unclosed\n"
    for sid in ("kimi-1", "codex-2"):
        assert f"sessions/live/{sid}.yaml" in main and f"contexts/{sid}.md" in main
    assert f"messages/kimi-1/{message}.json" in main and f"acks/codex-2/{message}.json" in main
    assert any(p.startswith("sessions/done/") for p in main)
    assert not any(p.startswith("locks/") for p in main if p not in S.fence_files(0))
    # codex-2 holds a file, a glob and a shared directory: held lists in their shards only
    held = {i for i, part in enumerate(parts) if S.held_path("codex-2") in part}
    assert held == {S.path_shard("README.md", 16), S.path_shard("src/api/x.py", 16),
                    S.path_shard("tests/unit/x.py", 16)}
    for path in ("src/auth/token.py", "src/api/v1.py", "docs/a/b.md", "README.md", "tests/unit/x.py"):
        shard = parts[S.path_shard(path, 16)]
        recorded = [json.loads(v)["path"] for p, v in shard.items()
                    if p.startswith("locks/") and p not in (corrupt, misnamed)]
        assert any(P.covers(t, path) for t in recorded), path
        holders = [t for p, v in shard.items() if p.startswith(S.HELD_DIR + "/")
                   for t in S.parse_held(v)[0]]
        assert any(P.covers(t, path) for t in holders), path


def test_a_broad_lock_is_held_in_every_shard(one_branch):
    registry = one_branch
    registry.register("wide-1", provider="test")
    registry.claim("wide-1", ["src/"])
    main, parts = S.split(tree_files(registry), 4, 1_790_000_000.0)
    check_split(tree_files(registry), main, parts, 4)
    for part in parts:
        assert S.parse_held(part[S.held_path("wide-1")])[0] == ["src/"]
        assert P.record_name("src/") in part


@pytest.mark.parametrize("item", [1, None, True, ["a"], {"a": 1}, 1.5])
def test_a_held_list_naming_anything_but_paths_is_unreadable(item):
    """A held list is read only when every item is a path (its heartbeat then ages its
    session); one that names anything else is unreadable, so its heartbeat never keeps
    a holder fresher than its lock records say (branch/shardview.py rebuilds it)."""
    good = {"session": "s1", "locks": ["src/a.py", "src/b/"], "heartbeat_at": "2026-01-01T00:00:00Z"}
    assert S.parse_held(json.dumps(good).encode()) == (good["locks"], good["heartbeat_at"])
    with pytest.raises(UnreadableRecord):
        S.parse_held(json.dumps({**good, "locks": ["src/a.py", item]}).encode())
