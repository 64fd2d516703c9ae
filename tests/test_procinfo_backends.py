"""Process identity through each backend (issue 25, item 1), and the filelock branch of the
critical section (item 3).

The psutil backend is what macOS and Windows use; here it runs on Linux next to /proc and
must give the same answers for a live process, a dead one, a reused pid, a zombie, parent
chains and command lines.  Then the liveness, ownership and ``kill`` tests run again with
``AGENT_REGISTRY_PROCINFO=psutil`` (a platform without /proc, as far as the package can
tell), in this process and in every ``agent-registry`` and hook process they start; a spy
(a ``sitecustomize`` on PYTHONPATH) checks that those processes really used psutil.
With no backend at all, nothing is vouched for: heartbeats and the TTL decide.
"""
from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from helpers import CLI, git, wait_for
from agent_registry.store import liveness, procinfo
from agent_registry.store.procinfo import ProcBackend, PsutilBackend

psutil = pytest.importorskip("psutil")

pytestmark = pytest.mark.skipif(not os.path.exists("/proc/self/stat"),
                                reason="compares psutil with /proc, which this system lacks")

PROC, PSUTIL = ProcBackend(), PsutilBackend()
BOTH = [PROC, PSUTIL]

# Records, at exit, what each Python process started with this on PYTHONPATH used.
SPY = '''
import atexit, json, os, sys
_path, _done = os.environ.get("TEST_PROCINFO_SPY"), []
def _record():
    if _done or not _path:
        return
    _done.append(1)
    mod = sys.modules.get("agent_registry.store.liveness")
    chosen = getattr(mod, "_backend", "old") if mod else None
    line = {"pid": os.getpid(), "argv": sys.argv[1:4], "psutil": "psutil" in sys.modules,
            "filelock": "filelock" in sys.modules,
            "procinfo": getattr(chosen, "name", chosen)}
    with open(_path, "a") as f:
        f.write(json.dumps(line) + "\\n")
atexit.register(_record)
_real_exit = os._exit
def _exit(code):  # the CLI leaves through os._exit, which skips atexit
    _record()
    _real_exit(code)
os._exit = _exit
'''


@pytest.fixture
def spy(tmp_path_factory, monkeypatch):
    """Start every Python subprocess with the spy; returns a reader of its records."""
    folder = tmp_path_factory.mktemp("spy")
    (folder / "sitecustomize.py").write_text(SPY)
    log = folder / "records.jsonl"
    monkeypatch.setenv("TEST_PROCINFO_SPY", str(log))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        [str(folder)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))

    def records() -> list[dict]:
        return [json.loads(l) for l in log.read_text().splitlines()] if log.exists() else []
    return records


@pytest.fixture
def backend_named():
    """Switch this process's backend; chosen afresh (from the environment) afterwards."""
    yield procinfo.use_backend
    procinfo.use_backend(None)


def _reaped(*args: str) -> subprocess.Popen:
    proc = subprocess.Popen(list(args) or ["sleep", "600"])
    threading.Thread(target=proc.wait, daemon=True).start()
    return proc


@pytest.fixture
def procs():
    started: list[subprocess.Popen] = []

    def start(*args: str, reaped: bool = True) -> subprocess.Popen:
        proc = _reaped(*args) if reaped else subprocess.Popen(list(args))
        started.append(proc)
        return proc
    yield start
    for proc in started:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def raw_stat(pid: int) -> list[str]:
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()


# -- the same answers from /proc and psutil ---------------------------------------------

def test_a_live_process_reads_the_same_through_both(procs, backend_named):
    child = procs(sys.executable, "-c", "import time; time.sleep(600)", "two words", "ünï")
    wait_for(lambda: PROC.cmdline(child.pid)[-1:] == ["ünï"], "the child to exec")
    want = int(raw_stat(child.pid)[19])  # field 22: start in clock ticks since boot
    seen = {b.name: b.read(child.pid) for b in BOTH}
    assert seen["proc"] == seen["psutil"], seen
    assert (seen["psutil"].parent, seen["psutil"].start, seen["psutil"].zombie) == \
        (os.getpid(), want, False)
    assert PSUTIL.cmdline(child.pid) == PROC.cmdline(child.pid) == \
        [sys.executable, "-c", "import time; time.sleep(600)", "two words", "ünï"]
    for name in ("proc", "psutil"):
        assert backend_named(name).name == name
        assert procinfo.start_time(child.pid) == want
        assert procinfo.same_process(child.pid, want) is True
        assert procinfo.same_process(child.pid, None) is True
        assert procinfo.is_alive(child.pid, want)
        assert procinfo.shared_kind(child.pid) is None and procinfo.runtime_of(child.pid) is None


