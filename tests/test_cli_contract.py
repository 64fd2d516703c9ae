"""The predecessor's lock contract, and what happens with a bad environment or bad input
(issue 9, sections 5 and 6): the installed command in subprocesses, real git, and real
constraints of the machine (read-only bind mounts, a full tmpfs, an immutable folder)."""
from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from helpers import CLI, git, registry_ops, wait_for
from test_cli import as_json, ok, one_line_error, refs as ref


def _can_confine() -> str:
    """Why the mount tests cannot run here ('' when they can): they need root and
    unshare, so each test's mounts live in its own private mount namespace."""
    if os.geteuid() != 0:
        return "needs root: a read-only mount or a full disk that binds root too"
    if shutil.which("unshare") is None:
        return "needs unshare (util-linux)"
    probe = subprocess.run(["unshare", "-m", "--propagation", "private", "mount", "-t",
                            "tmpfs", "-o", "size=64k", "tmpfs", "/mnt"], capture_output=True)
    return "" if probe.returncode == 0 else f"cannot mount: {probe.stderr.decode().strip()}"


CONFINE_SKIP = _can_confine()
needs_mounts = pytest.mark.skipif(bool(CONFINE_SKIP), reason=CONFINE_SKIP)


def confined(repo, setup: str, *args: str) -> subprocess.CompletedProcess:
    """Run the CLI in *repo* after the shell commands *setup* ran in a private mount
    namespace: their mounts vanish with the process, whatever happens to the test."""
    script = f'{setup}\nexec "$0" "$@"'
    return subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-ec", script,
                           CLI, *args], cwd=repo, capture_output=True, text=True, timeout=120)


def read_only(folder: str) -> str:
    return f"mount --bind {folder} {folder}\nmount -o remount,ro,bind {folder}"


def leftovers(repo) -> list[str]:
    return [name for name in os.listdir(repo / ".git" / "objects") if name.startswith("tmp_")]


# -- a bad environment: one line, exit 1, nothing half-written -------------------------

@needs_mounts
@pytest.mark.parametrize("folder, claimed, registered", [
    (".git/objects", ".git/objects", ".git/objects"),
    # a claim moves its lock shard's ref, a register the main branch's
    (".git/refs", ".git/refs/heads/agent-registry-shards", ".git/refs/heads"),
    (".git", ".git/agent-registry/lock", ".git/agent-registry/lock"),
])
def test_a_read_only_git_dir_is_one_line(run, repo, folder, claimed, registered):
    ok(run("register", "s1", "--provider", "Kimi"))
    before = ref(repo)
    line = one_line_error(confined(repo, read_only(folder), "lock", "acquire", "a.py",
                                   "--session", "s1"), 1)
    assert line == f"agent-registry: cannot write to {claimed}: Read-only file system"
    error = as_json(confined(repo, read_only(folder), "--json", "register", "s2",
                             "--provider", "Kimi"))["error"]
    assert (error["code"], error["cause"], error["path"]) == (1, "EROFS", registered)
    assert ref(repo) == before and not leftovers(repo)
    # reading still works on a read-only repository
    assert "free: a.py" in confined(repo, read_only(folder), "lock", "check", "a.py").stdout
    ok(run("lock", "acquire", "a.py", "--session", "s1"))


@needs_mounts
def test_a_full_disk_is_one_line_and_leaves_the_branch_alone(tmp_path):
    """The repository lives on a 2 MB tmpfs that is then filled up."""
    disk = tmp_path / "disk"
    disk.mkdir()
    report = tmp_path / "report"
    script = f"""
mount -t tmpfs -o size=2m tmpfs {disk}
cd {disk}
git init -q repo && cd repo && git commit -q --allow-empty -m initial
"$0" register s1 --provider Kimi >/dev/null
git for-each-ref refs/heads/agent-registry refs/heads/agent-registry-shards >{report}.before
dd if=/dev/zero of={disk}/filler bs=4k 2>/dev/null || true
set +e
"$0" lock acquire src/a.py --session s1 2>{report}.err
echo $? >{report}.code
"$0" --json lock acquire src/a.py --session s1 >{report}.json 2>/dev/null
git for-each-ref refs/heads/agent-registry refs/heads/agent-registry-shards >{report}.after
ls .git/objects | grep ^tmp_ >{report}.tmp
rm {disk}/filler
"$0" lock acquire src/a.py --session s1 >{report}.retry
"""
    proc = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-ec", script,
                           CLI], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    read = lambda suffix: (tmp_path / f"report.{suffix}").read_text()
    assert read("err") == "agent-registry: cannot write to .git/objects: No space left on device\n"
    assert read("code") == "1\n"
    import json
    assert json.loads(read("json"))["error"]["cause"] == "ENOSPC"
    # the main branch and its 16 lock shards, all where they were
    assert len(read("before").splitlines()) == 17
    assert read("before") == read("after") and read("tmp") == ""
    assert read("retry") == "acquired: src/a.py\n"


