"""Small files read and written with bare system calls (store/rawfile.py), and what
rides on them: refs read as git reads them (loose, packed, symbolic), objects written
read-only into fan-out folders that may not exist yet, and objects read once per
process."""
from __future__ import annotations

import os
import stat

import pytest

from helpers import git, make_repo


@pytest.mark.parametrize("size", [0, 1, 4095, 65535, 65536, 65537, 3 * 65536, 200_001])
def test_read_bytes_reads_every_size_whole(tmp_path, size):
    from agent_registry.store.rawfile import read_bytes
    data = os.urandom(size)
    (tmp_path / "f").write_bytes(data)
    assert read_bytes(str(tmp_path / "f")) == data


def test_read_bytes_raises_as_open_does(tmp_path):
    from agent_registry.store.rawfile import read_bytes
    with pytest.raises(FileNotFoundError):
        read_bytes(str(tmp_path / "missing"))
    with pytest.raises(IsADirectoryError):  # read_ref: a folder of refs is no ref
        read_bytes(str(tmp_path))
    if os.path.isdir("/proc/self/fd"):  # Linux: the folder's descriptor was closed
        assert not [fd for fd in os.listdir("/proc/self/fd")
                    if os.path.realpath(f"/proc/self/fd/{fd}") == str(tmp_path)]


def test_create_read_only_is_exclusive_and_read_only(tmp_path):
    from agent_registry.store.rawfile import create_read_only
    target = str(tmp_path / "obj")
    create_read_only(target, b"x" * 100_000)
    assert (tmp_path / "obj").read_bytes() == b"x" * 100_000
    assert stat.S_IMODE(os.stat(target).st_mode) & 0o222 == 0
    with pytest.raises(FileExistsError):
        create_read_only(target, b"other")
    assert (tmp_path / "obj").read_bytes() == b"x" * 100_000


@pytest.fixture
def repo(tmp_path):
    repo = make_repo(tmp_path / "repo")
    head = git(repo, "rev-parse", "HEAD").strip()
    for name in ("a", "ab", "b/a", "x-a"):
        git(repo, "update-ref", f"refs/heads/{name}", head)
    return repo


def _repo(path):
    from agent_registry.store.git import Repo, discover
    return Repo(discover(str(path)))


def _git_answer(repo, ref):
    proc = git(repo, "rev-parse", "--verify", "-q", ref, check=False)
    return proc.strip() or None


REFS = ["refs/heads/a", "refs/heads/ab", "refs/heads/b/a", "refs/heads/x-a", "HEAD",
        "refs/heads/missing", "refs/heads/b", "refs/heads/"]


def test_read_ref_agrees_with_git_loose_and_packed(repo):
    """Loose, then packed (`pack-refs --all`), then packed with a newer loose copy over
    one: read_ref says what `git rev-parse` says, names that end like others included."""
    assert [_repo(repo).read_ref(r) for r in REFS] == [_git_answer(repo, r) for r in REFS]
    git(repo, "pack-refs", "--all", "--prune")
    assert not (repo / ".git/refs/heads/a").exists()
    assert [_repo(repo).read_ref(r) for r in REFS] == [_git_answer(repo, r) for r in REFS]
    git(repo, "commit", "-q", "--allow-empty", "-m", "newer")
    git(repo, "update-ref", "refs/heads/ab", "HEAD")  # loose, over its packed line
    assert _repo(repo).read_ref("refs/heads/ab") == _git_answer(repo, "refs/heads/ab")
    assert _repo(repo).read_ref("refs/heads/a") != _repo(repo).read_ref("refs/heads/ab")


def test_objects_go_to_new_fan_out_folders_read_only_and_git_reads_them(repo):
    store = _repo(repo)
    objects = repo / ".git/objects"
    for n in range(40):  # some land in a folder that is not there yet
        oid = store.write_object("blob", f"blob {n}\n".encode())
        assert git(repo, "cat-file", "-p", oid) == f"blob {n}\n"
        assert stat.S_IMODE(os.stat(objects / oid[:2] / oid[2:]).st_mode) & 0o222 == 0
    assert not [p for p in objects.iterdir() if p.name.startswith("tmp_obj_")]
    git(repo, "fsck", "--strict")


def test_an_object_is_read_from_its_file_once(repo):
    """The reader keeps small objects it read: a command reading a commit twice opens
    its file once (and an answer is git's, however often it is asked)."""
    store = _repo(repo)
    tip = git(repo, "rev-parse", "HEAD").strip()
    opened = []
    from agent_registry.store import loose
    real = loose.read_bytes
    loose.read_bytes = lambda path: opened.append(path) or real(path)
    try:
        first = store.reader.read(tip)
        again = [store.reader.read(tip) for _ in range(3)]
    finally:
        loose.read_bytes = real
    assert first[0] == "commit" and all(a == first for a in again)
    assert first[1] == git(repo, "cat-file", "commit", tip).encode()
    assert len(opened) == 1