def test_a_dead_process_and_a_reused_pid_read_the_same(procs, backend_named):
    dead = procs("sleep", "600", reaped=False)
    start = PROC.read(dead.pid).start
    dead.kill()
    dead.wait()
    live = procs()
    live_start = PROC.read(live.pid).start
    for name in ("proc", "psutil"):
        backend_named(name)
        assert procinfo.backend().read(dead.pid) is None and procinfo.cmdline(dead.pid) == []
        assert procinfo.same_process(dead.pid, start) is False
        assert not procinfo.is_alive(dead.pid, start) and not procinfo.is_alive(dead.pid, None)
        # the pid runs, but not the process recorded: its start time differs
        assert procinfo.same_process(live.pid, live_start + 1) is False
        assert not procinfo.is_alive(live.pid, live_start - 1)


def test_a_zombie_reads_as_exited_through_both(procs, backend_named):
    child = procs("true", reaped=False)  # exits at once; we do not reap it yet
    wait_for(lambda: raw_stat(child.pid)[0] == "Z", "the child to become a zombie")
    start = int(raw_stat(child.pid)[19])
    assert PROC.read(child.pid).zombie and PSUTIL.read(child.pid).zombie
    assert PSUTIL.cmdline(child.pid) == PROC.cmdline(child.pid) == []
    for name in ("proc", "psutil"):
        backend_named(name)
        assert procinfo.same_process(child.pid, start) is False
        assert not procinfo.is_alive(child.pid, start)


def test_parent_chains_and_names_read_the_same(procs, backend_named):
    shell = procs("sh", "-c", "sleep 600; :")  # sh waits for its child: a chain of three
    def children() -> list[int]:  # each read once: another test's process may end between two
        return [p for p in map(int, filter(str.isdigit, os.listdir("/proc")))
                if (proc := PROC.read(p)) is not None and proc.parent == shell.pid]
    wait_for(children, "the shell's child")
    leaf = children()[0]
    chains = {}
    for name in ("proc", "psutil"):
        backend_named(name)
        chains[name] = procinfo.ancestors(leaf)
        assert procinfo._names(leaf) == ["sleep", "sleep"]
        assert procinfo.parent_of(leaf) == shell.pid
    assert chains["proc"] == chains["psutil"]
    assert chains["psutil"][:3] == [leaf, shell.pid, os.getpid()]


def test_a_parent_pid_given_to_a_later_process_ends_the_chain(monkeypatch, backend_named):
    """Windows keeps an exited parent's pid in its children: a process started after the
    child that holds that pid now is not its parent."""
    table = {30: procinfo.Proc("agent", 20, 100, False),
             20: procinfo.Proc("claude", 10, 500, False)}  # started after pid 30
    fake = type("Fake", (), {"name": "fake", "available": True,
                             "read": staticmethod(table.get), "cmdline": staticmethod(list)})
    monkeypatch.setattr(liveness, "_backend", fake())
    assert procinfo.ancestors(30) == [30]
    table[20] = procinfo.Proc("claude", 10, 50, False)
    assert procinfo.ancestors(30) == [30, 20, 10]  # 10 cannot be read: the chain ends


# -- choosing a backend, and the Linux fast path ------------------------------------------

