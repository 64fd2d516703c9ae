"""Scale benchmark: many clones claiming through one remote with a real round trip.

    python bench/scale_bench.py [--quick] [--clones 1,4,16,48] [--rtt-ms 100] [--seconds 60]
    python bench/scale_bench.py --writes beats --clones 1,16,48 --shards 16 --seconds 60
    python bench/scale_bench.py --clones 1,16 --layouts one,default,16 --rounds 3

The remote is a bare repository served by `git daemon` inside a private network namespace
(`unshare -n`: the whole benchmark re-executes itself there, so no port of the machine is
used and nothing outside can reach it), behind a delay line written here: a TCP proxy on
127.0.0.1 that holds every chunk for half the round trip in each direction (this kernel has
no netem).  Clones talk to the proxy (`git://127.0.0.1:<proxy>/remote.git`).

1. **Distinct claims**: N clones each make claims of paths no one else claims, one
   `agent-registry lock acquire` process per claim, back to back, for a fixed window.
   Reported: confirmed claims per second (those confirmed inside the window), the time
   from starting a claim to its confirmation (p50, p90, max; claims started in the window
   are all waited for, so a starved clone is counted, not censored), push attempts per
   claim (from the clone's sync state) and each clone's worst streak of lost pushes.
2. **Contended rounds**: every clone claims the same new path at the same instant;
   exactly one may win each round (exit 0), every other claim is refused (exit 1).
3. **Nothing lost**: a fresh clone syncs and lists the locks; every confirmed claim of
   both modes must be there, held by its claimer.

`--before SRC` measures the tool of another checkout first (its package on PYTHONPATH),
on a remote and clones of its own, and reports both in one table.

`--model SHARDS` measures instead a git-only model of the sharded layout's protocol
(docs/design.md, "Past one ref"): each claim fetches the shard refs it writes, commits on
each and pushes them with `--atomic`, with no registry process (section `scale-model`).

`--shards N` converts the remote's registry to N lock shards (`agent-registry shard`)
before the clones are made (section `scale-shards`; with `--before`, the other checkout
keeps its own layout).

`--layouts L,L` measures claims in each layout named, in one run, each on a remote and
clones of its own (section `scale-layouts`): `default` is what a new registry gets (the
tool's own `init`), `one` the single branch (`init --shards 0`), `new:N` what `init
--shards N` makes, and a number N one branch converted to N shards by `agent-registry
shard`.  Each row also says the CPU the clients' processes used (per confirmed claim, and
as cores busy over the window) and the load average: what the machine had left.

`--writes beats` measures instead the writes only one clone makes for its session
(section `scale-writes`): each clone has a session of its own and writes for it back to
back, one process per write, in turn a `lock heartbeat` and a `context log` diary line
(`--writes mixed`: and a `lock acquire` of a path of its own), for the window.  Reported
per layout, clone count and kind of write (and all together): confirmed writes per
second, time to confirm (p50, p90, max), push attempts per write (the clone's sync
state), worst streak of lost pushes, and writes not confirmed (a heartbeat or diary line
the remote did not take exits 0 with a "not pushed to" warning: counted as failed).
Nothing lost: afterwards a fresh clone syncs, and each session's heartbeat must be at
least its last confirmed one, each confirmed diary line in its session's `context show`,
each confirmed claim held.  The single branch and, with `--shards N`, a registry
converted to N lock shards (format 3: heartbeats and diaries on each clone's own ref
`<branch>-clones/<clone>`) are measured in the same run, each on a remote and clones of
its own; with `--before SRC` both layouts with the other checkout's package first.

`--trace` has each claim process write its sync phases (`AGENT_REGISTRY_SYNC_TRACE`,
agent_registry/sync/trace.py: each fetch, push and its outcome, backoff, intent, wait on
the clone's flock) and reports, per clone count, the 5 slowest distinct claims broken
down by phase, the mean over all, and the slowest one's timeline (bench/claim_phases.py).

Writes the section between `<!-- scale:start -->` and `<!-- scale:end -->` of
docs/benchmarks.md (`--section scale-before` kept the single-branch numbers of issue 11).
"""
from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
import claim_phases  # noqa: E402
import install  # noqa: E402
from report import write_section  # noqa: E402
from states import hermetic_env, make_project  # noqa: E402

CLI = str(Path(sys.executable).parent / "agent-registry")
BRANCH = "agent-registry"
EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"  # git knows it without storing it
DEADLINE = 120.0  # the tool's retry deadline, used by the model too
INTENTS = "agent-registry-intents"  # the model's helping: refs/heads/<INTENTS>/NN/<clone>
INSIDE = "SCALE_BENCH_NETNS"  # set once the benchmark runs in its own network namespace
DAEMON_PORT, PROXY_PORT = 9418, 9419
# --layouts: what each names (a number N: one branch converted to N shards by `shard`)
LAYOUTS = {"default": "new default (`init`)", "one": "1 branch (`init --shards 0`)",
           **{f"new:{n}": f"{n} shards (`init --shards {n}`)" for n in (4, 8, 16, 32, 64)}}


# -- the delay line --------------------------------------------------------------------

async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                delay: float) -> None:
    """Copy *reader* to *writer*, each chunk delivered *delay* seconds after it arrived
    (a delay line: latency without a bandwidth limit, order kept).  A broken side
    aborts the other, so no connection is left half open."""
    queue: asyncio.Queue = asyncio.Queue()
    loop = asyncio.get_running_loop()

    async def deliver() -> None:
        while True:
            due, data = await queue.get()
            wait = due - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            if not data:
                if writer.can_write_eof():
                    writer.write_eof()
                return
            writer.write(data)
            await writer.drain()

    sender = asyncio.create_task(deliver())
    try:
        while True:
            data = await reader.read(65536)
            queue.put_nowait((loop.time() + delay, data))
            if not data:
                break
        await sender
    except (ConnectionError, OSError):
        sender.cancel()
        writer.transport.abort()


