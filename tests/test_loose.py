"""Objects read without git (store/loose.py, store/packs.py): what the registry wrote
loose is read from the object files, what `git gc` packed (deltas too) from the packs,
anything else (in an alternate) by `git cat-file --batch` as before, and all give git's
own answers."""
from __future__ import annotations

import subprocess

import pytest

from helpers import CLI, Runner, git, make_repo
from test_paths_case import git_spy

BRANCH = "refs/heads/agent-registry"


@pytest.fixture(params=["sha1", "sha256"])
def repo(tmp_path, request):
    repo = tmp_path / "repo"
    if request.param == "sha256":
        repo.mkdir()
        git(repo, "init", "-q", "--object-format=sha256")
    repo = make_repo(repo)  # (a second `git init` keeps the format)
    run = Runner(repo)
    for args in (["init"], ["register", "s1", "--provider", "test"],
                 ["register", "s2", "--provider", "test"],
                 ["lock", "acquire", "src/auth.py", "docs/a/b.md", "--session", "s2"],
                 *(["lock", "heartbeat", "--session", sid] for sid in ("s1", "s2") * 4)):
        assert run(*args).returncode == 0
    return repo


def check(repo, env, path="src/auth.py"):
    proc = subprocess.run([CLI, "lock", "check", path, "--session", "s1"], cwd=repo, env=env,
                          capture_output=True, text=True, timeout=120)
    return proc.returncode, proc.stdout + proc.stderr


def reader(repo):
    from agent_registry.store.git import Repo, discover
    return Repo(discover(str(repo)))


def every_rev(repo) -> list[str]:
    """The tip, the tip with every path of its tree (trees too), and names that are not
    there, through trees and through a blob."""
    tip = git(repo, "rev-parse", BRANCH).strip()
    tree = git(repo, "rev-parse", f"{tip}^{{tree}}").strip()
    revs = [tip, tree, f"{tip}:", f"{tree}:sessions", f"{tip}:nothing",
            f"{tip}:sessions/none.yaml", f"{tip}:registry.md/x", f"{tip}:sessions//live",
            f"{tip}:./registry.md", "0" * len(tip), tip[:12], "agent-registry"]
    for commit in git(repo, "rev-list", BRANCH).split():  # older versions: deltas once packed
        paths = git(repo, "ls-tree", "-r", "-t", "--name-only", commit).split()
        revs += [commit, *(f"{commit}:{p}" for p in paths)]
    return revs


def test_loose_reads_answer_as_cat_file_does(repo):
    """Every name, loose and then packed, read through the reader equals git's own
    answer (missing as None)."""
    revs = every_rev(repo)
    batch = subprocess.run(["git", "cat-file", "--batch"], cwd=repo, capture_output=True,
                           input="".join(r + "\n" for r in revs).encode(), check=True).stdout
    want = []
    for _ in revs:
        header, _, batch = batch.partition(b"\n")
        parts = header.split()
        if parts[-1] in (b"missing", b"ambiguous"):
            want.append(None)
            continue
        size = int(parts[2])
        want.append((parts[1].decode(), batch[:size]))
        batch = batch[size + 1:]
    from agent_registry.store.loose import UNKNOWN
    for packed in (False, True):
        if packed:
            git(repo, "gc", "-q", "--prune=now")
            packs = list((repo / ".git" / "objects" / "pack").glob("*.idx"))
            listed = git(repo, "verify-pack", "-v", *map(str, packs))
            assert any(len(line.split()) == 7 for line in listed.splitlines())  # deltas
        store = reader(repo)
        try:
            assert [store.reader.read(rev) for rev in revs] == want
            assert store.reader.read_many(revs) == want
            decided = [store.reader._loose.read(rev) is not UNKNOWN for rev in revs]
            assert all(decided[:6]) and all(decided[12:])  # all but the names git spells
        finally:
            store.close()


