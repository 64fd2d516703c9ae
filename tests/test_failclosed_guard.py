"""Issue 9 §2 and §3: one bad record never wedges the registry, and no git path goes
around the guard.  Real git, the installed hooks, real `git commit`/`git merge`/
`git push` to a bare remote."""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from helpers import git, put_on_ref, registry_refs, shard_refs_of
from test_guard import agents, commit, edit, head, hold  # noqa: F401  (fixture)

SESSION = "AGENT_REGISTRY_SESSION"


def tip(repo: Path) -> str:
    return git(repo, "rev-parse", "refs/heads/agent-registry").strip()


def write_on_branch(repo: Path, files: dict[str, bytes]) -> None:
    """Change files on the registry branch by hand (plumbing, a private index), as a
    person or an old version of the tool might."""
    env = {**os.environ, "GIT_INDEX_FILE": str(repo.parent / "by-hand.index")}

    def plumb(*args: str, data: bytes | None = None) -> str:
        return subprocess.run(["git", *args], cwd=repo, env=env, input=data, check=True,
                              capture_output=True).stdout.decode().strip()

    old = tip(repo)
    plumb("read-tree", old)
    for path, data in files.items():
        blob = plumb("hash-object", "-w", "--stdin", data=data)
        plumb("update-index", "--add", "--cacheinfo", f"100644,{blob},{path}")
    new = plumb("commit-tree", plumb("write-tree"), "-p", old, "-m", "edited by hand")
    plumb("update-ref", "refs/heads/agent-registry", new, old)


def write_lock_record(repo: Path, target: str, data: bytes) -> str:
    """Write *target*'s lock record by hand in every lock shard that records it (one for
    a file, all 16 for a lock of no key), as a person or an old version of the tool
    might; its name."""
    name = record(target)
    for ref in shard_refs_of(repo, target):
        put_on_ref(repo, ref, {name: data}, "edited by hand")
    return name


def record(target: str) -> str:
    digest = hashlib.sha1(target.encode()).hexdigest()
    return f"locks/patterns/{digest}.json" if any(c in target for c in "*?[") else \
        f"locks/{digest[:2]}/{digest}.json"


def lock_body(target: str, sid: str) -> bytes:
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return json.dumps({"path": target, "mode": "exclusive", "holders": [
        {"session": sid, "generation": "g", "acquired_at": now, "ttl": 600}]}).encode()


def register(run, sid: str, pid: int) -> None:
    assert run("register", sid, "--provider", "Kimi", "--pid", str(pid)).returncode == 0


# -- §2: bad patterns, literal names, unreadable records ---------------------------

def test_a_bad_glob_is_refused_at_claim_time_and_nothing_is_written(guarded, run, agents):
    register(run, "kimi-1", agents())
    before = registry_refs(guarded)
    for args in (["lock", "acquire", "lib/[z-a].py"], ["--json", "lock", "acquire", "a[b"]):
        proc = run(*args, env={SESSION: "kimi-1"})
        assert proc.returncode == 2, proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and "invalid glob" in lines[0] and ":(literal)" in lines[0]
        assert "Traceback" not in proc.stderr
    assert registry_refs(guarded) == before


