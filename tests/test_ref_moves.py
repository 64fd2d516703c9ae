"""A process that moves its refs again and again (the MCP server) moves a loose branch
itself, by git's own steps (store/looseref.py), from its second move on: the
compare-and-swap still excludes git's processes and ours alike, git's reflog gets git's
line, and whatever git would do more than that (a hook, shared permissions, HEAD's
reflog, a packed ref, a changed identity) is still git's."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from agent_registry.store.git import Repo, discover
from helpers import git, wait_for

REASON = "agent-registry: test"
MARGIN = 0.1  # store/looseref.py MARGIN_NS, and some


@pytest.fixture
def logged_git(tmp_path, monkeypatch) -> Path:
    """Every git process started from here on (by this process or its children) is
    logged, one line of its arguments."""
    log = tmp_path / "git.log"
    wrapper = tmp_path / "bin" / "git"
    wrapper.parent.mkdir()
    real = subprocess.run(["sh", "-c", "command -v git"], capture_output=True,
                          text=True).stdout.strip()
    wrapper.write_text(f'#!/bin/sh\necho "$*" >> "{log}"\nexec "{real}" "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setenv("PATH", f"{wrapper.parent}{os.pathsep}{os.environ['PATH']}")
    return log


def update_refs(log: Path, reason: str = REASON) -> list[str]:
    return [line for line in log.read_text().splitlines()
            if line.startswith("update-ref") and reason in line] if log.exists() else []


def gits_clock() -> float:
    """The clock git stamps its reflog lines by: time(2), which on Linux reads the
    kernel's coarse clock, up to a tick behind time.time() (more on a loaded host): a
    git that starts just after time.time() turned a second still writes the one before."""
    if sys.platform.startswith("linux"):
        return time.clock_gettime(getattr(time, "CLOCK_REALTIME_COARSE", 5))
    return time.time()


def settled(repo: Path) -> None:
    """Wait until the config files are older than the second git's next reflog line
    falls in (store/looseref.py learns git's identity only from such a line), by git's
    own clock."""
    newest = max(os.stat(p).st_ctime for p in (repo / ".git" / "config",
                                                Path(os.environ["GIT_CONFIG_GLOBAL"])))
    while int(gits_clock()) - MARGIN <= newest:
        time.sleep(0.05)


def commits(repo: Path, count: int, tag: str) -> list[str]:
    """*count* distinct commits (no ref names them yet)."""
    store = Repo(discover(str(repo)))
    try:
        tree = store.write_object("tree", b"")
        return [store.commit_tree(tree, [], f"{tag} {i}", "t <t@example.com>", 1_790_000_000)
                for i in range(count)]
    finally:
        store.close()


def reflog(repo: Path, ref: str) -> list[tuple[str, str, str, str]]:
    """(old, new, identity, message) of each line of *ref*'s reflog, oldest first."""
    out = []
    for line in (repo / ".git" / "logs" / ref).read_text().splitlines():
        old, new, rest = line.split(" ", 2)
        who, _, message = rest.partition("\t")
        out.append((old, new, who.rsplit(" ", 2)[0], message))
    return out


def git_identity(repo: Path) -> str:
    """The committer identity git writes in a reflog here, as store/git.py runs it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_COMMITTER")}
    proc = subprocess.run(["git", "var", "GIT_COMMITTER_IDENT"], cwd=repo, env=env,
                          capture_output=True, text=True, check=True)
    return proc.stdout.strip().rsplit(" ", 2)[0]


def warmed(repo: Path, ref: str = "refs/heads/warm") -> tuple[Repo, list[str]]:
    """A Repo that has made two moves (the first through git): the next ones are its own."""
    settled(repo)
    store = Repo(discover(str(repo)))
    first, second = commits(repo, 2, f"warm {ref}")
    store.update_ref(ref, first, None, REASON)
    store.update_ref(ref, second, first, REASON)
    return store, [first, second]


def test_a_kept_repo_moves_its_branch_itself_with_gits_reflog_line(repo, logged_git):
    ref = "refs/heads/moved"
    store, _ = warmed(repo)
    try:
        tips = commits(repo, 6, "moved")
        started = len(update_refs(logged_git))
        store.update_ref(ref, tips[0], None, REASON)  # a creation: git's
        for old, new in zip(tips, tips[1:]):
            store.updates.close()  # a move through git would start a process
            store.update_ref(ref, new, old, REASON)
        assert len(update_refs(logged_git)) <= started + 1, update_refs(logged_git)
    finally:
        store.close()
    assert git(repo, "rev-parse", ref).strip() == tips[-1]
    lines = reflog(repo, ref)
    assert [(old, new) for old, new, _, _ in lines] == \
        [("0" * 40, tips[0]), *zip(tips, tips[1:])]
    # git's identity and message on every line, its own first one and ours alike
    assert {(who, message) for _, _, who, message in lines} == {(git_identity(repo), REASON)}
    shown = git(repo, "reflog", "show", "--format=%H %gs", ref).splitlines()
    assert shown == [f"{tip} {REASON}" for tip in reversed(tips)]
    assert subprocess.run(["git", "fsck", "--no-dangling"], cwd=repo).returncode == 0


RACER = """
import json, os, random, subprocess, sys, time
from agent_registry.store.git import CasFailed, Repo, discover
repo, folder, me, kind, ref, rounds = sys.argv[1:7]
mine = json.load(open(os.path.join(folder, f"plan-{me}.json")))
store = Repo(discover(repo))
if kind == "py":  # two moves of a ref of its own: the next ones are its own
    warm = f"refs/heads/warm-{me}"
    store.update_ref(warm, mine["warm"][0], None, "agent-registry: race")
    store.update_ref(warm, mine["warm"][1], mine["warm"][0], "agent-registry: race")
open(os.path.join(folder, f"ready-{me}"), "w").close()
for r in range(int(rounds)):
    go = os.path.join(folder, f"go-{r}")
    while not os.path.exists(go):
        time.sleep(0.0005)
    base = open(go).read()
    if kind == "py" and r % 2:
        time.sleep(random.random() * 0.006)  # let git's processes get there first at times
    new = mine["tips"][r]
    if kind == "py":
        try:
            store.update_ref(ref, new, base, "agent-registry: race")
            won = True
        except CasFailed:
            won = False
    else:
        won = subprocess.run(["git", "update-ref", "-m", "race (git)", ref, new, base],
                             cwd=repo, capture_output=True).returncode == 0
    with open(os.path.join(folder, f"res-{r}-{me}.tmp"), "w") as out:
        out.write("won" if won else "lost")
    os.replace(os.path.join(folder, f"res-{r}-{me}.tmp"), os.path.join(folder, f"res-{r}-{me}"))
store.close()
"""


def test_processes_racing_one_branch_each_round_have_one_winner(repo, logged_git, tmp_path):
    """Three processes moving the ref themselves and three real ``git update-ref``
    processes race a compare-and-swap from the same tip, 40 rounds: exactly one wins
    each, the ref is its commit, the reflog has every winner's move and nothing else,
    and the in-process movers never needed git to win."""
    rounds, kinds = 40, ["py", "py", "py", "git", "git", "git"]
    ref = "refs/heads/race"
    folder = tmp_path / "race"
    folder.mkdir()
    base = first = commits(repo, 1, "base")[0]
    git(repo, "update-ref", "-m", "race base", ref, base)
    plans = {}
    for me, kind in enumerate(kinds):
        made = commits(repo, rounds + 2, f"racer {me}")
        plans[me] = {"tips": made[:rounds], "warm": made[rounds:]}
        (folder / f"plan-{me}.json").write_text(json.dumps(plans[me]))
    settled(repo)
    racers = [subprocess.Popen([sys.executable, "-c", RACER, str(repo), str(folder), str(me),
                                kind, ref, str(rounds)]) for me, kind in enumerate(kinds)]
    try:
        wait_for(lambda: all((folder / f"ready-{me}").exists() for me in range(len(kinds))),
                 "the racers to be ready", alive=racers)
        before = update_refs(logged_git, "agent-registry: race")
        winners = []
        for r in range(rounds):
            (folder / "go.tmp").write_text(base)
            os.replace(folder / "go.tmp", folder / f"go-{r}")
            # (a racer ends after its last answer: only then is its end no failure)
            wait_for(lambda: all((folder / f"res-{r}-{me}").exists() for me in range(len(kinds))),
                     f"round {r}'s answers", alive=racers if r < rounds - 1 else ())
            won = [me for me in range(len(kinds))
                   if (folder / f"res-{r}-{me}").read_text() == "won"]
            assert len(won) == 1, f"round {r}: winners {won}"
            base = plans[won[0]]["tips"][r]
            assert git(repo, "rev-parse", ref).strip() == base, f"round {r}"
            winners.append(won[0])
        for proc in racers:
            assert proc.wait(timeout=60) == 0
    finally:
        for proc in racers:
            proc.kill()
    ours = [w for w in winners if kinds[w] == "py"]
    assert ours, f"winners by round: {winners}"
    # the in-process movers moved the ref without git, and left every loss to a
    # one-shot `update-ref` that says why: none went through a kept `--stdin` one
    during = update_refs(logged_git, "agent-registry: race")[len(before):]
    assert not [line for line in during if "--stdin" in line], during
    assert len(during) >= rounds * kinds.count("py") - len(ours), during
    won = [plans[w]["tips"][r] for r, w in enumerate(winners)]
    lines = reflog(repo, ref)
    assert [(old, new) for old, new, _, _ in lines] == \
        list(zip(["0" * 40, first, *won[:-1]], [first, *won]))
    assert {who for _, _, who, _ in lines} == {git_identity(repo)}
    assert len(git(repo, "reflog", "show", ref).splitlines()) == rounds + 1
    assert subprocess.run(["git", "fsck", "--no-dangling"], cwd=repo).returncode == 0


KILLED = """
import sys
from agent_registry.store.git import Repo, discover
repo, warm0, warm1, ref, new, old = sys.argv[1:7]
store = Repo(discover(repo))
store.update_ref("refs/heads/warm", warm0, None, "agent-registry: test")
store.update_ref("refs/heads/warm", warm1, warm0, "agent-registry: test")
store.updates.close()  # no git process left: one the move needed would be a child
print("warm", flush=True)
sys.stdin.readline()
store.update_ref(ref, new, old, "agent-registry: test")
"""


def test_a_kill_mid_move_leaves_the_ref_whole_and_gits_lock_error(repo, logged_git):
    """Killed holding ``<ref>.lock`` (stopped where it appends the reflog line): the ref
    still names the old commit, git's own update-ref refuses as it does when another
    git process holds the lock, and once the lock is old enough to be taken for
    abandoned (store/git.py STALE_REF_LOCK) the registry's next move clears it."""
    ref = "refs/heads/killed"
    old, new, later, warm0, warm1 = commits(repo, 5, "killed")
    git(repo, "update-ref", "-m", "start", ref, old)
    log = repo / ".git" / "logs" / ref
    kept = log.read_bytes()
    settled(repo)
    proc = subprocess.Popen([sys.executable, "-c", KILLED, str(repo), warm0, warm1, ref, new,
                             old], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline() == "warm\n"
        log.unlink()
        os.mkfifo(log)  # opening it to append blocks: the mover stops inside its move
        proc.stdin.write("go\n")
        proc.stdin.flush()
        lock = repo / ".git" / f"{ref}.lock"
        wait_for(lambda: lock.exists() and lock.read_text() == f"{new}\n",
                 "the mover to write its lock", alive=[proc])
        children = [c for task in os.listdir(f"/proc/{proc.pid}/task")
                    for c in Path(f"/proc/{proc.pid}/task/{task}/children").read_text().split()]
        assert children == [], "the move waits in a git process, not in the mover"
    finally:
        proc.kill()
        proc.wait()
    log.unlink()
    log.write_bytes(kept)
    assert lock.exists()
    assert git(repo, "rev-parse", ref).strip() == old
    said = subprocess.run(["git", "update-ref", ref, later, old], cwd=repo,
                          capture_output=True, text=True)
    assert said.returncode != 0 and "File exists" in said.stderr, said.stderr
    aged = time.time() - 60
    os.utime(lock, (aged, aged))
    store = Repo(discover(str(repo)))
    try:
        store.update_ref(ref, later, old, REASON)
    finally:
        store.close()
    assert not lock.exists()
    assert git(repo, "rev-parse", ref).strip() == later
    assert [(o, n) for o, n, _, _ in reflog(repo, ref)] == [("0" * 40, old), (old, later)]
    assert subprocess.run(["git", "fsck", "--no-dangling"], cwd=repo).returncode == 0


HOOK = '#!/bin/sh\nwhile read old new ref; do echo "$1 $ref $new" >> "{out}"; done\n'


def _hook(where: Path, out: Path) -> None:
    where.mkdir(parents=True, exist_ok=True)
    hook = where / "reference-transaction"
    hook.write_text(HOOK.format(out=out))
    hook.chmod(0o755)


@pytest.mark.parametrize("case", ["hook", "hooks path", "shared repository", "head",
                                  "packed", "no reflog"])
def test_what_git_does_beyond_the_move_stays_gits(repo, logged_git, tmp_path, case):
    """Each of these makes git do more than the move, so it stays git's, and git's
    extra is there: the hook saw the move, the ref file has the shared mode, HEAD's
    reflog has it, the packed ref was written loose, no reflog was started."""
    ref = "refs/heads/extra"
    first, second = commits(repo, 2, f"extra {case}")
    git(repo, "update-ref", "-m", "start", ref, first)
    seen = tmp_path / "hook.out"
    if case == "hook":
        _hook(repo / ".git" / "hooks", seen)
    elif case == "hooks path":
        _hook(tmp_path / "hooks", seen)
        git(repo, "config", "core.hooksPath", str(tmp_path / "hooks"))
    elif case == "shared repository":
        git(repo, "config", "core.sharedRepository", "0600")
    elif case == "head":
        git(repo, "symbolic-ref", "HEAD", ref)
    elif case == "packed":
        git(repo, "pack-refs", "--all")
    elif case == "no reflog":
        git(repo, "config", "core.logAllRefUpdates", "false")
        (repo / ".git" / "logs" / ref).unlink()
        (repo / ".git" / "logs" / "refs" / "heads" / "warm").touch()  # git keeps one that is there
    store, _ = warmed(repo)
    try:
        store.update_ref(ref, second, first, REASON)
    finally:
        store.close()
    assert git(repo, "rev-parse", ref).strip() == second
    if case in ("hook", "hooks path"):
        assert f"committed {ref} {second}" in seen.read_text()
    elif case == "shared repository":
        assert oct((repo / ".git" / ref).stat().st_mode & 0o777) == "0o600"
    elif case == "head":
        assert git(repo, "reflog", "show", "--format=%H", "HEAD").split()[0] == second
    elif case == "packed":
        assert (repo / ".git" / ref).read_text() == f"{second}\n"
    elif case == "no reflog":
        assert not (repo / ".git" / "logs" / ref).exists()  # git starts none here


def test_a_changed_identity_is_gits_to_write_then_ours(repo, logged_git):
    """Once the config changes (another user.name), the next move is git's, and its
    line names the new identity; the moves after it are ours again, with that one."""
    ref = "refs/heads/who"
    tips = commits(repo, 4, "who")
    git(repo, "update-ref", "-m", "start", ref, tips[0])
    store, _ = warmed(repo)
    try:
        store.update_ref(ref, tips[1], tips[0], REASON)
        git(repo, "config", "user.name", "Another Name")
        settled(repo)
        store.updates.close()  # from here on, a move through git starts a process
        started = len(update_refs(logged_git))
        store.update_ref(ref, tips[2], tips[1], REASON)  # git's: the config changed
        store.updates.close()
        store.update_ref(ref, tips[3], tips[2], REASON)  # ours, as git wrote it
        assert len(update_refs(logged_git)) == started + 1
    finally:
        store.close()
    names = [who for _, _, who, _ in reflog(repo, ref)]
    assert names[-2:] == [git_identity(repo)] * 2 and names[-2] != names[1]
    assert git_identity(repo).startswith("Another Name <")


MOVER = """
import sys
from agent_registry.store.git import Repo, discover
repo, ref, *moves = sys.argv[1:]
store = Repo(discover(repo))
for old, new in zip(moves, moves[1:]):
    store.update_ref(ref, new, old, "agent-registry: test")
store.close()
"""


def moved_by_a_new_process(repo: Path, ref: str, *tips: str) -> None:
    subprocess.run([sys.executable, "-c", MOVER, str(repo), ref, *tips], check=True)


def test_a_later_process_moves_with_the_identity_an_earlier_one_kept(repo, logged_git):
    """A process that learned git's identity keeps it; a new process under the same
    config and environment moves its first ref itself with it (a one-shot claim or
    heartbeat starts no git process), and its line is the one git would write."""
    ref = "refs/heads/kept"
    tips = commits(repo, 5, "kept")
    git(repo, "update-ref", "-m", "start", ref, tips[0])
    settled(repo)
    moved_by_a_new_process(repo, ref, *tips[:3])  # git's move, then its own: learned, kept
    started = len(update_refs(logged_git))
    moved_by_a_new_process(repo, ref, *tips[2:4])
    moved_by_a_new_process(repo, ref, *tips[3:5])
    assert len(update_refs(logged_git)) == started == 1
    lines = reflog(repo, ref)
    assert [new for _, new, _, _ in lines] == tips
    assert {who for _, _, who, _ in lines[1:]} == {git_identity(repo)}


@pytest.mark.parametrize("change", ["config", "environment", "damaged"])
def test_a_kept_identity_is_gits_again_under_another_config_or_environment(
        repo, logged_git, monkeypatch, change):
    """Another user.name, $EMAIL, or the kept file damaged: the kept identity may not be
    the one git would write, so the next process's move is git's, with git's line."""
    ref = "refs/heads/other"
    tips = commits(repo, 4, "other")
    git(repo, "update-ref", "-m", "start", ref, tips[0])
    settled(repo)
    moved_by_a_new_process(repo, ref, *tips[:3])
    kept = repo / ".git" / "agent-registry" / "reflog-ident"
    assert kept.exists()
    if change == "config":
        git(repo, "config", "user.name", "Another Name")
    elif change == "environment":
        monkeypatch.setenv("EMAIL", "elsewhere@example.com")
    else:
        kept.write_bytes(kept.read_bytes()[:-3])
    started = len(update_refs(logged_git))
    moved_by_a_new_process(repo, ref, *tips[2:4])
    assert len(update_refs(logged_git)) == started + 1
    assert reflog(repo, ref)[-1][2] == git_identity(repo)
    assert git_identity(repo).startswith("Another Name <" if change == "config" else "Test User <")


def test_no_identity_is_kept_where_no_config_sets_the_email(repo, logged_git, monkeypatch):
    """Without user.email (only other keys naming an e-mail, as ``[sendemail]`` does) and
    without $EMAIL, git's e-mail is the host's name as the resolver spells it, which no
    stamp covers: nothing is kept, and each new process's first move is git's."""
    Path(os.environ["GIT_CONFIG_GLOBAL"]).write_text(
        "[user]\n\tname = Test User\n[sendemail]\n\tsmtpserver = mail.example.com\n"
        "[author]\n\temail = author@example.com\n")
    monkeypatch.delenv("EMAIL", raising=False)
    ref = "refs/heads/resolved"
    tips = commits(repo, 4, "resolved")
    git(repo, "update-ref", "-m", "start", ref, tips[0])
    settled(repo)
    moved_by_a_new_process(repo, ref, *tips[:3])  # git's move, then its own
    assert not (repo / ".git" / "agent-registry" / "reflog-ident").exists()
    started = len(update_refs(logged_git))
    moved_by_a_new_process(repo, ref, *tips[2:4])
    assert len(update_refs(logged_git)) == started + 1
    assert reflog(repo, ref)[-1][2] == git_identity(repo)


def test_a_move_to_the_value_the_ref_holds_writes_nothing(repo, logged_git):
    """As git's update-ref: moving a ref to the commit it already names succeeds and
    writes no reflog line."""
    ref = "refs/heads/same"
    [tip] = commits(repo, 1, "same")
    git(repo, "update-ref", "-m", "start", ref, tip)
    store, _ = warmed(repo)
    try:
        before = (repo / ".git" / "logs" / ref).read_bytes()
        started = len(update_refs(logged_git))
        store.update_ref(ref, tip, tip, REASON)
        assert len(update_refs(logged_git)) == started  # decided here, not by git
    finally:
        store.close()
    assert (repo / ".git" / "logs" / ref).read_bytes() == before
    assert git(repo, "rev-parse", ref).strip() == tip
    said = subprocess.run(["git", "update-ref", "-m", "git's", ref, tip, tip], cwd=repo)
    assert said.returncode == 0
    assert (repo / ".git" / "logs" / ref).read_bytes() == before  # git writes none either


HOLDING_HOOK = """#!/bin/sh
# the git whose environment names a file stops here, holding its ref's lock, until the
# file exists
if [ "$1" = prepared ] && [ -n "$HOLD_UNTIL" ]; then
    while [ ! -e "$HOLD_UNTIL" ]; do sleep 0.05; done
fi
cat > /dev/null
"""


def holding_git(repo: Path, ref: str, new: str, old: str, until: Path) -> subprocess.Popen:
    """A plain `git update-ref` (through a shell: not this process's child) stopped
    while it holds `<ref>.lock`, until *until* exists; its lock aged past any wait."""
    lock = repo / ".git" / f"{ref}.lock"
    proc = subprocess.Popen(["sh", "-c", 'git update-ref -m "plain git" "$@"; exit $?', "sh",
                             ref, new, old], cwd=repo, env={**os.environ, "HOLD_UNTIL": str(until)},
                            stderr=subprocess.PIPE, text=True)
    wait_for(lock.exists, "the git to take its lock", alive=[proc])
    aged = time.time() - 60
    os.utime(lock, (aged, aged))
    return proc


def test_an_old_ref_lock_a_live_git_holds_is_waited_for_not_taken(repo, tmp_path, monkeypatch):
    """A git stopped in its reference-transaction hook holds `<ref>.lock` however old it
    looks: the registry's move does not take it but waits, and once that git is done its
    move is the one on the ref and ours a lost race (CasFailed: the caller decides
    again), not one over the other; a git that holds it past the wait is named in a
    refusal that changes nothing."""
    import agent_registry.store.git as store_git
    from agent_registry.errors import RegistryError
    from agent_registry.store.git import CasFailed
    monkeypatch.setattr(store_git, "STALE_REF_LOCK", 1.0)
    hook = repo / ".git" / "hooks" / "reference-transaction"
    hook.write_text(HOLDING_HOOK)
    hook.chmod(0o755)
    ref = "refs/heads/held"
    old, theirs, ours, later = commits(repo, 4, "held")
    git(repo, "update-ref", "-m", "start", ref, old)
    release = tmp_path / "release"
    plain = holding_git(repo, ref, theirs, old, release)
    store = Repo(discover(str(repo)))
    try:
        threading.Timer(0.5, release.touch).start()  # the stopped git goes on meanwhile
        with pytest.raises(CasFailed):
            store.update_ref(ref, ours, old, REASON)
        assert plain.wait(timeout=30) == 0, plain.stderr.read()
        assert git(repo, "rev-parse", ref).strip() == theirs
        assert [(o, n) for o, n, _, _ in reflog(repo, ref)] == [("0" * 40, old), (old, theirs)]
        longer = tmp_path / "longer"
        plain = holding_git(repo, ref, later, theirs, longer)
        try:
            with pytest.raises(RegistryError) as refused:
                store.update_ref(ref, ours, theirs, REASON)
            said = str(refused.value)
            assert f"(pid {plain.pid}" not in said  # the shell; its git is named
            assert "git update-ref" in said and f"{ref}.lock" in said and "\n" not in said
            assert (repo / ".git" / f"{ref}.lock").exists()
            assert git(repo, "rev-parse", ref).strip() == theirs
        finally:
            longer.touch()
        assert plain.wait(timeout=30) == 0
        assert git(repo, "rev-parse", ref).strip() == later
    finally:
        release.touch()
        store.close()
    assert subprocess.run(["git", "fsck", "--no-dangling"], cwd=repo).returncode == 0


@pytest.mark.parametrize("backend", ["proc", "psutil"])
def test_the_gits_that_may_hold_a_ref_lock_are_those_working_here(repo, tmp_path, backend):
    """store/reflocks.movers, through each process backend: a git working in this
    repository (stopped in its hook, as one holding a lock is) is named; one working in
    another repository, and a `git cat-file` here (it takes no lock), are not; with no
    backend no process can be vouched for (None)."""
    from agent_registry.store import liveness
    from agent_registry.store.reflocks import movers
    other = tmp_path / "other"
    git(tmp_path, "init", "-q", str(other))
    git(other, "commit", "-q", "--allow-empty", "-m", "other")
    started, release = [], tmp_path / "release"
    for where in (repo, other):
        hook = where / ".git" / "hooks" / "reference-transaction"
        hook.write_text(HOLDING_HOOK)
        hook.chmod(0o755)
        ref = "refs/heads/held"
        [tip, new] = commits(where, 2, "held")
        git(where, "update-ref", ref, tip)
        started.append(holding_git(where, ref, new, tip, release))
    reader = subprocess.Popen(["sh", "-c", "git cat-file --batch; exit $?"], cwd=repo,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    started.append(reader)
    reader.stdin.write(b"refs/heads/held\n")  # answered: git runs as `git cat-file
    reader.stdin.flush()  # --batch` now, not as a process between sh's fork and its exec
    assert reader.stdout.readline().strip()
    try:
        liveness.use_backend(backend)
        info = discover(str(repo))
        found = movers(info)
        for _ in range(100):  # a git exiting anywhere (another test's) has no cmdline nor
            if len(found) == 1:  # cwd left to tell where it worked: named for a moment
                break
            time.sleep(0.05)
            found = movers(info)
        assert len(found) == 1 and found[0].startswith("git update-ref"), found
        liveness.use_backend("none")
        assert movers(info) is None
    finally:
        liveness.use_backend(None)
        release.touch()
        reader.stdin.close()
        for proc in started:
            proc.wait(timeout=30)