async def _proxy(listen: int, target: int, delay: float) -> None:
    live: set[asyncio.Task] = set()  # the loop keeps only weak references to tasks

    async def handle(client_r, client_w) -> None:
        live.add(asyncio.current_task())
        try:
            server_r, server_w = await asyncio.open_connection("127.0.0.1", target)
        except OSError:
            client_w.transport.abort()
            live.discard(asyncio.current_task())
            return
        try:
            await asyncio.gather(_pipe(client_r, server_w, delay),
                                 _pipe(server_r, client_w, delay), return_exceptions=True)
        finally:
            for w in (client_w, server_w):
                w.close()
            live.discard(asyncio.current_task())

    server = await asyncio.start_server(handle, "127.0.0.1", listen, backlog=512)
    async with server:
        await server.serve_forever()


def run_proxy(listen: int, target: int, rtt_ms: float) -> None:
    asyncio.run(_proxy(listen, target, rtt_ms / 2000.0))


# -- the remote and the clones ---------------------------------------------------------

def wait_port(port: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port}")


def git(cwd: Path, env: dict, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True,
                          capture_output=True, text=True).stdout


def cli(cwd: Path, env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([CLI, *args], cwd=cwd, env=env, capture_output=True, text=True)


def sids(n: int) -> list[str]:
    return [f"s{i:03d}" for i in range(n)]


def make_remote(root: Path, env: dict, sessions: int, rtt_ms: float,
                shards: int = 0, layout: str = "") -> list[subprocess.Popen]:
    """A bare remote holding a registry with *sessions* live sessions, served by git
    daemon behind the delay proxy.  The registry is one branch (`init --shards 0`; a tool
    without that option makes one anyway), converted to *shards* lock shards when given;
    *layout* ``default`` is what the tool's first `register` makes, ``new:N`` what `init
    --shards N` makes.  The sessions are registered in a seed clone with no remote and
    pushed once, so setting up 48 clones costs no 48 contended pushes."""
    seed, bare = root / "seed", root / "remote.git"
    seed.mkdir(parents=True)
    make_project(seed, env)
    if layout != "default":
        cli(seed, env, "init", "--shards", layout[4:] if layout.startswith("new:") else "0")
    for sid in sids(sessions):
        r = cli(seed, env, "register", sid, "--provider", "bench", "--working-on", "bench")
        assert r.returncode == 0, r.stderr
    if shards:
        r = cli(seed, env, "shard", "--count", str(shards))
        assert r.returncode == 0, r.stderr
    git(root, env, "init", "-q", "--bare", str(bare))
    git(seed, env, "push", "-q", str(bare), "HEAD:main", "agent-registry",
        "refs/heads/agent-registry-shards/*:refs/heads/agent-registry-shards/*")
    daemon = subprocess.Popen(
        ["git", "daemon", "--export-all", "--enable=receive-pack", "--reuseaddr",
         f"--base-path={root}", "--listen=127.0.0.1", f"--port={DAEMON_PORT}",
         "--max-connections=0", str(root)],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    proxy = subprocess.Popen([sys.executable, __file__, "--proxy", str(rtt_ms)], env=env)
    wait_port(DAEMON_PORT)
    wait_port(PROXY_PORT)
    return [daemon, proxy]


def make_clones(root: Path, env: dict, n: int) -> list[Path]:
    url = f"git://127.0.0.1:{PROXY_PORT}/remote.git"

    def one(i: int) -> Path:
        clone = root / f"c{i:03d}"
        git(root, env, "clone", "-q", url, str(clone))
        return clone

    with ThreadPoolExecutor(8) as pool:
        return list(pool.map(one, range(n)))


def attempts(clone: Path) -> int:
    """Push attempts of the clone's last confirmed push (its sync state)."""
    try:
        state = json.loads((clone / ".git" / "agent-registry" / "sync.json").read_text())
    except (OSError, ValueError):
        return 1
    return int(state.get("last_push_attempts", 1))


# -- the two modes ---------------------------------------------------------------------

@dataclass
class Distinct:
    clones: int
    window: float
    confirmed_in_window: int = 0
    times: list[float] = field(default_factory=list)  # seconds to confirm, every confirmed claim
    tries: list[int] = field(default_factory=list)
    streaks: list[int] = field(default_factory=list)  # per clone: worst run of lost pushes
    failures: list[str] = field(default_factory=list)
    confirmed: list[tuple[str, str]] = field(default_factory=list)  # (session, path)
    label: str = ""  # which tool measured it, with --before
    cpu: float = 0.0  # CPU seconds of the claim processes and their git (the clients' end)
    remote_cpu: float = 0.0  # CPU seconds of git daemon and what it ran (the remote's end)
    elapsed: float = 0.0  # from the start until the last claim answered
    load: float = 0.0  # the machine's 1-minute load average at the end
    phases: list[str] = field(default_factory=list)  # --trace: the slowest claims' phases


Claim = Callable[[Path, str, str], tuple[bool, int, str]]  # clone, session, path -> ok, attempts, error


def tool_claim(env: dict, traces: Path | None = None) -> Claim:
    """A claim as agents make it: one `agent-registry lock acquire` process.  With
    *traces*, each claim writes its phases to a file there (--trace)."""
    def claim(clone: Path, sid: str, path: str) -> tuple[bool, int, str]:
        if traces is None:
            r = cli(clone, env, "lock", "acquire", path, "--session", sid)
        else:
            file = traces / (path.replace("/", "_") + ".trace")
            claim_phases.mark(file, "spawn")
            r = cli(clone, {**env, "AGENT_REGISTRY_SYNC_TRACE": str(file)},
                    "lock", "acquire", path, "--session", sid)
            claim_phases.mark(file, "answered")
        if r.returncode:
            return False, 0, f"exit {r.returncode}: {r.stderr.strip()}"
        return True, attempts(clone), ""
    return claim


def distinct(clones: list[Path], claim: Claim, window: float, tag: str,
             daemon: int = 0) -> Distinct:
    """*daemon*: the pid of the `git daemon` serving the remote, whose CPU (with the
    upload-pack and receive-pack it ran) is the remote's end."""
    out = Distinct(len(clones), window)
    lock = threading.Lock()
    barrier = threading.Barrier(len(clones) + 1)
    start = end = 0.0

    def agent(i: int, clone: Path) -> None:
        sid, k, streak, worst = sids(len(clones))[i], 0, 0, 0
        barrier.wait()
        while time.monotonic() < end:
            path = f"{tag}/c{i:03d}/f{k:04d}.py"
            t0 = time.monotonic()
            ok, n, error = claim(clone, sid, path)
            t1 = time.monotonic()
            k += 1
            with lock:
                if not ok:
                    out.failures.append(f"{path}: {error}")
                    streak += 1  # not confirmed: every push it tried was lost
                    continue
                streak += n - 1
                worst, streak = max(worst, streak), 0
                out.times.append(t1 - t0)
                out.tries.append(n)
                out.confirmed.append((sid, path))
                out.confirmed_in_window += t1 <= end
        with lock:
            out.streaks.append(max(worst, streak))

    threads = [threading.Thread(target=agent, args=(i, c)) for i, c in enumerate(clones)]
    for t in threads:
        t.start()
    used, served = children_cpu(), process_cpu(daemon)
    start = time.monotonic()
    end = start + window
    barrier.wait()
    for t in threads:
        t.join()
    out.cpu, out.elapsed = children_cpu() - used, time.monotonic() - start
    out.remote_cpu = process_cpu(daemon) - served
    out.load = os.getloadavg()[0]
    return out


def children_cpu() -> float:
    """CPU seconds of every process this one started and waited for (with theirs)."""
    import resource
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def process_cpu(pid: int) -> float:
    """CPU seconds of process *pid* and its live descendants, each with the children it
    reaped (`git daemon` runs git-daemon, which reaps each connection's process, which
    waited for its upload-pack or receive-pack and their git): utime, stime, cutime and
    cstime of /proc/<pid>/stat; 0 without a pid, or once it is gone."""
    if not pid:
        return 0.0
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            children = [int(c) for c in f.read().split()]
    except OSError:
        return 0.0
    own = sum(int(v) for v in fields[11:15]) / os.sysconf("SC_CLK_TCK")
    return own + sum(process_cpu(child) for child in children)


@dataclass
class Contended:
    clones: int
    rounds: int = 0
    exact: int = 0  # rounds with exactly one winner
    winners: list[tuple[str, str]] = field(default_factory=list)
    odd: list[str] = field(default_factory=list)  # exits other than 0 and 1
    seconds: list[float] = field(default_factory=list)  # per round: until every claim answered
    label: str = ""


def contended(clones: list[Path], env: dict, rounds: int, tag: str) -> Contended:
    out = Contended(len(clones))
    names = sids(len(clones))
    for r in range(rounds):
        path = f"{tag}/round{r:03d}.py"
        barrier = threading.Barrier(len(clones))
        codes: dict[str, int] = {}

        def agent(i: int, clone: Path) -> None:
            barrier.wait()
            p = cli(clone, env, "lock", "acquire", path, "--session", names[i])
            codes[names[i]] = p.returncode
            if p.returncode not in (0, 1):
                out.odd.append(f"{path} by {names[i]}: exit {p.returncode}: {p.stderr.strip()}")

        t0 = time.monotonic()
        threads = [threading.Thread(target=agent, args=(i, c)) for i, c in enumerate(clones)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        out.seconds.append(time.monotonic() - t0)
        won = [s for s, code in codes.items() if code == 0]
        out.rounds += 1
        out.exact += len(won) == 1
        out.winners += [(s, path) for s in won]
    return out


def fresh_clone(root: Path, env: dict) -> Path:
    """A new clone of the remote, synced: what anyone else sees of it now."""
    check = root / "verify"
    if check.exists():
        shutil.rmtree(check)
    git(root, env, "clone", "-q", f"git://127.0.0.1:{PROXY_PORT}/remote.git", str(check))
    r = cli(check, env, "sync")
    assert r.returncode == 0, r.stderr
    return check


def remote_locks(root: Path, env: dict, check: Path | None = None) -> dict[str, set[str]]:
    """path -> owners, as a fresh clone (*check*, or a new one) sees the remote after a
    sync."""
    check = check or fresh_clone(root, env)
    r = cli(check, env, "--json", "lock", "list")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    held: dict[str, set[str]] = {}
    for lock in data if isinstance(data, list) else data.get("locks", []):
        held.setdefault(lock["path"], set()).add(lock["owner"])
    return held


# -- one-writer writes: heartbeats and diary lines ---------------------------------------

WRITES = {"beats": ("heartbeat", "log"), "mixed": ("heartbeat", "log", "claim")}
ALL = "all"  # the row of every write of a clone count, whatever its kind

Write = Callable[[Path, str, str], tuple[bool, int, str, str]]
# clone, session, name -> confirmed, attempts, error, record (what the remote must keep:
# the heartbeat's time, the diary line's text, the claimed path)


def tool_write(env: dict, kind: str) -> Write:
    """One write as an agent makes it, one process: `lock heartbeat`, `context log` (a
    diary line, *name* its text) or `lock acquire` (of the path *name*).  A heartbeat or a
    diary line the remote did not take is kept in the clone and exits 0 with a warning
    ("not pushed to"): not confirmed (a claim exits 3 instead)."""
    def write(clone: Path, sid: str, name: str) -> tuple[bool, int, str, str]:
        args = {"heartbeat": ("lock", "heartbeat", "--session", sid),
                "log": ("context", "log", sid, name),
                "claim": ("lock", "acquire", name, "--session", sid)}[kind]
        r = cli(clone, env, "--json", *args)
        warned = [line for line in r.stderr.splitlines() if "not pushed to" in line]
        if r.returncode or warned:
            error = (warned or r.stderr.strip().splitlines() or [""])[-1]
            return False, 0, f"exit {r.returncode}: {error}", ""
        record = json.loads(r.stdout)["heartbeat_at"] if kind == "heartbeat" else name
        return True, attempts(clone), "", record
    return write


def one_writer(clones: list[Path], env: dict, kinds: tuple[str, ...], window: float,
               tag: str) -> dict[str, Distinct]:
    """Each clone writes for its own session back to back for *window* seconds, cycling
    through *kinds* (a heartbeat, a diary line, a claim of a path of its own), one
    process per write; per kind (and ALL) what `distinct` reports for claims.  Writes
    started in the window are all waited for."""
    out = {kind: Distinct(len(clones), window) for kind in (*kinds, ALL)}
    writers = {kind: tool_write(env, kind) for kind in kinds}
    lock = threading.Lock()
    barrier = threading.Barrier(len(clones) + 1)
    end = 0.0

    def agent(i: int, clone: Path) -> None:
        sid, k = sids(len(clones))[i], 0
        streak, worst = dict.fromkeys(out, 0), dict.fromkeys(out, 0)
        barrier.wait()
        while time.monotonic() < end:
            kind = kinds[k % len(kinds)]
            name = (f"{tag}/c{i:03d}/f{k:04d}.py" if kind == "claim"
                    else f"bench {tag} {sid} line {k:04d}")
            t0 = time.monotonic()
            ok, n, error, record = writers[kind](clone, sid, name)
            t1 = time.monotonic()
            k += 1
            with lock:
                for key in (kind, ALL):
                    d = out[key]
                    if not ok:
                        d.failures.append(f"{kind} {name}: {error}")
                        streak[key] += 1  # not confirmed: every push it tried was lost
                        continue
                    streak[key] += n - 1
                    worst[key], streak[key] = max(worst[key], streak[key]), 0
                    d.times.append(t1 - t0)
                    d.tries.append(n)
                    d.confirmed_in_window += t1 <= end
                    if key == kind:
                        d.confirmed.append((sid, record))
        with lock:
            for key, d in out.items():
                d.streaks.append(max(worst[key], streak[key]))

    threads = [threading.Thread(target=agent, args=(i, c)) for i, c in enumerate(clones)]
    for t in threads:
        t.start()
    end = time.monotonic() + window
    barrier.wait()
    for t in threads:
        t.join()
    return out


def writes_lost(root: Path, env: dict, confirmed: dict[str, list[tuple[str, str]]]
                ) -> dict[str, tuple[int, list[str]]]:
    """kind -> (how many were checked, what is missing) as a fresh clone of the remote
    sees it after a sync: every session's heartbeat at least its last confirmed one
    (checked per session), every confirmed diary line in its session's diary (`context
    show`), every confirmed claim held by its claimer."""
    check = fresh_clone(root, env)
    out: dict[str, tuple[int, list[str]]] = {}
    if confirmed.get("heartbeat"):
        last: dict[str, str] = {}
        for sid, at in confirmed["heartbeat"]:
            last[sid] = max(last.get(sid, ""), at)
        r = cli(check, env, "--json", "status", "--all")
        assert r.returncode == 0, r.stderr
        beats = {s["id"]: s["heartbeat_at"] or "" for s in json.loads(r.stdout)["sessions"]}
        out["heartbeat"] = (len(last), [
            f"{sid}: heartbeat {beats.get(sid) or 'none'} on the remote, {at} confirmed"
            for sid, at in sorted(last.items()) if beats.get(sid, "") < at])
    if confirmed.get("log"):
        lines: dict[str, list[str]] = {}
        for sid, text in confirmed["log"]:
            lines.setdefault(sid, []).append(text)
        missing = []
        for sid, texts in sorted(lines.items()):
            r = cli(check, env, "context", "show", sid)
            diary = r.stdout if r.returncode == 0 else ""
            missing += [f"{sid}: {text!r}" for text in texts if text not in diary]
        out["log"] = (len(confirmed["log"]), missing)
    if confirmed.get("claim"):
        held = remote_locks(root, env, check)
        out["claim"] = (len(confirmed["claim"]), [f"{p} by {s}" for s, p in confirmed["claim"]
                                                  if s not in held.get(p, set())])
    return out


def remote_layout(root: Path, env: dict) -> tuple[int, dict[str, int]]:
    """The remote registry's layout format (its layout.json; 1 without one) and how many
    registry refs it has, by kind: the main branch, then each `<branch>-<kind>/*` (shards,
    clones, intents: helping, messages...)."""
    bare = root / "remote.git"
    shown = subprocess.run(["git", "show", f"{BRANCH}:layout.json"], cwd=bare, env=env,
                           capture_output=True, text=True)
    fmt = int(json.loads(shown.stdout).get("format", 1)) if shown.returncode == 0 else 1
    counts: dict[str, int] = {}
    for ref in git(bare, env, "for-each-ref", "--format=%(refname)", "refs/heads/").split():
        name = ref[len("refs/heads/"):]
        if name == BRANCH or name.startswith(BRANCH + "-"):
            kind = "main" if name == BRANCH else name[len(BRANCH) + 1:].split("/")[0]
            counts[kind] = counts.get(kind, 0) + 1
    return fmt, counts


@dataclass
class WritesRun:
    label: str  # the tool (with --before) and the layout
    rows: list[tuple[str, Distinct]] = field(default_factory=list)  # (kind, result)
    checked: dict[str, tuple[int, list[str]]] = field(default_factory=dict)
    refs: dict[str, int] = field(default_factory=dict)


def writes_row(label: str, kind: str, d: Distinct) -> str:
    tries = d.tries or [0]
    return (f"| {label} | {d.clones} | {kind} | {d.confirmed_in_window / d.window:.2f} | "
            f"{len(d.times)} | {pct(d.times, 0.5):.2f} | {pct(d.times, 0.9):.2f} | "
            f"{max(d.times, default=float('nan')):.2f} | {statistics.mean(tries):.2f} | "
            f"{max(tries)} | {max(d.streaks, default=0)} | {len(d.failures)} |")


def measure_writes(args: argparse.Namespace, tool: str, source: str | None,
                   shards: int) -> WritesRun:
    """One-writer writes on a fresh remote of *shards* lock shards (0: the single branch)."""
    kinds = WRITES[args.writes]
    with served(args, source, shards) as (root, env, every, _):
        fmt, _ = remote_layout(root, env)
        where = f"{shards} shards, format {fmt}" if shards else f"1 branch, format {fmt}"
        run = WritesRun(f"{tool}, {where}" if tool else where)
        confirmed: dict[str, list[tuple[str, str]]] = {kind: [] for kind in kinds}
        for n in [int(c) for c in args.clones.split(",")]:
            result = one_writer(every[:n], env, kinds, args.seconds, f"w{n}")
            for kind in (*kinds, ALL) if len(kinds) > 1 else kinds:
                run.rows.append((kind, result[kind]))
                print(writes_row(run.label, kind, result[kind]), flush=True)
            for kind in kinds:
                confirmed[kind] += result[kind].confirmed
        run.checked = writes_lost(root, env, confirmed)
        _, run.refs = remote_layout(root, env)
    return run


WHAT = {"heartbeat": "heartbeats", "log": "diary lines", "claim": "claims"}


def write_writes_report(args: argparse.Namespace, runs: list[WritesRun]) -> None:
    version = subprocess.run(["git", "version"], capture_output=True, text=True).stdout.strip()
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True).stdout.strip()
    kinds = WRITES[args.writes]
    cycle = ", ".join({"heartbeat": "`lock heartbeat`", "log": "`context log` (a diary line)",
                       "claim": "`lock acquire` (a path of its own)"}[k] for k in kinds)
    lines = [
        "## Scale: one-writer writes (heartbeats, diary lines) through a remote",
        "",
        f"`bench/scale_bench.py --writes {args.writes}{' --quick' if args.quick else ''} "
        f"--clones {args.clones} --rtt-ms {args.rtt_ms:g} --seconds {args.seconds:g}"
        f"{f' --shards {args.shards}' if args.shards else ''}"
        f"{' --before <another commit>' if args.before else ''}`, "
        f"{time.strftime('%Y-%m-%d %H:%M')} UTC, commit {head}, {os.cpu_count()} cores "
        f"(shared with other work), Python {platform.python_version()}, {version}. "
        f"`git daemon` in a private network namespace behind a delay proxy adding "
        f"{args.rtt_ms:g} ms round trip. Each clone has a session of its own and writes "
        f"for it back to back, one process per write, in turn: {cycle}. Each layout is "
        "measured on a remote and clones of its own, in the same run"
        + (f" (`agent-registry shard --count {args.shards}` converts the second)"
           if args.shards else "") + ".",
        "",
        f"For {args.seconds:g} s (time to confirm in seconds; attempts = pushes per "
        "confirmed write, from the clone's sync state; streak = a clone's worst run of lost "
        "pushes; failed = not confirmed):",
        "",
        "| layout | clones | write | confirmed writes/s | writes | p50 s | p90 s | max s | "
        "attempts mean | attempts max | worst streak | failed |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
        *[writes_row(run.label, kind, d) for run in runs for kind, d in run.rows],
        "",
        "Nothing lost (a fresh clone of the remote, synced: each session's heartbeat at "
        "least its last confirmed one, each confirmed diary line in its session's diary "
        "(`context show`), each confirmed claim held by its claimer):",
        "",
    ]
    for run in runs:
        refs = ", ".join(f"{n} {what}" for what, n in run.refs.items() if n)
        parts = []
        for kind in kinds:
            total, missing = run.checked.get(kind, (0, []))
            unit = "sessions' heartbeats" if kind == "heartbeat" else WHAT[kind]
            parts.append(f"{total - len(missing)} of {total} {unit}")
        lines.append(f"- {run.label}: " + "; ".join(parts)
                     + f" (registry refs on the remote at the end: {refs}).")
        for kind in kinds:
            for missing in run.checked.get(kind, (0, []))[1][:3]:
                lines.append(f"  - lost ({WHAT[kind]}): {missing[:200]}")
    for run in runs:
        for kind, d in run.rows:
            if kind == ALL:
                continue
            for failure in d.failures[:3]:
                lines.append(f"- failed ({run.label}, {d.clones} clones): {failure[:200]}")
    write_section(ROOT / "docs" / "benchmarks.md", "\n".join(lines), name=args.section)
    print("\n".join(lines))


def bench_writes(args: argparse.Namespace) -> None:
    """--writes: every layout (the single branch, and --shards N) with the tool of this
    checkout, and first with --before's, each on a remote of its own."""
    tools = [("before", os.path.abspath(args.before)), ("now", None)] if args.before else \
        [("", None)]
    layouts = [0, args.shards] if args.shards else [0]
    runs = [measure_writes(args, tool, source, shards)
            for tool, source in tools for shards in layouts]
    write_writes_report(args, runs)


# -- a model of the sharded layout's protocol (git alone) -------------------------------

def _tracking(ref: str) -> str:
    return "refs/remotes/origin/" + ref[len("refs/heads/"):]


def model_claim(env: dict, shards: int, own_shard: bool, flat: float) -> Claim:
    """What a claim of the sharded layout does at the remote, without the registry
    (docs/design.md, "Past one ref"): fetch the refs it writes (its key's shard and its
    session's), commit on each, push them together with `--atomic`, fast-forwards only;
    a rejection costs full-jitter backoff (50 ms base, 2 s cap, as the tool) and again.
    Without *own_shard* a claim writes its key's shard alone (the session's held list
    kept per shard).  *flat* > 0: retry after uniform(0, flat) seconds whatever the
    attempt, instead of the growing backoff that lets fresh claims overtake losers."""
    from agent_registry.branch import shards as S

    def claim(clone: Path, sid: str, path: str) -> tuple[bool, int, str]:
        mine = {S.session_shard(sid, shards)} if own_shard else set()
        refs = [S.shard_ref(BRANCH, i) for i in sorted({S.path_shard(path, shards), *mine})]
        start, attempt, error = time.monotonic(), 0, ""
        while time.monotonic() - start < DEADLINE:
            attempt += 1
            git(clone, env, "fetch", "-q", "--no-tags", "origin",
                *[f"+{r}:{_tracking(r)}" for r in refs])
            parents = git(clone, env, "rev-parse", *[_tracking(r) for r in refs]).split()
            news = [git(clone, env, "commit-tree", EMPTY_TREE, "-p", parent, "-m",
                        f"claim {path} by {sid}").strip() for parent in parents]
            push = subprocess.run(["git", "push", "-q", "--atomic", "--porcelain", "origin",
                                   *[f"{new}:{ref}" for new, ref in zip(news, refs)]],
                                  cwd=clone, env=env, capture_output=True, text=True)
            if push.returncode == 0:
                return True, attempt, ""
            error = push.stdout.strip().splitlines()[-1:] or push.stderr.strip()
            time.sleep(random.uniform(0, flat or min(2.0, 0.05 * 2 ** attempt)))
        return False, attempt, f"rejected for {DEADLINE:g} s: {error}"
    return claim


def helping_claim(env: dict, shards: int, after: int) -> Claim:
    """The one-ref model with helping (docs/design.md, "Fairness"): after *after* lost
    pushes a claim publishes itself as an intent on a ref only its clone writes
    (`agent-registry-intents/NN/<clone>`), and every writer of shard NN applies that
    shard's pending intents in its own commit (one line each), so a published claim is
    confirmed by the next push that lands on its shard, whoever makes it."""
    from agent_registry.branch import shards as S

    def claim(clone: Path, sid: str, path: str) -> tuple[bool, int, str]:
        index = S.path_shard(path, shards)
        ref, intents = S.shard_ref(BRANCH, index), f"refs/heads/{INTENTS}/{index:02d}/"
        line = f"claim {path} by {sid}"
        start, pushes, published, error = time.monotonic(), 0, False, ""
        while time.monotonic() - start < DEADLINE:
            git(clone, env, "fetch", "-q", "--no-tags", "origin", f"+{ref}:{_tracking(ref)}",
                f"+{intents}*:{_tracking(intents)}*")
            done = set(git(clone, env, "log", "-n", "300", "--format=%B",
                           _tracking(ref)).splitlines())
            if published and line in done:
                return True, pushes, ""  # a helper's push applied it
            waiting = [m for m in git(clone, env, "for-each-ref", "--format=%(contents:subject)",
                                      _tracking(intents)).splitlines()
                       if m and m not in done and m != line]
            new = git(clone, env, "commit-tree", EMPTY_TREE, "-p", _tracking(ref), "-m",
                      "\n".join([line, *waiting])).strip()
            pushes += 1
            push = subprocess.run(["git", "push", "-q", "--porcelain", "origin", f"{new}:{ref}"],
                                  cwd=clone, env=env, capture_output=True, text=True)
            if push.returncode == 0:
                return True, pushes, ""
            error = push.stdout.strip().splitlines()[-1:] or push.stderr.strip()
            if pushes >= after and not published:
                intent = git(clone, env, "commit-tree", EMPTY_TREE, "-m", line).strip()
                git(clone, env, "push", "-q", "origin", f"+{intent}:{intents}{clone.name}")
                published = True
            time.sleep(random.uniform(0, min(2.0, 0.05 * 2 ** pushes)))
        return False, pushes, f"rejected for {DEADLINE:g} s: {error}"
    return claim


def seed_shards(root: Path, env: dict, shards: int) -> None:
    """Create the model's shard refs on the remote, one root commit each."""
    from agent_registry.branch import shards as S
    seed = root / "seed"
    specs = [git(seed, env, "commit-tree", EMPTY_TREE, "-m", f"shard {i}").strip()
             + ":" + S.shard_ref(BRANCH, i) for i in range(shards)]
    git(seed, env, "push", "-q", "--atomic", str(root / "remote.git"), *specs)


def model_lost(root: Path, env: dict, confirmed: list[tuple[str, str]]) -> list:
    """Confirmed model claims no shard commit holds (a helper's commit holds several)."""
    lines = set(git(root / "remote.git", env, "log", "--format=%B",
                    f"--glob=refs/heads/{BRANCH}-shards/*").splitlines())
    return [(s, p) for s, p in confirmed if f"claim {p} by {s}" not in lines]


# -- report ----------------------------------------------------------------------------

def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * q))] if values else float("nan")