def test_a_bad_pattern_record_on_the_branch_is_that_records_problem(guarded, run, agents):
    register(run, "kimi-1", agents())
    register(run, "kimi-2", agents())
    assert run("lock", "acquire", "src/auth.py", env={SESSION: "kimi-1"}).returncode == 0
    name = write_lock_record(guarded, "lib/[z-a].py", lock_body("lib/[z-a].py", "kimi-1"))
    # claims by any session still work, and say which record is bad
    proc = run("lock", "acquire", "README.md", env={SESSION: "kimi-2"})
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr and name in proc.stderr and "invalid" in proc.stderr
    # fail closed: the bad glob covers everything under its literal prefix, lib/
    proc = run("lock", "acquire", "lib/util.py", env={SESSION: "kimi-2"})
    assert proc.returncode == 1 and "kimi-1" in proc.stderr
    check = json.loads(run("--json", "lock", "check", "lib/util.py").stdout)
    assert check["paths"][0]["state"] == "locked"
    # the guard still enforces the rest, and names the record
    edit(guarded, "src/auth.py")
    proc = commit(guarded, "-m", "touch a locked path")
    assert proc.returncode == 1 and "kimi-1" in proc.stderr
    assert name in proc.stderr and "not checked" not in proc.stderr
    git(guarded, "reset", "-q", "--hard")
    edit(guarded, "notes.txt")
    proc = commit(guarded, "-m", "unrelated")
    assert proc.returncode == 0 and name in proc.stderr
    # the bad record can still be named: checked, and freed, which ends the warnings
    check = json.loads(run("--json", "lock", "check", "lib/[z-a].py").stdout)
    assert check["paths"][0]["state"] == "locked"
    proc = run("lock", "force-release", "lib/[z-a].py", "--force", "--reason", "bad glob",
               "--by", "admin")
    assert proc.returncode == 0, proc.stderr
    proc = run("lock", "acquire", "lib/util.py", env={SESSION: "kimi-2"})
    assert proc.returncode == 0 and name not in proc.stderr


def test_a_literal_name_with_glob_characters_is_one_lock_everywhere(guarded, run, agents):
    edit(guarded, "a[1].py", "one\n")
    edit(guarded, "a1.py", "plain\n")
    assert commit(guarded, "-m", "files").returncode == 0
    register(run, "kimi-1", agents())
    register(run, "kimi-2", agents())
    claim = json.loads(run("--json", "lock", "acquire", "a[1].py",
                           env={SESSION: "kimi-1"}).stdout)
    assert claim["locks"][0]["path"] == ":(literal)a[1].py"
    # check, another session's claim and the guard agree: a[1].py is held, a1.py is not
    check = json.loads(run("--json", "lock", "check", "a[1].py", "a1.py").stdout)
    assert [p["state"] for p in check["paths"]] == ["locked", "free"]
    proc = run("lock", "acquire", "a[1].py", env={SESSION: "kimi-2"})
    assert proc.returncode == 1 and "kimi-1" in proc.stderr
    assert run("lock", "acquire", "a1.py", env={SESSION: "kimi-2"}).returncode == 0
    assert run("lock", "release", "a1.py", env={SESSION: "kimi-2"}).returncode == 0
    edit(guarded, "a[1].py")
    proc = commit(guarded, "-m", "touch the literal name")
    assert proc.returncode == 1 and "a[1].py: locked by kimi-1" in proc.stderr
    assert run("guard", "a[1].py", check_untouched=False).returncode == 1
    git(guarded, "reset", "-q", "--hard")
    edit(guarded, "a1.py")
    assert commit(guarded, "-m", "the other file").returncode == 0
    # a glob that has the same spelling covers its own literal name too (as git
    # pathspecs do), so a clone that lacks the file still agrees
    (guarded / "b[2].py").unlink(missing_ok=True)
    assert run("lock", "acquire", "b[2].py", env={SESSION: "kimi-1"}).returncode == 0
    edit(guarded, "b[2].py")
    assert commit(guarded, "-m", "new file under a glob").returncode == 1


def test_a_glob_through_pathspec_magic_still_matches(guarded, run, agents):
    edit(guarded, "a[12].py", "literal\n")
    assert commit(guarded, "-m", "file").returncode == 0
    register(run, "kimi-1", agents())
    claim = json.loads(run("--json", "lock", "acquire", ":(glob)a[12].py", "src/**/*.py",
                           env={SESSION: "kimi-1"}).stdout)
    assert [lock["path"] for lock in claim["locks"]] == ["a[12].py", "src/**/*.py"]
    for path in ("a1.py", "a2.py", "src/auth.py"):
        edit(guarded, path)
        proc = commit(guarded, "-m", f"touch {path}")
        assert proc.returncode == 1 and "kimi-1" in proc.stderr, path
        git(guarded, "reset", "-q", "--hard")
        git(guarded, "clean", "-qfd")
    check = json.loads(run("--json", "lock", "check", "a2.py", ":(literal)a3.py").stdout)
    assert [p["state"] for p in check["paths"]] == ["locked", "free"]