@needs_mounts
def test_a_ref_folder_that_is_full_is_named_not_retried_as_a_lost_race(run, repo):
    """git says only "couldn't write '…lock'" there: the cause comes from a probe."""
    ok(run("register", "s1", "--provider", "Kimi"))
    before = ref(repo)
    heads = ".git/refs/heads"
    # room for the registry's refs (the main branch's, its 16 lock shards') and no more
    setup = (f"cp -a {heads} ../heads-copy\nmount -t tmpfs -o size=256k tmpfs {heads}\n"
             f"cp -a ../heads-copy/. {heads}/\n"
             f"dd if=/dev/zero of={heads}/filler bs=1k 2>/dev/null || true")
    line = one_line_error(confined(repo, setup, "lock", "acquire", "a.py", "--session", "s1"), 1)
    # the folder of the ref the claim moves: its lock shard's
    assert line == ("agent-registry: cannot write to .git/refs/heads/agent-registry-shards: "
                    "No space left on device")
    assert ref(repo) == before


def test_an_immutable_objects_folder_binds_root_too(run, repo):
    """chattr +i: "Operation not permitted" even for root (where the file system allows)."""
    ok(run("register", "s1", "--provider", "Kimi"))
    objects = repo / ".git" / "objects"
    if subprocess.run(["chattr", "+i", str(objects)], capture_output=True).returncode:
        pytest.skip("chattr +i is not supported here")
    try:
        before = ref(repo)
        line = one_line_error(run("lock", "acquire", "a.py", "--session", "s1"), 1)
        assert line == "agent-registry: cannot write to .git/objects: Operation not permitted"
        assert ref(repo) == before
    finally:
        subprocess.run(["chattr", "-i", str(objects)], check=True)
    ok(run("lock", "acquire", "a.py", "--session", "s1"))


# -- the predecessor's positional forms ------------------------------------------------

def lock_paths(run) -> list[tuple[str, str]]:
    return [(l["path"], l["owner"]) for l in as_json(ok(run("--json", "lock", "list")))["locks"]]


def test_the_positional_forms_take_the_last_argument_as_the_session(run, repo):
    for sid in ("s1", "s2"):
        ok(run("register", sid, "--provider", "Kimi"))
    assert ok(run("lock", "acquire", "src/auth.py", "s1")).stdout == "acquired: src/auth.py\n"
    # the variable set (to this session or another) never turns the id into a path
    ok(run("lock", "acquire", "README.md", "s1", env={"AGENT_REGISTRY_SESSION": "s1"}))
    ok(run("lock", "acquire", "notes.txt", "s1", env={"AGENT_REGISTRY_SESSION": "s2"}))
    assert lock_paths(run) == [("README.md", "s1"), ("notes.txt", "s1"), ("src/auth.py", "s1")]
    assert ok(run("lock", "heartbeat", "src/auth.py", "s1")).stdout == "heartbeat s1 (3 lock(s))\n"
    line = one_line_error(run("lock", "heartbeat", "src/auth.py", "s2"), 1)
    assert line == "agent-registry: s2 holds no lock on src/auth.py"
    assert ok(run("lock", "release", "notes.txt", "s1")).stdout == "released: notes.txt\n"
    assert lock_paths(run) == [("README.md", "s1"), ("src/auth.py", "s1")]


