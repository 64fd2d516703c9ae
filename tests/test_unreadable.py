"""Issue 34 §1: what cannot be read is never free.  Real faults in a registry made the way
`init` makes it (16 lock shards, clone refs), injected into its files by hand: a lock
record's loose object overwritten with garbage, a shard tip commit cut in half (the
file, and the content recompressed), a pack cut in half after a repack, a shard ref file
left empty while packed-refs holds an older value, a symbolic ref pointing at itself.
Each must be refused, naming the ref or object and the repair, by `lock check`, a claim,
the pre-commit guard and the harness's edit gate; `doctor` names it and `--fix`
restores it from the reflog or the remote."""
from __future__ import annotations

import json
import os
import subprocess
import zlib
from pathlib import Path

import pytest

from helpers import git
from test_guard import agents, commit, edit, head  # noqa: F401  (agents: a fixture)
from test_harness_hooks import edit as tool_edit
from test_harness_hooks import hook, verdict

from agent_registry.branch.paths import record_name

SESSION = "AGENT_REGISTRY_SESSION"
HELD = "src/auth.py"
SHARDS = "refs/heads/agent-registry-shards/"


@pytest.fixture(autouse=True)
def the_default_layout(monkeypatch):
    monkeypatch.delenv("AGENT_REGISTRY_SHARDS", raising=False)


@pytest.fixture
def registry(repo, run, agents):
    """*repo* with `init --hooks` (the default layout) and two live sessions, kimi-1 and
    kimi-2; nothing held yet."""
    assert run("init", "--hooks").returncode == 0
    for sid in ("kimi-1", "kimi-2"):
        assert run("register", sid, "--provider", "Kimi", "--pid", str(agents())).returncode == 0
    assert git(repo, "for-each-ref", SHARDS).count("\n") == 16
    return repo


def claim(run, sid: str = "kimi-1", path: str = HELD) -> None:
    proc = run("lock", "acquire", path, env={SESSION: sid})
    assert proc.returncode == 0, proc.stderr


def shard_of(repo: Path, path: str = HELD) -> str:
    """The shard ref whose tree holds *path*'s lock record."""
    name = record_name(path)
    for ref in git(repo, "for-each-ref", "--format=%(refname)", SHARDS).split():
        if subprocess.run(["git", "cat-file", "-e", f"{ref}:{name}"], cwd=repo).returncode == 0:
            return ref
    raise AssertionError(f"no shard records {path}")


def loose(repo: Path, oid: str) -> Path:
    path = repo / ".git" / "objects" / oid[:2] / oid[2:]
    assert path.exists(), f"{oid} is not loose"
    path.chmod(0o644)
    return path


def one_line(proc: subprocess.CompletedProcess) -> str:
    assert "Traceback" not in proc.stderr and "RecursionError" not in proc.stderr, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    return lines[0]


def refused_everywhere(repo: Path, run, naming: str, repair: str) -> None:
    """`lock check`, another session's claim, the pre-commit guard and Claude Code's
    edit gate all refuse the held path, each naming *naming* and *repair*."""
    check = run("lock", "check", HELD, env={SESSION: "kimi-2"})
    assert check.returncode == 1 and "free" not in check.stdout, (check.stdout, check.stderr)
    line = one_line(check)
    assert naming in line and repair in line, line
    shards = git(repo, "for-each-ref", "--format=%(objectname) %(refname)", SHARDS)
    taken = run("lock", "acquire", HELD, env={SESSION: "kimi-2"})
    assert taken.returncode == 1, (taken.stdout, taken.stderr)
    assert naming in one_line(taken)
    assert git(repo, "for-each-ref", "--format=%(objectname) %(refname)", SHARDS) == shards
    before = head(repo)
    edit(repo, HELD, "mine now\n")
    refused = commit(repo, "-m", "edit a held file")
    assert refused.returncode != 0 and "commit refused" in refused.stderr, refused.stderr
    assert naming in refused.stderr and "Traceback" not in refused.stderr
    assert head(repo) == before
    git(repo, "reset", "-q", "--hard")
    reason = verdict("claude", hook(repo, "claude", "pre-tool-use",
                                    tool_edit("claude", repo, HELD)))
    assert reason is not None and naming in reason, reason