def distinct_row(d: Distinct) -> str:
    tries = d.tries or [0]
    return (f"| {d.label + ' | ' if d.label else ''}{d.clones} | "
            f"{d.confirmed_in_window / d.window:.2f} | {len(d.times)} | "
            f"{pct(d.times, 0.5):.2f} | {pct(d.times, 0.9):.2f} | "
            f"{max(d.times, default=float('nan')):.2f} | {statistics.mean(tries):.2f} | "
            f"{max(tries)} | {max(d.streaks, default=0)} | {len(d.failures)} | "
            f"{d.cpu / max(1, len(d.times)):.3f} | {d.cpu / max(d.elapsed, 1e-9):.2f} | "
            f"{d.remote_cpu / max(1, len(d.times)):.3f} | {d.load:.1f} |")


def contended_row(c: Contended) -> str:
    return (f"| {c.label + ' | ' if c.label else ''}{c.clones} | {c.rounds} | {c.exact} | {len(c.odd)} | "
            f"{statistics.median(c.seconds):.1f} | {max(c.seconds):.1f} |")


def layout(root: Path, env: dict) -> str:
    refs = git(root / "remote.git", env, "for-each-ref", "--format=%(refname)", "refs/heads/")
    registry = [r for r in refs.split() if "agent-registry" in r]
    return f"{len(registry)} registry ref(s) on the remote"