def test_a_session_id_is_never_locked_as_a_path(run, repo):
    for sid in ("s1", "s2"):
        ok(run("register", sid, "--provider", "Kimi"))
    before = ref(repo)
    for args, env in [(("s1", "--session", "s2"), None),
                      (("a.py", "s1", "--session", "s2"), None),
                      (("s1", "a.py"), {"AGENT_REGISTRY_SESSION": "s2"}),
                      (("s1",), {"AGENT_REGISTRY_SESSION": "s1"})]:
        line = one_line_error(run("lock", "acquire", *args, env=env), 2)
        assert "'s1' names a registered session, not a file" in line, args
    assert one_line_error(run("lock", "release", "s1", "--session", "s2"), 2)
    assert ref(repo) == before and lock_paths(run) == []
    # a file of that name is a file: claimed with --session; ambiguous as the last argument
    (repo / "s1").write_text("a file named like a session\n")
    ok(run("lock", "acquire", "s1", "--session", "s2"))
    line = one_line_error(run("lock", "acquire", "a.py", "s1"), 2)
    assert "'s1' names both a file and a registered session" in line
    assert lock_paths(run) == [("s1", "s2")]
    # an ended session is still a session: its claim is refused, not taken for a path
    (repo / "s1").unlink()
    ok(run("finish", "s1"))
    assert "session s1 has ended" in one_line_error(run("lock", "acquire", "b.py", "s1"), 1)


def test_heartbeat_loop_positional_form(run, repo):
    ok(run("register", "s1", "--provider", "Kimi"))
    ok(run("lock", "acquire", "src/auth.py", "s1"))
    line = one_line_error(run("lock", "heartbeat-loop", "README.md", "s1", "5"), 1)
    assert line == "agent-registry: s1 holds no lock on README.md"
    loop = subprocess.Popen([CLI, "--json", "lock", "heartbeat-loop", "src/auth.py", "s1", "1"],
                            cwd=repo, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # the loop's first beat: from now on a release ends it
        wait_for(lambda: registry_ops(repo, "heartbeat"), "no heartbeat", alive=[loop])
        ok(run("lock", "release", "src/auth.py", "s1"))
        out, err = loop.communicate(timeout=60)
    finally:
        loop.kill()
    assert loop.returncode == 0, err
    assert as_json(subprocess.CompletedProcess([], 0, out, err)) == \
        {"stopped": "s1 holds no lock on src/auth.py"}
    line = one_line_error(run("lock", "heartbeat-loop", "src/auth.py", "s1", "0.5"), 2)
    assert "SECONDS 0.5: at least 1" in line


def test_both_routes_read_the_positional_forms_alike(run, repo):
    from test_hotpath import _no_ages, both
    from agent_registry.cli.fast import parse
    for sid in ("s1", "s2"):
        ok(run("register", sid, "--provider", "Kimi"))
    ok(run("lock", "acquire", "src/auth.py", "s1"))
    assert parse(["lock", "acquire", "a.py", "s1"]) is not None  # the hot path takes it
    cases = [("lock", "check", "src/auth.py", "s2"), ("lock", "check", "src/auth.py", "s1"),
             ("--json", "lock", "check", "src/auth.py", "README.md", "--session-id", "s2"),
             ("lock", "acquire", "src/auth.py", "s2"), ("lock", "acquire", "s2", "--session", "s1"),
             ("--json", "lock", "acquire", "a.py", "s1", "--session", "s2"),
             ("lock", "acquire", "a.py", "b.py"), ("lock", "check", "a.py", "--session", "")]
    for args in cases:
        hot, slow = (tuple(_no_ages(part) for part in answer) for answer in both(repo, *args))
        assert hot == slow, args


# -- lock check's exit code ------------------------------------------------------------

def test_check_exits_1_when_another_live_session_holds_a_path(run, repo):
    sleeper = subprocess.Popen(["sleep", "300"])
    ok(run("register", "s1", "--provider", "Kimi"))
    ok(run("register", "s2", "--provider", "Kimi"))
    ok(run("register", "gone", "--provider", "Kimi", "--pid", str(sleeper.pid)))
    ok(run("lock", "acquire", "src/auth.py", "--session", "s1"))
    ok(run("lock", "acquire", "old.py", "--session", "gone"))
    sleeper.kill()
    sleeper.wait()
    assert run("lock", "check", "README.md", "src/auth.py", "--session", "s2").returncode == 1
    assert run("lock", "check", "src/auth.py").returncode == 1  # no session: not yours
    assert run("lock", "check", "README.md", "new.py").returncode == 0  # free
    assert run("lock", "check", "src/auth.py", "README.md", "--session", "s1").returncode == 0
    stale = run("lock", "check", "old.py", "--session", "s2")
    assert stale.returncode == 0 and stale.stdout.startswith("stale: old.py by gone")
    script = ('if "$0" lock check src/auth.py README.md --session s2; then echo edit; '
              'else echo leave it; fi')
    proc = subprocess.run(["sh", "-c", script, CLI], cwd=repo, capture_output=True, text=True)
    assert proc.stdout.splitlines()[-1] == "leave it"


# -- symlinks --------------------------------------------------------------------------

def test_a_symlink_and_its_target_are_one_lock(run, repo, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "secret.py").write_text("x\n")
    os.symlink("auth.py", repo / "src" / "link.py")
    os.symlink("src", repo / "alias")
    os.symlink(elsewhere / "secret.py", repo / "outside.py")
    os.symlink(elsewhere, repo / "outdir")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "links")
    for sid in ("s1", "s2"):
        ok(run("register", sid, "--provider", "Kimi"))
    assert ok(run("lock", "acquire", "src/link.py", "s1")).stdout == "acquired: src/auth.py\n"
    assert "locked by s1" in one_line_error(run("lock", "acquire", "src/auth.py", "s2"), 1)
    assert "locked by s1" in one_line_error(run("lock", "acquire", "alias/auth.py", "s2"), 1)
    check = run("--json", "lock", "check", "alias/link.py", "--session", "s2")
    assert check.returncode == 1 and as_json(check)["paths"][0]["owner"] == "s1"
    assert run("guard", "src/link.py", env={"AGENT_REGISTRY_SESSION": "s2"}).returncode == 1
    # claim before create, through a symlinked folder; a folder link is a folder lock
    assert ok(run("lock", "acquire", "alias/new.py", "s2")).stdout == "acquired: src/new.py\n"
    folder = run("lock", "check", "alias")
    assert folder.returncode == 1 and folder.stdout.startswith("locked: src/ by ")
    before = ref(repo)
    for path in ("outside.py", "outdir/new.py", str(repo / "outdir" / "secret.py")):
        line = one_line_error(run("lock", "acquire", path, "s2"), 2)
        assert "outside the repository" in line and str(elsewhere) in line, path
    assert ref(repo) == before


