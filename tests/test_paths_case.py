"""Paths as the filesystem sees them (issue 25, items 2 and 3): a repository whose
names compare without case (``core.ignorecase``) or in NFC (``core.precomposeunicode``)
has one lock per file whatever spelling an agent types, at every entrance (the CLI, the
harness gate, MCP, the pre-commit guard); Windows paths (backslashes, drive letters)
become repo-relative POSIX paths.  Run on a real case-insensitive filesystem (exFAT
through FUSE on a loop device) where this machine can mount one, and with the config
set by hand on the normal filesystem everywhere."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from helpers import CLI, git, make_repo
from test_guard import agents, commit, edit, head, hold, open_registry  # noqa: F401 (fixture)
from test_harness_hooks import hook, verdict

DECOMPOSED, PRECOMPOSED = "cafe\u0301.py", "caf\u00e9.py"


def cli(repo: Path, *args: str, sid: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([CLI, *args, *(["--session", sid] if sid else [])], cwd=repo,
                          capture_output=True, text=True, timeout=120)


def register(repo: Path, *sids: str) -> None:
    for sid in sids:
        proc = cli(repo, "register", sid, "--provider", "Kimi", "--working-on", f"{sid} work")
        assert proc.returncode == 0, proc.stderr


def held(repo: Path) -> dict[str, list[str]]:
    """Target -> holders, as the branch records them."""
    out: dict[str, list[str]] = {}
    with open_registry(repo) as registry:
        for lock in registry.locks():
            out.setdefault(lock["path"], []).append(lock["owner"])
    return out


def folding(repo: Path) -> Path:
    """*repo* (README.md, src/auth.py) set up as git sets one up on a filesystem that
    ignores case, with the registry and its hooks."""
    git(repo, "config", "core.ignorecase", "true")
    assert cli(repo, "init", "--hooks").returncode == 0
    return repo


# -- a filesystem that ignores case: the config on the normal filesystem ---------------

def test_two_spellings_of_one_file_are_one_claim_spelled_as_the_index_has_it(repo):
    folding(repo)
    register(repo, "kimi-1", "codex-2")
    won = cli(repo, "lock", "acquire", "src/Auth.py", sid="kimi-1")
    lost = cli(repo, "lock", "acquire", "SRC/auth.PY", sid="codex-2")
    assert won.returncode == 0, won.stderr
    assert lost.returncode == 1 and lost.stderr.count("\n") == 1
    assert "src/auth.py is locked by kimi-1" in lost.stderr
    assert held(repo) == {"src/auth.py": ["kimi-1"]}
    check = cli(repo, "--json", "lock", "check", "Src/AUTH.py", sid="codex-2")
    assert check.returncode == 1
    assert json.loads(check.stdout)["paths"][0]["owner"] == "kimi-1"
    # its holder renews it under any spelling, and releases it so
    assert cli(repo, "lock", "acquire", "SRC/AUTH.PY", sid="kimi-1").returncode == 0
    assert held(repo) == {"src/auth.py": ["kimi-1"]}
    assert cli(repo, "lock", "release", "src/AUTH.py", sid="kimi-1").returncode == 0
    assert held(repo) == {}


def test_a_worktree_config_git_ignores_decides_nothing(repo):
    """config.worktree counts only where the repository's config turns on
    extensions.worktreeConfig, as git reads it (issue 34): left there without it, its
    core.ignorecase folds nothing; with it, names fold as git then says."""
    (repo / ".git" / "config.worktree").write_text("[core]\n\tignorecase = true\n")
    assert git(repo, "config", "--get", "core.ignorecase", check=False) == ""
    assert cli(repo, "init").returncode == 0
    register(repo, "kimi-1", "codex-2")
    assert cli(repo, "lock", "acquire", "src/auth.py", sid="kimi-1").returncode == 0
    other = cli(repo, "lock", "acquire", "SRC/Auth.py", sid="codex-2")
    assert other.returncode == 0, other.stderr  # two names, as git has them here
    assert held(repo) == {"src/auth.py": ["kimi-1"], "SRC/Auth.py": ["codex-2"]}
    git(repo, "config", "extensions.worktreeConfig", "true")
    assert git(repo, "config", "--get", "core.ignorecase").strip() == "true"
    assert cli(repo, "lock", "acquire", "README.md", sid="kimi-1").returncode == 0
    lost = cli(repo, "lock", "acquire", "readme.MD", sid="codex-2")
    assert lost.returncode == 1 and "README.md is locked by kimi-1" in lost.stderr


def test_a_directory_lock_covers_every_spelling_of_what_is_below_it(repo):
    folding(repo)
    register(repo, "kimi-1", "codex-2")
    assert cli(repo, "lock", "acquire", "SRC/", sid="kimi-1").returncode == 0
    assert held(repo) == {"src/": ["kimi-1"]}  # the disk's spelling of the folder
    lost = cli(repo, "lock", "acquire", "Src/Auth.py", sid="codex-2")
    assert lost.returncode == 1 and "locked by kimi-1 (via src/)" in lost.stderr
    lost = cli(repo, "lock", "acquire", "src/New/", sid="codex-2")
    assert lost.returncode == 1 and "kimi-1" in lost.stderr


def test_a_new_file_keeps_the_first_claimers_spelling(repo):
    folding(repo)
    register(repo, "kimi-1", "codex-2")
    assert cli(repo, "lock", "acquire", "docs/Guide.md", sid="kimi-1").returncode == 0
    lost = cli(repo, "lock", "acquire", "DOCS/guide.MD", sid="codex-2")
    assert lost.returncode == 1 and "docs/Guide.md is locked by kimi-1" in lost.stderr
    assert cli(repo, "lock", "acquire", "Docs/GUIDE.md", sid="kimi-1").returncode == 0
    assert held(repo) == {"docs/Guide.md": ["kimi-1"]}


def test_the_index_spelling_wins_over_the_disks(repo):
    """A case-only rename made outside git: the index still says src/Auth.py."""
    folding(repo)
    git(repo, "mv", "src/auth.py", "src/Auth.py")
    git(repo, "commit", "-q", "-m", "rename")
    os.rename(repo / "src/Auth.py", repo / "src/auth.py")
    register(repo, "kimi-1")
    assert cli(repo, "lock", "acquire", "src/auth.py", sid="kimi-1").returncode == 0
    assert held(repo) == {"src/Auth.py": ["kimi-1"]}


def test_in_lock_shards_two_spellings_meet_in_one_shard_or_are_found_in_every_one(repo, agents):
    """A spelling's key (its first two folders) picks its shard: the claim is respelled
    before it is routed, and the guard reads every shard."""
    folding(repo)
    assert cli(repo, "shard", "--count", "4").returncode == 0
    hold(repo, "kimi-1", ["Docs/Guide.md", "src/auth.py"], agents())
    register(repo, "codex-2")
    for other in ("docs/GUIDE.md", "DOCS/", "SRC/Auth.py"):
        lost = cli(repo, "lock", "acquire", other, sid="codex-2")
        assert lost.returncode == 1 and "kimi-1" in lost.stderr, other
    before = head(repo)
    edit(repo, "docs/guide.md")
    proc = commit(repo, "-m", "guide")
    assert proc.returncode == 1 and "kimi-1" in proc.stderr and head(repo) == before


CLAIMER = """
import sys, time
from pathlib import Path
from agent_registry import Registry
from agent_registry.errors import Refused
repo, sid, path, go = sys.argv[1:]
with Registry.open(repo) as registry:
    registry.tip()
    while not Path(go).exists():
        time.sleep(0.001)
    try:
        registry.claim(sid, [path])
        print("won")
    except Refused:
        print("lost")