def break_held_record(guarded: Path, run, agents, target: str, garbage: bytes) -> str:
    """kimi-1 holds *target*, whose lock record is then overwritten with *garbage*;
    kimi-2's claim of src/auth.py is refused, naming the holder and the broken record.
    The record's name."""
    register(run, "kimi-1", agents())
    register(run, "kimi-2", agents())
    assert run("lock", "acquire", target, env={SESSION: "kimi-1"}).returncode == 0
    name = write_lock_record(guarded, target, garbage)
    proc = run("lock", "acquire", "src/auth.py", env={SESSION: "kimi-2"})
    assert proc.returncode == 1 and "kimi-1" in proc.stderr and name in proc.stderr
    return name


def test_an_unreadable_lock_record_fails_closed(guarded, run, agents):
    name = break_held_record(guarded, run, agents, "src/auth.py", b"{not json")
    assert run("lock", "acquire", "README.md", env={SESSION: "kimi-2"}).returncode == 0
    check = json.loads(run("--json", "lock", "check", "src/auth.py").stdout)
    assert check["paths"][0]["state"] == "locked" and check["paths"][0]["owner"] == "kimi-1"
    edit(guarded, "src/auth.py")
    proc = commit(guarded, "-m", "over a broken record")
    assert proc.returncode == 1 and "kimi-1" in proc.stderr and name in proc.stderr


@pytest.mark.parametrize("ttl", [0, -1])
def test_a_lock_record_with_no_positive_ttl_is_unreadable_not_stale(guarded, run, agents, ttl):
    """A TTL no claim can write (0 or below: `--ttl` takes 1 to 604800 s) would make the
    lock stale at once and let the commit through: it is a record that cannot be read."""
    body = json.loads(lock_body("src/auth.py", "kimi-1"))
    body["holders"][0]["ttl"] = ttl
    name = break_held_record(guarded, run, agents, "src/auth.py", json.dumps(body).encode())
    edit(guarded, "src/auth.py")
    proc = commit(guarded, "-m", "over an out-of-range ttl")
    assert proc.returncode == 1 and "kimi-1" in proc.stderr and name in proc.stderr


def test_a_session_of_no_known_status_keeps_its_locks(guarded, run, agents):
    """A status none of the four (OnWorking, Finished, Stop, Killed) is not an ended
    session whose locks no longer count: the record cannot be read, and its locks hold."""
    register(run, "kimi-1", agents())
    assert run("lock", "acquire", "src/auth.py", env={SESSION: "kimi-1"}).returncode == 0
    raw = git(guarded, "cat-file", "blob", "refs/heads/agent-registry:sessions/live/kimi-1.yaml")
    assert 'status: "OnWorking"' in raw
    write_on_branch(guarded, {"sessions/live/kimi-1.yaml":
                              raw.replace('"OnWorking"', '"Zzz"').encode()})
    edit(guarded, "src/auth.py")
    proc = commit(guarded, "-m", "over an unknown status")
    assert proc.returncode == 1 and "kimi-1" in proc.stderr, proc.stderr
    assert "sessions/live/kimi-1.yaml is unreadable" in proc.stderr


def test_an_unreadable_session_file_keeps_its_locks(guarded, run, agents):
    register(run, "kimi-1", agents())
    assert run("lock", "acquire", "src/auth.py", env={SESSION: "kimi-1"}).returncode == 0
    write_on_branch(guarded, {"sessions/live/kimi-1.yaml": b"id: [unclosed\n\t:"})
    edit(guarded, "src/auth.py")
    proc = commit(guarded, "-m", "over a broken session")
    assert proc.returncode == 1 and "kimi-1" in proc.stderr
    assert "sessions/live/kimi-1.yaml is unreadable" in proc.stderr