def test_the_backend_follows_the_platform_and_the_override(monkeypatch):
    assert procinfo.choose("").name == "proc"
    assert procinfo.choose("psutil").name == "psutil"
    assert procinfo.choose("none").name == "none"
    real = os.path.exists
    monkeypatch.setattr(os.path, "exists", lambda p: p != "/proc/self/stat" and real(p))
    assert procinfo.choose("").name == "psutil"  # macOS, Windows
    assert procinfo.choose("proc").name == "none"  # forced, and missing: nothing vouched
    monkeypatch.setitem(sys.modules, "psutil", None)  # not installed
    assert procinfo.choose("").name == "none"


def test_the_linux_claim_path_reads_proc_and_never_imports_psutil(repo, run, procs, spy):
    agent = procs()
    assert run("register", "a-1", "--provider", "Kimi", "--pid", str(agent.pid)).returncode == 0
    assert run("lock", "acquire", "src/auth.py", "--session", "a-1").returncode == 0
    assert run("register", "b-1", "--provider", "Kimi").returncode == 0
    assert run("lock", "acquire", "src/auth.py", "--session", "b-1").returncode == 1
    records = [r for r in spy() if r["procinfo"]]
    assert len(records) >= 3 and {r["procinfo"] for r in records} == {"proc"}, records
    assert not any(r["psutil"] for r in spy()), spy()
    # the guard's standard-library path: neither psutil nor typing (~6 ms) comes in
    probe = subprocess.run([sys.executable, "-c", (
        "import os, sys\n"
        "import agent_registry.enforce.guard\n"
        "from agent_registry.store import procinfo\n"
        "assert procinfo.ancestors() and procinfo.is_alive(os.getpid(), "
        "procinfo.start_time(os.getpid()))\n"
        "print(sorted(m for m in ('psutil', 'typing') if m in sys.modules))\n")],
        capture_output=True, text=True, timeout=60)
    assert (probe.returncode, probe.stdout) == (0, "[]\n"), probe.stderr


# -- no backend: fail closed ----------------------------------------------------------------

def test_without_any_backend_heartbeats_and_the_ttl_decide(registry, clock, procs, backend_named):
    backend_named("none")
    agent = procs()
    session = registry.register("a-1", provider="Kimi", pid=agent.pid)
    assert (session.owner, session.pid, session.pid_start) == ("given", agent.pid, None)
    registry.register("b-1", provider="Codex", pid=os.getpid())
    registry.claim("a-1", ["src/auth.py"], ttl=60)
    result = registry.kill("a-1")  # cannot tell the agent from a later process: no signal
    assert result["signal"] is None and "neither /proc nor psutil" in result["not_signalled"]
    assert agent.poll() is None
    registry.register("a-2", provider="Kimi", pid=agent.pid)
    registry.claim("a-2", ["src/auth.py"], ttl=60)
    agent.kill()
    agent.wait()
    # nobody here can see it die: its lock holds until the TTL, cleanup leaves it
    assert registry.check(["src/auth.py"])[0]["state"] == "locked"
    assert registry.cleanup()["stopped"] == []
    clock.advance(61)
    assert registry.claim("b-1", ["src/auth.py"])["locks"][0]["status"] == "taken-over"


def test_doctor_warns_where_no_process_can_be_read(repo, run):
    assert run("register", "a-1", "--provider", "Kimi", "--pid", str(os.getpid())).returncode == 0
    owners = {}
    for name in ("psutil", "none"):
        proc = run("--json", "doctor", env={procinfo.BACKEND_ENV: name})
        owners[name] = next(c for c in json.loads(proc.stdout)["checks"] if c["name"] == "owners")
    assert owners["psutil"]["status"] == "ok", owners
    assert owners["none"]["status"] == "warn" and "psutil" in owners["none"]["fix"], owners
    assert owners["none"]["verdict"].startswith("no process information here (neither /proc")


def test_a_start_time_psutil_cannot_read_keeps_the_lock_and_is_never_signalled(
        registry, clock, procs, backend_named, monkeypatch):
    """Windows refuses some processes' times to other users (AccessDenied)."""
    backend_named("psutil")
    agent = procs()
    registry.register("a-1", provider="Kimi", pid=agent.pid)
    registry.register("b-1", provider="Codex", pid=os.getpid())
    registry.claim("a-1", ["src/auth.py"])
    monkeypatch.setattr(PsutilBackend, "start", lambda self, process: None)
    assert procinfo.same_process(agent.pid, 1) is None and procinfo.is_alive(agent.pid, 1)
    assert registry.check(["src/auth.py"])[0]["state"] == "locked"
    result = registry.kill("a-1")
    assert result["signal"] is None and "start time cannot be read" in result["not_signalled"]
    assert agent.poll() is None