"""


def test_in_lock_shards_two_new_spellings_claimed_at_once_have_one_winner(repo, tmp_path):
    """Two spellings of a file no one has named yet (not in the index, on disk or in a
    claim: nothing to respell them by) whose keys pick different shards, claimed at the
    same instant: both write the folded key's shard too, and its compare-and-swap lets
    exactly one win.  Repeated: a lost race shows in some round."""
    from agent_registry.branch import shards as S
    folding(repo)
    assert cli(repo, "shard", "--count", "16").returncode == 0
    register(repo, "kimi-1", "codex-2")
    pairs = [(f"New{n}/x.py", f"new{n}/x.py") for n in range(200)
             if S.lock_shards(f"New{n}/x.py", 16) != S.lock_shards(f"new{n}/x.py", 16)][:8]
    assert len(pairs) == 8
    for n, (upper, lower) in enumerate(pairs):
        go = tmp_path / f"go-{n}"
        racers = [subprocess.Popen([sys.executable, "-c", CLAIMER, str(repo), sid, path,
                                    str(go)], stdout=subprocess.PIPE, text=True)
                  for sid, path in (("kimi-1", upper), ("codex-2", lower))]
        time.sleep(0.5)  # both have imported and opened the registry (not a timing check)
        go.touch()
        said = sorted(proc.communicate(timeout=120)[0].strip() for proc in racers)
        assert said == ["lost", "won"], (upper, lower, said)
    assert len(held(repo)) == 8


def test_the_guard_refuses_a_commit_of_another_spelling_of_a_held_path(repo, agents):
    folding(repo)
    hold(repo, "kimi-1", ["docs/Guide.md"], agents())  # claimed before the file existed
    before = head(repo)
    edit(repo, "docs/guide.md")
    proc = commit(repo, "-m", "guide")
    assert proc.returncode == 1, proc.stderr
    assert "kimi-1" in proc.stderr and head(repo) == before
    check = cli(repo, "guard", "check", "DOCS/GUIDE.MD")
    assert check.returncode == 1 and "kimi-1" in check.stderr


def test_the_harness_gate_denies_an_edit_of_another_spelling(repo, agents):
    folding(repo)
    hold(repo, "kimi-1", ["src/auth.py"], agents())
    event = {"session_id": str(uuid.uuid4()), "transcript_path": "/tmp/t.jsonl",
             "cwd": str(repo), "hook_event_name": "PreToolUse", "tool_name": "Write",
             "tool_input": {"file_path": str(repo / "SRC" / "Auth.py"), "content": "x"}}
    reason = verdict("claude", hook(repo, "claude", "pre-tool-use", event))
    assert reason and "kimi-1" in reason


def test_mcp_lock_tools_compare_without_case(repo):
    pytest.importorskip("mcp", reason="the mcp extra is not installed")
    from test_mcp import call, talk
    from test_mcp import register as mcp_register
    folding(repo)
    register(repo, "kimi-1")
    assert cli(repo, "lock", "acquire", "src/auth.py", sid="kimi-1").returncode == 0

    async def script(session):
        await mcp_register(session, session_id="claude-2")
        claimed = await call(session, "lock_acquire", paths=["SRC/Auth.PY"])
        checked = await call(session, "lock_check", paths=["src/AUTH.py"])
        return claimed, checked
    (error, text, _), (_, _, checked) = talk(repo, script)
    assert error and "src/auth.py is locked by kimi-1" in text
    assert checked["paths"][0]["owner"] == "kimi-1" and not checked["free_to_edit"]


def git_spy(tmp_path: Path) -> tuple[dict, Path]:
    """An environment whose ``git`` is the real one, writing each command's name to a log."""
    folder, log = tmp_path / "spy", tmp_path / "git.log"
    folder.mkdir(exist_ok=True)
    real = shutil.which("git")
    (folder / "git").write_text(  # the command's name: its first word but options (-C DIR)
        f'#!/bin/sh\nskip=\nfor a in "$@"; do case "$skip$a" in\n'
        f'  -C) skip=1 ;; -*) ;; 1*) skip= ;; *) echo "$a" >> "{log}"; break ;;\n'
        f'esac; done\nexec "{real}" "$@"\n')
    (folder / "git").chmod(0o755)
    return {**os.environ, "PATH": f"{folder}{os.pathsep}{os.environ['PATH']}"}, log