def test_a_lock_record_overwritten_with_garbage(registry, run):
    claim(run)
    oid = git(registry, "rev-parse", f"{shard_of(registry)}:{record_name(HELD)}").strip()
    loose(registry, oid).write_bytes(b"this is not a zlib stream\n")
    refused_everywhere(registry, run, oid, "git fsck")


@pytest.mark.parametrize("cut", ["file", "content"])
def test_a_shard_tip_commit_cut_in_half(registry, run, cut):
    """The file cut (its zlib stream ends early), or the commit's text cut and stored
    again under its name (a valid object git reads, whose tree line is half a name)."""
    claim(run)
    ref = shard_of(registry)
    oid = git(registry, "rev-parse", ref).strip()
    path = loose(registry, oid)
    if cut == "file":
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    else:
        text = zlib.decompress(path.read_bytes()).split(b"\0", 1)[1]
        half = text[:len("tree ") + 20]
        path.write_bytes(zlib.compress(b"commit %d\0" % len(half) + half))
    refused_everywhere(registry, run, ref, "doctor --fix")


def test_a_pack_cut_in_half_after_a_repack(registry, run):
    """The project's objects packed by `git gc` first, the registry's by a later
    `git repack` into a pack of their own, which a full disk cut short."""
    git(registry, "gc", "-q")
    claim(run)
    packs = set((registry / ".git/objects/pack").glob("*.pack"))
    git(registry, "repack", "-d", "-q")
    new = set((registry / ".git/objects/pack").glob("*.pack")) - packs
    assert len(new) == 1 and git(registry, "count-objects").startswith("0 objects")
    pack = new.pop()
    pack.chmod(0o644)
    os.truncate(pack, pack.stat().st_size // 2)
    refused_everywhere(registry, run, "missing or damaged", "git fsck")


def test_an_emptied_shard_ref_with_an_older_value_in_packed_refs(registry, run):
    git(registry, "pack-refs", "--all")
    claim(run)  # the shard's new tip is a loose file again; packed-refs has the old one
    ref = shard_of(registry)
    (registry / ".git" / ref).write_bytes(b"")
    refused_everywhere(registry, run, ref, "doctor --fix")


def test_a_shard_ref_pointing_at_itself(registry, run):
    claim(run)
    ref = shard_of(registry)
    (registry / ".git" / ref).write_text(f"ref: {ref}\n")
    refused_everywhere(registry, run, ref, "loop")


def test_doctor_names_a_damaged_ref_and_restores_it_from_its_reflog(registry, run):
    git(registry, "pack-refs", "--all")
    claim(run)
    ref = shard_of(registry)
    tip = git(registry, "rev-parse", ref).strip()
    (registry / ".git" / ref).write_bytes(b"")
    proc = run("--json", "doctor")
    branch = next(c for c in json.loads(proc.stdout)["checks"] if c["name"] == "branch")
    assert proc.returncode == 1 and branch["status"] == "fail" and branch["fixable"], branch
    assert ref in branch["verdict"]
    fixed = run("--json", "doctor", "--fix")
    branch = next(c for c in json.loads(fixed.stdout)["checks"] if c["name"] == "branch")
    assert branch["status"] == "ok", branch
    assert git(registry, "rev-parse", ref).strip() == tip
    check = run("lock", "check", HELD, env={SESSION: "kimi-2"})
    assert check.returncode == 1 and check.stdout.startswith("locked: src/auth.py by kimi-1")


def test_doctor_fetches_a_corrupt_object_again_from_the_remote(registry, run, tmp_path):
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    git(registry, "remote", "add", "origin", str(remote))
    claim(run)
    assert run("sync").returncode == 0
    ref = shard_of(registry)
    tip = git(registry, "rev-parse", ref).strip()
    path = loose(registry, tip)
    text = zlib.decompress(path.read_bytes()).split(b"\0", 1)[1][:30]
    path.write_bytes(zlib.compress(b"commit %d\0" % len(text) + text))
    assert run("lock", "check", HELD, env={SESSION: "kimi-2"}).returncode == 1
    proc = run("--json", "doctor")
    branch = next(c for c in json.loads(proc.stdout)["checks"] if c["name"] == "branch")
    assert branch["status"] == "fail" and tip in branch["verdict"] and branch["fixable"]
    fixed = run("--json", "doctor", "--fix")
    branch = next(c for c in json.loads(fixed.stdout)["checks"] if c["name"] == "branch")
    assert branch["status"] == "ok", (branch, fixed.stderr)
    check = run("lock", "check", HELD, env={SESSION: "kimi-2"})
    assert check.returncode == 1 and check.stdout.startswith("locked: src/auth.py by kimi-1")
    assert "error" not in git(registry, "fsck", "--no-dangling", check=False)


def test_a_fetched_shard_tip_that_cannot_be_read(registry, run, tmp_path, agents):
    """Another clone's claim fetched (the remote-tracking shard ahead of this clone's),
    its commit damaged: never this clone's older tip, where the path is free."""
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    git(registry, "remote", "add", "origin", str(remote))
    git(registry, "push", "-q", "origin", "main")
    assert run("sync").returncode == 0
    other = tmp_path / "other"
    git(tmp_path, "clone", "-q", str(remote), str(other))
    assert run("sync", cwd=other).returncode == 0
    assert run("register", "kimi-3", "--provider", "Kimi", "--pid", str(agents()),
               cwd=other).returncode == 0
    proc = run("lock", "acquire", "docs/theirs.md", cwd=other, env={SESSION: "kimi-3"})
    assert proc.returncode == 0, proc.stderr
    ref = shard_of(other, "docs/theirs.md")
    tracking = ref.replace("refs/heads/", "refs/remotes/origin/")
    git(registry, "fetch", "-q", "origin", f"+{ref}:{tracking}")
    tip = git(registry, "rev-parse", tracking).strip()
    assert tip != git(registry, "rev-parse", ref).strip()
    loose(registry, tip).write_bytes(b"garbage\n")
    check = run("lock", "check", "docs/theirs.md", env={SESSION: "kimi-2"})
    assert check.returncode == 1 and "free" not in check.stdout, (check.stdout, check.stderr)
    assert tip in one_line(check) or tracking in one_line(check)


def test_doctor_sets_a_pack_cut_short_aside_and_fetches_its_objects_again(registry, run,
                                                                          tmp_path):
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    git(registry, "remote", "add", "origin", str(remote))
    git(registry, "gc", "-q")
    claim(run)
    assert run("sync").returncode == 0
    packs = set((registry / ".git/objects/pack").glob("*.pack"))
    git(registry, "repack", "-d", "-q")
    (pack,) = set((registry / ".git/objects/pack").glob("*.pack")) - packs
    pack.chmod(0o644)
    os.truncate(pack, pack.stat().st_size // 2)
    # (a command that fetches now heals the objects: git fetches what it finds missing)
    proc = run("--json", "doctor")
    branch = next(c for c in json.loads(proc.stdout)["checks"] if c["name"] == "branch")
    assert branch["status"] == "fail" and pack.name in branch["verdict"], branch
    assert "refs/heads/agent-registry" in branch["verdict"] and branch["fixable"]
    fixed = run("--json", "doctor", "--fix")
    branch = next(c for c in json.loads(fixed.stdout)["checks"] if c["name"] == "branch")
    assert branch["status"] == "ok" and "branch" in json.loads(fixed.stdout)["fixed"], branch
    assert not pack.exists()
    check = run("lock", "check", HELD, env={SESSION: "kimi-2"})
    assert check.returncode == 1 and check.stdout.startswith("locked: src/auth.py by kimi-1")
    assert "error" not in git(registry, "fsck", "--no-dangling", check=False)