def test_nothing_in_the_package_probes_a_process_with_a_signal():
    """os.kill(pid, 0) is no probe on Windows (signal 0 is CTRL_C_EVENT there), and
    psutil.pid_exists calls it on POSIX."""
    root = Path(procinfo.__file__).resolve().parent.parent
    calls = []
    for path in sorted(root.rglob("*.py")):
        for call in [n for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.Call)]:
            func = call.func
            if isinstance(func, ast.Attribute) and (
                    func.attr in ("pid_exists", "send_signal", "pthread_kill")
                    or func.attr in ("kill", "killpg") and ast.unparse(func.value) == "os"):
                calls.append((str(path.relative_to(root)), ast.unparse(call)))
    # the two signals `kill` sends to a vouched-for owner; pid_exists on Windows only; and
    # spawn's SIGKILL to its own child run past a network timeout (posix_spawn: POSIX only)
    assert sorted(calls) == [
        ("core/kill.py", "os.kill(pid, getattr(signal, 'SIGKILL', signal.SIGTERM))"),
        ("core/kill.py", "os.kill(pid, signal.SIGTERM)"),
        ("store/procbackends.py", "psutil.pid_exists(pid)"),
        ("store/spawn.py", "os.kill(pid, _signal.SIGKILL)")], calls
    source = (root / "store" / "procbackends.py").read_text()
    assert "if psutil.WINDOWS and not psutil.pid_exists(pid)" in source


# -- the liveness, ownership and kill suites under psutil ------------------------------------

import test_cli  # noqa: E402
import test_core_api  # noqa: E402
import test_guard  # noqa: E402
import test_ownership  # noqa: E402
import test_races  # noqa: E402
from test_core_api import sleeper  # noqa: E402,F401  (a fixture of the borrowed tests)
from test_guard import agents  # noqa: E402,F401
from test_ownership import stop_later, tmux  # noqa: E402,F401

BORROWED = {
    test_core_api: ["test_register_records_who_where_and_when", "test_stale_when_the_process_died",
                    "test_stale_when_the_pid_was_reused", "test_a_zombie_process_counts_as_dead",
                    "test_pid_of_another_host_is_not_judged_here",
                    "test_heartbeat_loop_stops_when_the_process_dies",
                    "test_cleanup_stops_zombies_and_frees_their_locks",
                    "test_kill_terminates_a_local_process", "test_kill_never_signals_a_reused_pid",
                    "test_kill_of_another_host_session_is_a_logical_stop"],
    test_ownership: ["test_register_reports_which_process_and_why",
                     "test_an_ancestor_that_is_an_agent_runtime_is_the_owner_and_kill_signals_it",
                     "test_agent_runtimes_are_recognised_by_name_script_module_or_package",
                     "test_a_pid_that_cannot_own_a_session_is_refused",
                     "test_death_of_a_given_owner_ends_the_session_and_the_takeover_says_so",
                     "test_an_old_session_file_without_owner_is_judged_by_heartbeat_only",
                     "test_kill_never_signals_a_login_shell_it_was_given",
                     "test_a_session_registered_inside_tmux_is_not_owned_by_the_tmux_server",
                     "test_the_claude_code_hook_binds_the_session_to_claude_code_itself"],
    test_cli: ["test_cleanup_and_kill", "test_heartbeat_loop_ends_with_its_agent"],
    test_guard: ["test_own_lock_passes_by_env_and_by_process_ancestry",
                 "test_stale_locks_never_block"],
}
for _module, _names in BORROWED.items():
    for _name in _names:
        globals()[_name.replace("test_", "test_psutil_", 1)] = getattr(_module, _name)


