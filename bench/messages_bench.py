"""Messages benchmark: `send` and `inbox` as whole processes, messages per second one
remote accepts, and what senders cost the claims of another clone.

    python bench/messages_bench.py [--quick] [--rtt-ms 100]

1. Whole-process `send`, `inbox` (with a few hundred messages on the branch) and
   `lock acquire` in one clone with sync off, alternating.
2. N clones (N = 1, 4, 16) of one bare remote, each sending M messages at once (one
   process per message, as agents do): wall time and messages per second.
3. One clone claiming distinct paths through the remote, alone and then while 4 other
   clones send messages without pause: the claim's median and p90.  Whole processes,
   twice: against a bare remote on the same disk, and against a real remote, `git
   daemon` behind bench/scale_bench.py's delay line adding --rtt-ms of round trip, in a
   private network namespace (`unshare -n`: the benchmark re-executes itself there, as
   scale_bench does; --rtt-ms 0 skips it).  `--before SRC` also runs this part with the
   package of another source checkout (PYTHONPATH=SRC: e.g. the commit before messages
   had a branch of their own), interleaved, so both layouts meet the same machine load.

Writes the section between `<!-- messages:start -->` and `<!-- messages:end -->` of
docs/benchmarks.md.
"""
from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
from report import write_section  # noqa: E402
from states import hermetic_env, make_project  # noqa: E402
import install  # noqa: E402
import sync_bench  # noqa: E402
from sync_bench import cli, git, setup  # noqa: E402

INSIDE = "MESSAGES_BENCH_NETNS"  # set once the benchmark runs in its own network namespace


def timed(where: Path, env: dict, *args: str) -> float:
    start = time.perf_counter()
    r = cli(where, env, *args)
    assert r.returncode == 0, r.stderr
    return (time.perf_counter() - start) * 1000


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[max(0, int(len(values) * q) - 1)]


def local_costs(root: Path, env: dict, reps: int, preload: int) -> dict[str, list[float]]:
    here = root / "local"
    here.mkdir()
    make_project(here, env)
    for sid in ("s0", "s1"):
        cli(here, env, "register", sid, "--provider", "bench", "--working-on", "bench")
    for i in range(preload):  # an inbox with history: acknowledged ones are read too
        cli(here, env, "send", "--from", "s1", "--to", "s0", f"old {i}")
    times: dict[str, list[float]] = {"acquire": [], "send": [], "inbox": []}
    for i in range(reps):
        times["acquire"].append(timed(here, env, "lock", "acquire", f"b/{i}.py", "--session", "s0"))
        times["send"].append(timed(here, env, "send", "--from", "s1", "--to", "s0", f"m {i}"))
        times["inbox"].append(timed(here, env, "inbox", "s0"))
    return times