def bench(args: argparse.Namespace) -> None:
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    if args.writes != "claims":
        bench_writes(args)
        return
    # --before: the same measurement, first with another checkout's package, each on a
    # remote and clones of its own
    # with one --layouts spec, both in that layout (the new default: what issue 35 asks of)
    both = args.layouts if args.layouts and "," not in args.layouts else ""
    tools = [("before", os.path.abspath(args.before), both), ("now", None, both)] if args.before \
        else [(LAYOUTS.get(spec) or f"{spec} shards, converted", None, spec)
              for spec in args.layouts.split(",")] if args.layouts else [("", None, "")]
    results, rounds, lost, confirmed, where = [], [], [], 0, ""
    for label, source, spec in tools:
        r, c, l, n, where = measure(args, label, source, spec)
        results, rounds, lost, confirmed = results + r, rounds + c, lost + l, confirmed + n
    write_report(args, results, rounds, lost, confirmed, where)


@contextlib.contextmanager
def served(args: argparse.Namespace, source: str | None, shards: int, model: int = 0,
           layout: str = ""):
    """A fresh remote (a registry with one session per clone, converted to *shards* lock
    shards when given; *model* seeds the model's shard refs) served behind the delay
    proxy, and as many clones of it as the largest count: yields (root, env, clones).
    The tool is the package at *source* when given."""
    counts = [int(n) for n in args.clones.split(",")]
    with tempfile.TemporaryDirectory(prefix="scale-bench-") as tmp:
        root = Path(tmp)
        env = hermetic_env(root)
        env["AGENT_REGISTRY_PID"] = "none"  # no owner process: heartbeats and the TTL decide
        if source:
            env["PYTHONPATH"] = source  # ahead of the installed package
        servers = make_remote(root, env, max(counts), args.rtt_ms, shards, layout)
        try:
            if model:
                seed_shards(root, env, model)
            yield root, env, make_clones(root, env, max(counts)), servers[0].pid
        finally:
            for proc in servers:
                proc.terminate()
                proc.wait()