def test_lock_check_starts_no_git_loose_or_packed_and_asks_git_for_an_alternate(repo, tmp_path):
    env, log = git_spy(tmp_path)
    log.write_text("")
    before = check(repo, env)
    assert before[0] == 1 and "s2" in before[1]
    git(repo, "gc", "-q", "--prune=now")
    after = check(repo, env)  # the same answer, but for the holder's age if a second ticked
    assert (after[0], after[1].split(", ")[0]) == (before[0], before[1].split(", ")[0])
    # a claim after the gc: a loose tip over packed trees, read partly each way
    assert Runner(repo)("lock", "acquire", "docs/a/c.md", "--session", "s2").returncode == 0
    code, out = check(repo, env, "docs/a/c.md")
    assert code == 1 and "s2" in out
    code, out = check(repo, env, "docs/a/b.md")
    assert code == 1 and "s2" in out
    # no cat-file (a sha256 repository is found by git rev-parse)
    assert set(log.read_text().split()) <= {"rev-parse"}
    # a clone whose objects are its origin's (objects/info/alternates): git reads them
    clone = tmp_path / "shared"
    git(tmp_path, "clone", "-q", "--shared", str(repo), str(clone))
    git(clone, "fetch", "-q", "origin", f"{BRANCH}*:{BRANCH}*")  # with its shards
    git(clone, "config", "agent-registry.remote", "none")
    assert not list((clone / ".git" / "objects" / "pack").glob("*.idx"))
    code, out = check(clone, env, "docs/a/c.md")
    assert code == 1 and "locked: docs/a/c.md by s2" in out
    assert "cat-file" in log.read_text().split()


def test_a_tree_entry_with_no_space_before_its_name_is_for_git_to_read(tmp_path):
    """A tree entry is ``<mode> <name>\\0<oid>``: one with no space before its NUL is not
    a tree git wrote.  The reader leaves it to git (UNKNOWN), never reads a name found past
    the entry's end (which would say another name in that tree is certainly not there)."""
    import hashlib
    import zlib

    from agent_registry.store.loose import UNKNOWN, LooseObjects
    repo = make_repo(tmp_path / "repo")
    objects = repo / ".git" / "objects"
    data = b"40000x\0" + bytes(20) + b"100644 y\0" + bytes(20)
    body = b"tree %d\0" % len(data) + data
    oid = hashlib.sha1(body).hexdigest()
    (objects / oid[:2]).mkdir(exist_ok=True)
    (objects / oid[:2] / oid[2:]).write_bytes(zlib.compress(body))
    assert LooseObjects(str(objects), 40).read(f"{oid}:x") is UNKNOWN


def test_a_tree_of_equal_entries_is_read_as_git_lists_it(tmp_path):
    """A tree whose entries all have one length (a lock shard's ``locks/`` folder, a
    folder of lock records) is looked up in place (store/loose.EqualEntries): every name
    gives the id `git ls-tree` gives it, a name's bytes inside another entry's id are not
    taken for it, and a name it lacks reads as absent."""
    import hashlib
    import zlib

    from agent_registry.store.loose import EqualEntries, parse_entries
    repo = make_repo(tmp_path / "repo")
    names = [b"%02x" % n for n in range(12)]
    ids = [hashlib.sha1(name).digest() for name in names]
    ids[9] = b" 05\0" + ids[9][4:]  # entry 05's name, after it, where it is no name
    ids[10] = ids[10][:12] + b" zz\0" + ids[10][16:]  # a name no entry has
    ids[8] = ids[8][:18] + b" 0"  # and the start of one across entries
    data = b"".join(b"40000 " + name + b"\0" + oid for name, oid in zip(names, ids))
    body = b"tree %d\0" % len(data) + data
    oid = hashlib.sha1(body).hexdigest()
    objects = repo / ".git" / "objects"
    (objects / oid[:2]).mkdir(exist_ok=True)
    (objects / oid[:2] / oid[2:]).write_bytes(zlib.compress(body))
    listed = dict(line.split(" ", 2)[2].split("\t")[::-1]
                  for line in git(repo, "ls-tree", oid).splitlines())
    entries = parse_entries(data, 20)
    assert isinstance(entries, EqualEntries)
    assert {name: entries.get(name.encode()).hex() for name in listed} == listed
    assert sorted(listed) == [name.decode() for name in names]
    for absent in (b"0c", b"zz", b"5", b"005", b"", b" 05"):
        assert entries.get(absent) is None


def test_what_a_process_wrote_it_reads_back_without_its_file(repo):
    """A long-lived writer (the MCP server) reads the commits and trees of its own last
    write at its next one: kept from the write (a name's content never changes), not
    read from its file again; what git stored is the same object."""
    from agent_registry.store.git import Repo, discover
    store = Repo(discover(str(repo)))
    try:
        oid = store.write_object("blob", b"kept as written\n")
        assert git(repo, "cat-file", "blob", oid) == "kept as written\n"
        (repo / ".git" / "objects" / oid[:2] / oid[2:]).unlink()
        assert store.reader.read(oid) == ("blob", b"kept as written\n")
    finally:
        store.close()