def test_psutil_racing_to_take_over_a_stale_lock(repo, tmp_path):
    """Racers judge a dead owner through psutil: exactly one takes its lock over."""
    test_races.stale_takeover_race(repo, tmp_path, rounds=1, racers=8)


@pytest.fixture(autouse=True)
def _psutil_for_borrowed_tests(request, monkeypatch, hermetic_seal):
    """The borrowed tests (and test_psutil_racing…) run with psutil: here and in every
    process they start; afterwards, the spy shows that those processes used psutil."""
    if not request.node.name.startswith("test_psutil_"):
        yield
        return
    monkeypatch.setenv(procinfo.BACKEND_ENV, "psutil")
    assert procinfo.use_backend("psutil").name == "psutil"
    records = request.getfixturevalue("spy")
    try:
        yield
        assert procinfo.backend().name == "psutil"
    finally:
        procinfo.use_backend(None)
    assert {r["procinfo"] for r in records() if r["procinfo"]} <= {"psutil"}, records()


# -- the filelock branch of the critical section ----------------------------------------------

HOLDER = '''
import os, sys, time
from agent_registry.store.flock import file_lock
path, log, me, hold, go = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), sys.argv[5:]
if go:  # a barrier: every racer is started before any takes the lock
    open(go[0] + "." + me, "w").close()
    while not os.path.exists(go[0]):
        time.sleep(0.002)
waited = []
with file_lock(path, on_wait=lambda: waited.append(1)):
    with open(log, "a") as f:
        f.write(f"in {me}\\n")
    time.sleep(hold)
    with open(log, "a") as f:
        f.write(f"out {me} waited={len(waited)}\\n")
'''


def test_the_filelock_branch_excludes_real_processes(tmp_path, monkeypatch, spy):
    """On Windows (no fcntl) the critical section is the filelock package's lock: forced
    here, eight processes released at once take it one at a time, and a waiter is told."""
    monkeypatch.setenv("AGENT_REGISTRY_FILE_LOCK", "filelock")
    path, log, go = tmp_path / "state" / "lock", tmp_path / "log", tmp_path / "go"
    racers = [subprocess.Popen([sys.executable, "-c", HOLDER, str(path), str(log), str(i),
                                "0.1", str(go)]) for i in range(8)]
    wait_for(lambda: len(list(tmp_path.glob("go.*"))) == 8, "the racers to start",
             alive=racers)
    go.touch()
    assert [p.wait(timeout=120) for p in racers] == [0] * 8
    lines = log.read_text().splitlines()
    for enter, leave in zip(lines[::2], lines[1::2]):  # never two inside at once
        assert enter.startswith("in ") and leave.startswith(f"out {enter[3:]} ")
    assert len(lines) == 16 and sum("waited=1" in l for l in lines) >= 1, lines
    assert [r["filelock"] for r in spy()] == [True] * 8, spy()


def test_a_process_killed_inside_the_filelock_section_releases_it(tmp_path, monkeypatch, spy):
    monkeypatch.setenv("AGENT_REGISTRY_FILE_LOCK", "filelock")
    path, log = tmp_path / "state" / "lock", tmp_path / "log"
    hung = subprocess.Popen([sys.executable, "-c", HOLDER, str(path), str(log), "hung", "600"])
    try:
        wait_for(lambda: log.exists() and "in hung" in log.read_text(), "the holder to enter",
                 alive=[hung])
    finally:
        hung.kill()
        hung.wait()
    after = subprocess.run([sys.executable, "-c", HOLDER, str(path), str(log), "next", "0"],
                           timeout=60)
    assert after.returncode == 0 and "out next waited=0" in log.read_text()
    assert [r["filelock"] for r in spy()] == [True], spy()


def test_12_processes_claim_one_path_through_filelock(repo, tmp_path, monkeypatch, spy):
    """The claim race of test_races with the filelock branch taken by every racer."""
    monkeypatch.setenv("AGENT_REGISTRY_FILE_LOCK", "filelock")
    test_races.one_path_race(repo, tmp_path, rounds=1, racers=12)
    racers = [r for r in spy() if r["argv"][:2] == ["lock", "acquire"]]
    assert len(racers) == 12 and all(r["filelock"] for r in racers), spy()