def measure(args: argparse.Namespace, label: str, source: str | None, spec: str = ""):
    """Distinct and contended claims with the tool (the package at *source* when given),
    on a fresh remote (in the layout *spec* names: --layouts)."""
    counts = [int(n) for n in args.clones.split(",")]
    shards = 0 if label == "before" else args.shards  # --before: its own layout
    made = spec if spec in LAYOUTS or spec.startswith("new:") else ""
    shards = int(spec) if spec and not made else shards
    with served(args, source, shards, args.model, made) as (root, env, every, daemon):
        results, rounds, confirmed = [], [], []  # type: ignore[var-annotated]
        traces = root / "traces" if args.trace else None
        if traces is not None:
            traces.mkdir()
        claim = (helping_claim(env, args.model, args.helping) if args.helping
                 else model_claim(env, args.model, not args.one_ref, args.flat_backoff)
                 if args.model else tool_claim(env, traces))
        for n in counts:
            d = distinct(every[:n], claim, args.seconds, f"d{n}", daemon)
            d.label = label
            results.append(d)
            confirmed += d.confirmed
            print(distinct_row(d), flush=True)
            if traces is not None:
                d.phases = claim_phases.report(sorted(traces.glob(f"d{n}_*.trace")))
                print("\n".join(d.phases), flush=True)
            if n > 1 and args.rounds and not args.model:
                c = contended(every[:n], env, args.rounds, f"x{n}")
                c.label = label
                rounds.append(c)
                confirmed += c.winners
                print(contended_row(c), flush=True)
        if args.model:
            lost = model_lost(root, env, confirmed)
        else:
            held = remote_locks(root, env)
            lost = [(s, p) for s, p in confirmed if s not in held.get(p, set())]
        where = layout(root, env)
    return results, rounds, lost, len(confirmed), where