# -- empty and blank arguments ---------------------------------------------------------

def test_empty_and_blank_arguments_are_bad_input(run, repo):
    for args in [("register", "", "--provider", "Kimi"), ("register", "  ", "--provider", "Kimi"),
                 ("register", "", "Kimi", "1", "x"), ("register", "s9", "--provider", " ")]:
        assert one_line_error(run(*args), 2), args
    for args in [("init", "--branch", ""), ("init", "--remote", " "), ("status", "--remote", "")]:
        assert "empty value" in one_line_error(run(*args), 2), args
    assert ref(repo) == {}  # nothing was registered, not even the branch
    ok(run("register", "s1", "--provider", "Kimi"))
    before = ref(repo)
    env = {"AGENT_REGISTRY_SESSION": "s1"}  # an empty id never falls back to the default
    for args in [("lock", "acquire", ""), ("lock", "acquire", " ", "\t"),
                 ("lock", "acquire", "a.py", "--session", ""), ("lock", "acquire", "a.py", "--session="),
                 ("lock", "check", "a.py", "--session", ""), ("lock", "release", "a.py", "--session", ""),
                 ("lock", "heartbeat", "--session", ""), ("show", ""), ("finish", ""),
                 ("update", "", "--working-on", "x"), ("kill", ""), ("context", "log", "", "x")]:
        line = one_line_error(run(*args, env=env), 2)
        assert "empty" in line or "blank" in line or "control character" in line, (args, line)
    assert ref(repo) == before


def test_no_session_anywhere_names_how_this_command_takes_one(run, repo):
    """With no session given and $AGENT_REGISTRY_SESSION unset, the error names the
    command's own way to give one (`send` is told by --from, not --session), exit 2,
    nothing written."""
    ok(run("register", "s1", "--provider", "Kimi"))
    before = ref(repo)
    for args, given_by in [
            (("send", "--to", "s1", "hello"), "--from SID|NAME"),
            (("lock", "acquire", "src/a.py"), "--session SID"),
            (("lock", "release", "src/a.py"), "--session SID"),
            (("lock", "heartbeat"), "--session SID"),
            (("lock", "heartbeat-loop"), "--session SID"),
            (("ack", "m-1"), "--session SID"),
            (("context", "log", "a line"), "SID TEXT or --session SID"),
            (("finish",), "SID"), (("update", "--working-on", "x"), "SID"), (("inbox",), "SID")]:
        line = one_line_error(run(*args), 2)
        assert line == f"agent-registry: no session id: pass {given_by} or set " \
                       "AGENT_REGISTRY_SESSION", (args, line)
        assert ref(repo) == before, args