@pytest.mark.parametrize("branch", ["agent-registry", "agent-registry-shards/03"])
@pytest.mark.parametrize("breakage", ["missing object", "empty ref"])
def test_an_unreadable_branch_refuses_the_commit_with_the_override(guarded, run, agents,
                                                                   breakage, branch):
    """The main branch, or a lock shard the commit's paths are not even recorded in:
    the guard cannot tell what the shard holds, so it refuses (fail closed)."""
    hold(guarded, "kimi-1", ["src/auth.py"], agents())
    ref = guarded / ".git" / "refs" / "heads" / branch
    ref.write_text("1" * 40 + "\n" if breakage == "missing object" else "")
    edit(guarded, "README.md")
    before = head(guarded)
    proc = commit(guarded, "-m", "registry broken")
    assert proc.returncode == 1 and head(guarded) == before
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "unreadable" in lines[0] and "AGENT_REGISTRY_ALLOW=1" in lines[0]
    status = json.loads(run("--json", "hooks", "status").stdout)
    assert status["mode"].startswith("refusing: ")
    proc = commit(guarded, "-m", "deliberately", env={"AGENT_REGISTRY_ALLOW": "1"})
    assert proc.returncode == 0 and head(guarded) != before


def test_no_registry_branch_is_not_unreadable(repo, run):
    assert run("hooks", "install").returncode == 0
    edit(repo, "README.md")
    proc = commit(repo, "-m", "no registry yet")
    assert proc.returncode == 0 and "no registry branch" in proc.stderr


@pytest.mark.parametrize("packed", [False, True], ids=["loose", "packed"])
def test_lock_shards_without_their_registry_branch_refuse_the_commit(guarded, run, agents,
                                                                     packed):
    """The registry branch's ref deleted while its lock shards are there (loose, or in
    packed-refs) is a broken registry, not "no registry": the commit is refused."""
    register(run, "kimi-1", agents())
    assert run("lock", "acquire", "src/auth.py", env={SESSION: "kimi-1"}).returncode == 0
    if packed:
        git(guarded, "pack-refs", "--all")
    git(guarded, "update-ref", "-d", "refs/heads/agent-registry")
    edit(guarded, "src/auth.py")
    proc = commit(guarded, "-m", "with the registry branch gone")
    assert proc.returncode == 1 and "agent-registry" in proc.stderr, proc.stderr
    assert "no registry branch" not in proc.stderr


# -- §3: merges, cherry-picks and fast-forwards ------------------------------------

def feature_on_remote(repo: Path) -> str:
    """A branch that changes src/auth.py, already pushed (before anyone locked it); main
    moves on, so that merging it makes a merge commit."""
    git(repo, "checkout", "-q", "-b", "feature")
    edit(repo, "src/auth.py", "feature\n")
    assert commit(repo, "-m", "feature work").returncode == 0
    feature = head(repo)
    git(repo, "push", "-q", "origin", "feature")
    git(repo, "checkout", "-q", "main")
    return feature


def push(repo: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "push", "origin", "main"], cwd=repo, capture_output=True,
                          text=True, timeout=120)


def remote_main(repo: Path) -> str:
    return git(repo, "ls-remote", "origin", "refs/heads/main").split()[0]


def test_a_merge_of_a_locked_path_is_refused_when_made_and_when_pushed(pushing, agents, run):
    feature_on_remote(pushing)
    edit(pushing, "README.md", "main moves on\n")
    assert commit(pushing, "-m", "main work").returncode == 0
    git(pushing, "push", "-q", "origin", "main")
    hold(pushing, "kimi-1", ["src/auth.py"], agents())
    status = json.loads(run("--json", "hooks", "status").stdout)
    assert {"hook": "pre-merge-commit", "state": "installed"}.items() <= \
        next(h for h in status["hooks"] if h["hook"] == "pre-merge-commit").items()
    before = head(pushing)
    proc = subprocess.run(["git", "merge", "--no-edit", "feature"], cwd=pushing,
                          capture_output=True, text=True)
    assert proc.returncode != 0 and head(pushing) == before
    assert "merge refused" in proc.stderr and "src/auth.py: locked by kimi-1" in proc.stderr
    git(pushing, "merge", "--abort", check=False)
    git(pushing, "merge", "--no-verify", "--no-edit", "feature")
    merge = head(pushing)
    proc = push(pushing)
    assert proc.returncode == 1, proc.stderr
    assert f"commit {merge[:12]} touches src/auth.py" in proc.stderr
    assert remote_main(pushing) == before