def fan_in(root: Path, env: dict, n: int, each: int) -> dict:
    bare, clones = setup(root / f"fan{n}", env, n)
    failures: list[str] = []

    def agent(i: int, clone: Path) -> None:
        for k in range(each):
            r = cli(clone, env, "send", "--from", f"s{i}", "--to", "s0", "--key", f"k{k}",
                    f"from s{i} #{k}")
            if r.returncode:
                failures.append(r.stderr.strip())

    threads = [threading.Thread(target=agent, args=(i, c)) for i, c in enumerate(clones)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - start
    landed = git(bare, env, "ls-tree", "-r", "--name-only", "refs/heads/agent-registry-messages",
                 "messages/").split()
    return {"n": n, "sent": n * each, "wall": wall, "failures": failures, "landed": len(landed)}


def claims_under_senders(root: Path, env: dict, claims: int, senders: int,
                         rtt_ms: float = 0) -> dict:
    """One clone claims distinct paths alone, then beside *senders* clones sending
    without pause; whole processes.  *rtt_ms*: through git daemon behind the delay line
    (scale_bench's), else a bare remote on the same disk."""
    servers: list[subprocess.Popen] = []
    if rtt_ms:
        import scale_bench
        where = root / f"mixed-{rtt_ms:g}"
        servers = scale_bench.make_remote(where, env, senders + 1, rtt_ms)
        clones, sids = scale_bench.make_clones(where, env, senders + 1), scale_bench.sids(senders + 1)
    else:
        _, clones = setup(root / "mixed", env, senders + 1)
        sids = [f"s{i}" for i in range(senders + 1)]
    try:
        return _claims_beside(clones, sids, env, claims)
    finally:
        for proc in servers:
            proc.terminate()
            proc.wait()


def _claims_beside(clones: list[Path], sids: list[str], env: dict, claims: int) -> dict:
    claimer, others = clones[0], clones[1:]
    alone = [timed(claimer, env, "lock", "acquire", f"alone/{i}.py", "--session", sids[0])
             for i in range(claims)]
    stop = threading.Event()
    sent = [0]

    def sender(i: int, clone: Path) -> None:
        while not stop.is_set():
            if cli(clone, env, "send", "--from", sids[i + 1], "--to", sids[0],
                   "busy").returncode == 0:
                sent[0] += 1

    threads = [threading.Thread(target=sender, args=(i, c)) for i, c in enumerate(others)]
    for t in threads:
        t.start()
    time.sleep(1.0)
    start, before = time.perf_counter(), sent[0]
    busy = [timed(claimer, env, "lock", "acquire", f"busy/{i}.py", "--session", sids[0])
            for i in range(claims)]
    rate = (sent[0] - before) / (time.perf_counter() - start)
    stop.set()
    for t in threads:
        t.join()
    return {"alone": alone, "busy": busy, "sent": sent[0], "rate": rate}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions and messages")
    parser.add_argument("--claims", type=int, metavar="N",
                        help="claims per measurement in part 3 (default 8 with --quick, else 20)")
    parser.add_argument("--before", metavar="SRC",
                        help="a source checkout of another version to measure part 3 with too")
    parser.add_argument("--rtt-ms", type=float, default=100.0,
                        help="round trip of the real remote claims are measured through "
                             "(0: only the bare remote on the same disk)")
    install.add_option(parser)
    args = parser.parse_args()
    # ours (sync_bench.cli runs it): built before the namespace, where pip may need the index
    sync_bench.CLI = install.chosen(args).cli
    if args.rtt_ms and not os.environ.get(INSIDE):
        if shutil.which("unshare") is None or shutil.which("ip") is None:
            sys.exit("--rtt-ms needs unshare and ip (util-linux, iproute2) and root; "
                     "or pass --rtt-ms 0")
        os.execvpe("unshare", ["unshare", "-n", "--", sys.executable, __file__, *sys.argv[1:]],
                   {**os.environ, INSIDE: "1"})
    if args.rtt_ms:
        subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    reps, preload, each, claims = (10, 100, 3, 8) if args.quick else (30, 300, 10, 20)
    claims = args.claims or claims
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="messages-bench-") as tmp:
        root = Path(tmp)
        env = hermetic_env(root)
        local = local_costs(root, env, reps, preload)
        fans = [fan_in(root, env, n, each) for n in (1, 4, 16)]
        remotes = [("bare, same disk", 0.0)] + \
            ([(f"git daemon, {args.rtt_ms:g} ms round trip", args.rtt_ms)] if args.rtt_ms else [])
        layouts = [("messages branch", env)] + \
            ([("one branch (before)", {**env, "PYTHONPATH": os.path.abspath(args.before)})]
             if args.before else [])
        mixed = []  # (layout, remote, result), each remote's layouts back to back
        for where, rtt in remotes:
            for k, (layout, layout_env) in enumerate(layouts):
                place = root / f"layout{k}"
                place.mkdir(exist_ok=True)
                mixed.append((layout, where,
                              claims_under_senders(place, layout_env, claims, 4, rtt)))
        version = git(root, env, "version").strip()
    load = os.getloadavg()[0]
    lines = [
        "## Messages: `send`, `inbox`, and claims beside them",
        "",
        f"`bench/messages_bench.py{' --quick' if args.quick else ''}"
        f"{f' --claims {args.claims}' if args.claims else ''}"
        f"{' --before <the commit before the split>' if args.before else ''}`, "
        f"{time.strftime('%Y-%m-%d')}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}, {version}; load average {load:.1f} at the end, "
        f"{time.perf_counter() - started:.0f} s in all; remotes are bare repositories on the "
        "same disk (no network latency)"
        + (f", and for the claims also `git daemon` behind a delay line adding {args.rtt_ms:g} ms "
           "of round trip, in a private network namespace" if args.rtt_ms else "") + ".",
        "",
        f"Whole process, one clone with sync off, {preload} messages already on the branch, "
        "alternating:",
        "",
        "| command | median ms | p90 ms |",
        "|---|---|---|",
    ]
    for name, label in (("acquire", "`lock acquire` (reference)"), ("send", "`send --to SID`"),
                        ("inbox", "`inbox SID`")):
        lines.append(f"| {label} | {statistics.median(local[name]):.0f} | {pct(local[name], 0.9):.0f} |")
    lines += ["", f"N clones of one remote, each sending {each} messages at once (one process "
              "per message):", "",
              "| clones | messages | wall s | messages/s | landed on the remote | failed |",
              "|---|---|---|---|---|---|"]
    for f in fans:
        lines.append(f"| {f['n']} | {f['sent']} | {f['wall']:.1f} | {f['sent'] / f['wall']:.1f} | "
                     f"{f['landed']} | {len(f['failures'])} |")
    lines += ["", f"One clone claiming {claims} distinct paths through the remote (whole "
              "processes), alone and while 4 other clones send without pause:", "",
              "| messages on | remote | claims | median ms | p90 ms | messages sent meanwhile | messages/s while claiming |",
              "|---|---|---|---|---|---|---|"]
    ratios = []
    for layout, where, m in mixed:
        alone, busy = m["alone"], m["busy"]
        ratios.append((layout, where, statistics.median(busy) / statistics.median(alone)))
        lines += [f"| {layout} | {where} | alone | {statistics.median(alone):.0f} | "
                  f"{pct(alone, 0.9):.0f} | | |",
                  f"| {layout} | {where} | beside 4 senders | {statistics.median(busy):.0f} | "
                  f"{pct(busy, 0.9):.0f} | {m['sent']} | {m['rate']:.1f} |"]
    lines += ["", "A claim's median beside 4 busy senders, as a multiple of its median alone: "
              + "; ".join(f"{r:.1f}x with messages on the {layout} ({where})"
                          for layout, where, r in ratios) + ". "
              "Messages are committed on a branch of their own (`agent-registry-messages`), "
              "so a send is a push to another ref and never queues in front of a claim; "
              "on the one registry branch each send was one more push the remote took in "
              "turn with the claims (2.2x in the `--quick` run of the commit before the "
              "split). What remains is the machine: the senders' processes compete with the "
              "claimer for its CPU (2 cores here) and the remote's, and a loaded machine "
              "moves these numbers by tens of percent from run to run."]
    write_section(ROOT / "docs" / "benchmarks.md", "\n".join(lines), name="messages")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