def claim_commands(repo: Path, tmp_path: Path, sid: str, path: str) -> list[str]:
    """The git commands one `lock acquire` runs."""
    env, log = git_spy(tmp_path)
    log.write_text("")
    proc = subprocess.run([CLI, "lock", "acquire", path, "--session", sid], cwd=repo, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return sorted(log.read_text().split())


def test_a_case_sensitive_repository_keeps_two_spellings_apart_at_no_cost(repo, tmp_path):
    """Linux's own filesystems: no config key, no folding, and no git process more
    (the config files answer; no index lookup)."""
    assert cli(repo, "init").returncode == 0
    register(repo, "kimi-1", "codex-2")
    assert cli(repo, "lock", "acquire", "src/Auth.py", sid="kimi-1").returncode == 0
    commands = claim_commands(repo, tmp_path, "codex-2", "src/auth.py")
    assert "config" not in commands and "ls-files" not in commands
    # where git says the filesystem ignores case (as macOS's git writes it): the config
    # files still answer, and one index lookup spells the claim
    git(repo, "config", "core.ignorecase", "true")
    git(repo, "config", "core.precomposeunicode", "true")
    commands = claim_commands(repo, tmp_path, "codex-2", "README.md")
    assert "config" not in commands and commands.count("ls-files") == 1
    proc = subprocess.run([CLI, "lock", "acquire", "src/new.py", "--session", "codex-2"],
                          cwd=repo, env={**os.environ, "PYTHONPROFILEIMPORTTIME": "1"},
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "| subprocess\n" not in proc.stderr  # git ran by spawn


@pytest.mark.parametrize("lines", [
    "\tignorecase = true\n\tprecomposeunicode = true\n",
    "\tignoreCase = false\n", "\tignorecase\n", "\tignorecase = yes\n",
    "\tignorecase = true\n\tignorecase = off\n",
    "\tignorecase = true ; git wrote this\n", '\tignorecase = "true"\n',
    "\tignorecase = tr\\\nue\n", "\tignorecase = maybe\n", "# ignorecase = true\n",
    "[core] ignorecase = true\n"])
@pytest.mark.parametrize("section", ["[core]", "[Core]", '[core "x"]', "[ core ]"])
def test_the_config_files_answer_as_git_does_or_ask_it(tmp_path, lines, section):
    """``core.ignorecase`` / ``core.precomposeunicode`` read from the files equal what
    `git config` says, for the lines git writes and for others (which go to git); a bad
    value is git's error to give, so the files never answer it."""
    from agent_registry.store.git import config_from_files, read_config
    from agent_registry.branch.pathcase import rule_of
    repo = make_repo(tmp_path / "repo")
    config = repo / ".git" / "config"
    config.write_text(config.read_text() + f"{section}\n{lines}")
    git_dir = str(repo / ".git")
    listed = subprocess.run(["git", "config", "-l"], cwd=repo, capture_output=True, text=True)
    from_files = config_from_files(git_dir)
    if listed.returncode != 0 or "maybe" in lines:
        assert from_files is None  # git refuses the file, or the value: git says so
        return
    if from_files is None:
        return  # not a form the files answer: git is asked, as before
    rule = rule_of(from_files)
    for key, got in (("core.ignorecase", rule.ignorecase),
                     ("core.precomposeunicode", rule.precompose)):
        said = subprocess.run(["git", "config", "--type=bool", key], cwd=repo,
                              capture_output=True, text=True).stdout.strip()
        assert got == (said == "true"), (key, said, from_files)
    assert rule_of(read_config(git_dir)).folds == rule.folds


# -- Unicode: precomposed names -----------------------------------------------------------

def test_a_decomposed_name_and_the_precomposed_one_are_one_path(repo, agents):
    git(repo, "config", "core.precomposeunicode", "true")
    assert cli(repo, "init", "--hooks").returncode == 0
    hold(repo, "kimi-1", [f"src/{DECOMPOSED}"], agents())
    assert held(repo) == {f"src/{PRECOMPOSED}": ["kimi-1"]}  # as git spells it: NFC
    register(repo, "codex-2")
    lost = cli(repo, "lock", "acquire", f"src/{PRECOMPOSED}", sid="codex-2")
    assert lost.returncode == 1 and "kimi-1" in lost.stderr
    check = cli(repo, "guard", "check", f"src/{DECOMPOSED}")
    assert check.returncode == 1 and "kimi-1" in check.stderr


# -- Windows paths --------------------------------------------------------------------

@pytest.mark.parametrize("raw", ["src\\auth.py", "C:\\work\\repo\\src\\auth.py",
                                 "c:/WORK/Repo/src/auth.py", "/c/work/repo/src/auth.py",
                                 ".\\src\\auth.py", "./src/auth.py", "lib\\..\\src\\auth.py"])
def test_a_windows_path_becomes_the_repo_relative_posix_path(raw):
    from agent_registry.branch.paths import normalize
    assert normalize(raw, toplevel="C:\\work\\repo", windows=True) == "src/auth.py"
    assert normalize(raw.replace("C:", "c:"), toplevel="C:/work/repo", windows=True) \
        == "src/auth.py"


@pytest.mark.parametrize("raw", ["D:\\work\\repo\\src\\auth.py", "C:\\work\\repo",
                                 "..\\elsewhere.py", "C:\\work\\repo\\.git\\config",
                                 "C:\\work\\repository\\a.py"])
def test_a_windows_path_outside_the_repository_is_refused(raw):
    from agent_registry.branch.paths import normalize
    from agent_registry.errors import BadInput
    with pytest.raises(BadInput):
        normalize(raw, toplevel="C:\\work\\repo", windows=True)


def test_on_linux_a_backslash_is_part_of_a_name(repo):
    """git takes ``src\\auth.py`` literally here: a file of that name is claimed as one;
    the Windows spelling of src/auth.py is refused in one line, nothing written."""
    assert cli(repo, "init").returncode == 0
    register(repo, "kimi-1")
    (repo / "odd\\name.py").write_text("x\n")
    assert cli(repo, "lock", "acquire", "odd\\name.py", sid="kimi-1").returncode == 0
    before = git(repo, "rev-parse", "agent-registry")
    refused = cli(repo, "lock", "acquire", "src\\auth.py", sid="kimi-1")
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1
    assert "write src/auth.py" in refused.stderr
    assert git(repo, "rev-parse", "agent-registry") == before
    assert held(repo) == {"odd\\name.py": ["kimi-1"]}


# -- a real case-insensitive filesystem: exFAT through FUSE on a loop device ------------

def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(list(args), capture_output=True, text=True, timeout=60)


@pytest.fixture(scope="module")
def exfat(tmp_path_factory):
    """A mounted exFAT filesystem, or a skip saying exactly what failed."""
    for tool in ("mkfs.exfat", "mount.exfat-fuse", "losetup"):
        if not shutil.which(tool):
            pytest.skip(f"{tool} not found (Debian: apt-get install exfatprogs exfat-fuse)")
    base = tmp_path_factory.mktemp("exfat")
    image, mount = base / "image", base / "mnt"
    mount.mkdir()
    with open(image, "wb") as f:
        f.truncate(64 * 1024 * 1024)
    made = _run("mkfs.exfat", str(image))
    if made.returncode:
        pytest.skip(f"mkfs.exfat failed: {made.stderr.strip() or made.stdout.strip()}")
    loop = _run("losetup", "--find", "--show", str(image))
    if loop.returncode:
        pytest.skip(f"losetup could not attach a loop device: {loop.stderr.strip()}")
    device = loop.stdout.strip()
    mounted = _run("mount.exfat-fuse", device, str(mount))
    if mounted.returncode:
        _run("losetup", "-d", device)
        pytest.skip(f"mount.exfat-fuse {device} failed: "
                    f"{(mounted.stderr or mounted.stdout).strip()}")
    try:
        yield mount
    finally:
        _run("umount", str(mount))
        _run("losetup", "-d", device)


def test_on_exfat_git_ignores_case_and_so_do_claims_checks_and_the_guard(exfat, agents):
    repo = make_repo(exfat / f"repo-{uuid.uuid4().hex[:8]}")
    assert git(repo, "config", "core.ignorecase").strip() == "true"  # git's own probe
    assert (repo / "SRC" / "AUTH.PY").read_text() == "auth = 1\n"  # one file, any case
    assert cli(repo, "init", "--hooks").returncode == 0
    hold(repo, "kimi-1", ["Src/Auth.py"], agents())
    assert held(repo) == {"src/auth.py": ["kimi-1"]}
    register(repo, "claude-3")
    lost = cli(repo, "lock", "acquire", "src/AUTH.PY", sid="claude-3")
    assert lost.returncode == 1 and "src/auth.py is locked by kimi-1" in lost.stderr
    lost = cli(repo, "lock", "acquire", "SRC/", sid="claude-3")
    assert lost.returncode == 1 and "kimi-1" in lost.stderr
    assert cli(repo, "lock", "check", "SRC/auth.py", sid="claude-3").returncode == 1
    # a new file: the first claimer's spelling
    hold(repo, "codex-2", ["src/New.py"], agents())
    assert cli(repo, "lock", "acquire", "src/new.py", sid="claude-3").returncode == 1
    # the pre-commit hook: a person's commit of either file is refused
    before = head(repo)
    (repo / "src" / "auth.py").write_text("changed\n")  # (exfat-fuse loses a write
    git(repo, "add", "-A")  # through another spelling: a FUSE quirk, not ours to test)
    proc = commit(repo, "-m", "auth")
    assert proc.returncode == 1 and "kimi-1" in proc.stderr and head(repo) == before
    (repo / "src" / "NEW.py").write_text("new\n")  # the disk keeps this spelling
    git(repo, "reset", "-q")
    git(repo, "add", "src/NEW.py")
    proc = commit(repo, "-m", "new", env={"AGENT_REGISTRY_SESSION": "kimi-1"})
    assert proc.returncode == 1 and "codex-2" in proc.stderr and head(repo) == before