def test_a_fast_forward_onto_a_remote_branch_is_caught_by_pre_push(pushing, agents):
    feature = feature_on_remote(pushing)
    hold(pushing, "kimi-1", ["src/auth.py"], agents())
    git(pushing, "merge", "-q", "--ff-only", "feature")  # no hook runs; no new commit
    assert head(pushing) == feature
    proc = push(pushing)
    assert proc.returncode == 1, proc.stderr
    assert "the update of refs/heads/main" in proc.stderr and "src/auth.py" in proc.stderr


def test_a_cherry_pick_of_a_locked_path_is_caught_by_pre_push(pushing, agents):
    feature = feature_on_remote(pushing)
    edit(pushing, "README.md", "main moves on\n")
    assert commit(pushing, "-m", "main work").returncode == 0
    hold(pushing, "kimi-1", ["src/auth.py"], agents())
    git(pushing, "cherry-pick", feature)  # runs no pre-commit hook
    picked = head(pushing)
    proc = push(pushing)
    assert proc.returncode == 1, proc.stderr
    assert f"commit {picked[:12]} touches src/auth.py" in proc.stderr


def test_a_submodule_moved_over_a_held_file_inside_it_is_refused(pushing, agents, tmp_path):
    """A lock on a file inside a submodule (sub/f.py) holds the submodule's entry: a
    commit that moves the submodule changes that file, so the guard refuses it at commit
    and at push, as `guard sub` and `lock check sub` say (it read the entry `sub` as a
    file, which no lock covers)."""
    library = tmp_path / "library"
    git(tmp_path, "init", "-q", str(library))
    (library / "f.py").write_text("one\n")
    git(library, "add", "f.py")
    git(library, "commit", "-qm", "library")
    git(pushing, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(library),
        "sub")
    assert commit(pushing, "-m", "add sub").returncode == 0
    assert push(pushing).returncode == 0
    hold(pushing, "kimi-1", ["sub/f.py"], agents())
    (pushing / "sub" / "f.py").write_text("two\n")
    git(pushing / "sub", "commit", "-qam", "inside")  # the submodule's own repository
    git(pushing, "add", "sub")
    proc = commit(pushing, "-m", "bump sub")
    assert proc.returncode == 1 and "sub/" in proc.stderr and "kimi-1" in proc.stderr, \
        proc.stderr
    proc = commit(pushing, "--no-verify", "-m", "bump sub, past the hook")
    assert proc.returncode == 0, proc.stderr
    proc = push(pushing)
    assert proc.returncode == 1 and "sub/" in proc.stderr and "kimi-1" in proc.stderr, \
        proc.stderr


def test_an_unreadable_glob_record_is_held_by_the_sessions_that_list_it(guarded, run, agents):
    name = break_held_record(guarded, run, agents, "src/*.py", b"\x00garbage")
    edit(guarded, "src/new.py")
    proc = commit(guarded, "-m", "under a broken glob record")
    assert proc.returncode == 1 and "kimi-1" in proc.stderr and name in proc.stderr
    # its holder can still release it, which removes the broken record
    assert run("lock", "release", "src/*.py", env={SESSION: "kimi-1"}).returncode == 0
    assert commit(guarded, "-m", "released").returncode == 0


def test_an_existing_pre_merge_commit_hook_is_chained_and_restored(repo, run):
    hook = repo / ".git" / "hooks" / "pre-merge-commit"
    original = "#!/bin/sh\n# the team's merge check\nexit 0\n"
    hook.write_text(original)
    hook.chmod(0o700)
    result = json.loads(run("--json", "hooks", "install").stdout)
    mine = next(h for h in result["hooks"] if h["hook"] == "pre-merge-commit")
    assert mine["state"] == "installed, chaining the existing hook"
    assert "agent_registry.enforce.guard import main" in hook.read_text() and \
        "pre-merge-commit merge" in hook.read_text()
    assert run("hooks", "uninstall").returncode == 0
    assert hook.read_text() == original and hook.stat().st_mode & 0o777 == 0o700