def write_report(args, results: list[Distinct], rounds: list[Contended],
                 lost: list, confirmed: int, where: str) -> None:
    version = subprocess.run(["git", "version"], capture_output=True, text=True).stdout.strip()
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True).stdout.strip()
    written = ("its key's shard; after " f"{args.helping} lost pushes it publishes an intent "
               "that the shard's next writer applies" if args.helping else
               "its key's shard" if args.one_ref else "its key's and its session's shards")
    how = (f"A claim is the sharded layout's protocol with git alone ({args.model} shard refs: "
           f"fetch the refs it writes ({written}), a commit on each, one `push --atomic`; no "
           "registry process): what the remote can confirm, not what the tool does yet."
           if args.model else "One `lock acquire` process per claim, each clone back to back"
           + (f", on a registry converted to {args.shards} lock shards (`agent-registry shard`)."
              if args.shards else ", in each layout on a remote and clones of its own (a number: "
              "one branch converted to that many lock shards by `agent-registry shard`)."
              if args.layouts else "."))
    tool = "tool | " if args.before else "layout | " if args.layouts else ""
    title = ("## Scale, a model of the sharded protocol" if args.model
             else "## Scale: many clones through a remote with a round trip")
    lines = [
        title,
        "",
        f"`bench/scale_bench.py{' --quick' if args.quick else ''} --clones {args.clones} "
        f"--rtt-ms {args.rtt_ms:g} --seconds {args.seconds:g} --rounds {args.rounds}"
        f"{f' --model {args.model}' if args.model else ''}{' --one-ref' if args.one_ref else ''}"
        f"{f' --flat-backoff {args.flat_backoff:g}' if args.flat_backoff else ''}"
        f"{f' --helping {args.helping}' if args.helping else ''}"
        f"{f' --shards {args.shards}' if args.shards else ''}"
        f"{f' --layouts {args.layouts}' if args.layouts else ''}"
        f"{' --before <an earlier checkout>' if args.before else ''}`, "
        f"{time.strftime('%Y-%m-%d %H:%M')} UTC, commit {head}, {os.cpu_count()} cores "
        f"(shared with other work), Python {platform.python_version()}, {version}. "
        f"`git daemon` in a private network namespace behind a delay proxy adding "
        f"{args.rtt_ms:g} ms round trip; {where} at the end. Ours: "
        f"{'the checkout (.venv, --checkout)' if args.install == 'checkout' else 'a plain install (a wheel of the checkout in a fresh venv, bench/install.py)'}. {how}"
        + (" `before` is the package of another checkout (PYTHONPATH), measured first in the "
           "same run, on a remote and clones of its own." if args.before else ""),
        "",
        f"Distinct paths, for {args.seconds:g} s (time to confirm in seconds; attempts = pushes "
        "per confirmed claim; streak = a clone's worst run of lost pushes; client CPU = the "
        "CPU seconds of the `lock acquire` processes and the git they ran, per confirmed "
        "claim and per second of the window (cores busy); remote CPU = the CPU seconds of "
        "`git daemon` and the upload-pack and receive-pack it ran, with their git, per "
        "confirmed claim; load = the machine's 1-minute load average at the end):",
        "",
        f"| {tool}clones | confirmed claims/s | claims | p50 s | p90 s | max s | attempts mean | "
        "attempts max | worst streak | failed | client CPU s per claim | client cores | "
        "remote CPU s per claim | load |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|" + ("---|" if tool else ""),
        *[distinct_row(d) for d in results],
    ]
    if rounds:
        lines += ["", "Contended rounds (every clone claims the same new path at once):", "",
                  f"| {tool}clones | rounds | exactly one winner | other exits | median round s | "
                  "max round s |", "|---|---|---|---|---|---|" + ("---|" if tool else ""),
                  *[contended_row(c) for c in rounds]]
    lines += ["", f"Nothing lost: {confirmed - len(lost)} of {confirmed} confirmed claims are "
              f"held on the remote afterwards."]
    for d in results:
        if d.phases:
            lines += ["", f"Where the slowest claims of {d.clones} clones spent their time "
                      "(`--trace`; seconds: start = spawn to the sync's first phase, exit = "
                      "its last phase to the exit, other = the rest: local work outside "
                      "the flock):", "", *d.phases]
    for d in results:
        for failure in d.failures[:3]:
            lines.append(f"- failed ({d.label + ', ' if d.label else ''}{d.clones} clones): "
                         f"{failure[:200]}")
    write_section(ROOT / "docs" / "benchmarks.md", "\n".join(lines), name=args.section)
    print("\n".join(lines))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="clones 1,16, 20 s windows, 3 contended rounds")
    parser.add_argument("--clones", default="1,4,16,48", help="comma-separated clone counts")
    parser.add_argument("--rtt-ms", type=float, default=100.0, help="round trip the proxy adds")
    parser.add_argument("--seconds", type=float, default=60.0, help="window of distinct claims")
    parser.add_argument("--rounds", type=int, default=5, help="contended rounds per clone count")
    parser.add_argument("--section", default="scale",
                        help="marked section of docs/benchmarks.md to write (scale-before: "
                             "the single-branch numbers kept for comparison)")
    parser.add_argument("--model", type=int, default=0, metavar="SHARDS",
                        help="measure a git-only model of the sharded protocol over SHARDS "
                             "shard refs instead of the tool (section scale-model)")
    parser.add_argument("--one-ref", action="store_true",
                        help="with --model: a claim writes its key's shard only, not also "
                             "its session's")
    parser.add_argument("--flat-backoff", type=float, default=0.0, metavar="SECONDS",
                        help="with --model: retry after uniform(0, SECONDS) instead of the "
                             "tool's growing backoff")
    parser.add_argument("--helping", type=int, default=0, metavar="K",
                        help="with --model: one ref per claim, and a claim that lost K pushes "
                             "publishes an intent that the shard's next writer applies")
    parser.add_argument("--shards", type=int, default=0, metavar="N",
                        help="convert the remote's registry to N lock shards before measuring "
                             "(the tool of this checkout; --before keeps its own layout)")
    parser.add_argument("--layouts", metavar="L,L",
                        help="measure the tool in each layout, in one run, each on a remote "
                             "of its own: default (what a new registry gets), one (`init "
                             "--shards 0`), new:N (`init --shards N`), N (one branch "
                             "converted to N shards); section scale-layouts")
    parser.add_argument("--before", metavar="SRC",
                        help="also measure the tool from another source checkout (its "
                             "package on PYTHONPATH), first, on a remote of its own; with "
                             "one --layouts spec, both in that layout")
    parser.add_argument("--writes", choices=("claims", *WRITES), default="claims",
                        help="beats: each clone writes for its own session, in turn, a "
                             "heartbeat and a diary line (mixed: and a claim), on the "
                             "single branch and, with --shards N, on N lock shards, in one "
                             "run (section scale-writes); claims: the claim modes above")
    parser.add_argument("--proxy", type=float, help=argparse.SUPPRESS)  # internal: run the delay line
    parser.add_argument("--trace", action="store_true",
                        help="each claim process writes its sync phases "
                             "(AGENT_REGISTRY_SYNC_TRACE); the report breaks down the 5 "
                             "slowest distinct claims of each clone count")
    install.add_option(parser)
    args = parser.parse_args()
    if args.proxy is not None:
        run_proxy(PROXY_PORT, DAEMON_PORT, args.proxy)
        return
    if args.quick:
        args.clones, args.seconds, args.rounds = "1,16", 20.0, 3
    if args.model and args.section == "scale":
        args.section = "scale-model"
    if args.writes != "claims" and args.section == "scale":
        args.section = "scale-writes"
    if args.shards and args.section == "scale":
        args.section = "scale-shards"
    if args.layouts and args.section == "scale":
        args.section = "scale-layouts"
    if args.writes != "claims" and args.model:
        parser.error("--writes measures the tool: no --model")
    global CLI  # built outside the namespace (pip may need the index), found inside
    tool = install.chosen(args)
    CLI, args.install = tool.cli, tool.kind
    if os.environ.get(INSIDE):
        bench(args)
        return
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        sys.exit("scale_bench needs unshare and ip (util-linux, iproute2) and root")
    os.execvpe("unshare", ["unshare", "-n", "--", sys.executable, __file__, *sys.argv[1:]],
               {**os.environ, INSIDE: "1"})


if __name__ == "__main__":
    main()
