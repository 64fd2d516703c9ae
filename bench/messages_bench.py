"""Messages benchmark: `send` and `inbox` as whole processes, messages per second one
remote accepts, and what senders cost the claims of another clone.

    python bench/messages_bench.py [--quick]

1. Whole-process `send`, `inbox` (with a few hundred messages on the branch) and
   `lock acquire` in one clone with sync off, alternating.
2. N clones (N = 1, 4, 16) of one bare remote, each sending M messages at once (one
   process per message, as agents do): wall time and messages per second.
3. One clone claiming distinct paths through the remote, alone and then while 4 other
   clones send messages without pause: the claim's median and p90.

Writes the section between `<!-- messages:start -->` and `<!-- messages:end -->` of
docs/benchmarks.md.
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
from report import write_section  # noqa: E402
from states import hermetic_env, make_project  # noqa: E402
from sync_bench import cli, git, setup  # noqa: E402


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
    landed = git(bare, env, "ls-tree", "-r", "--name-only", "refs/heads/agent-registry",
                 "messages/").split()
    return {"n": n, "sent": n * each, "wall": wall, "failures": failures, "landed": len(landed)}


def claims_under_senders(root: Path, env: dict, claims: int, senders: int) -> dict:
    _, clones = setup(root / "mixed", env, senders + 1)
    claimer, others = clones[0], clones[1:]
    alone = [timed(claimer, env, "lock", "acquire", f"alone/{i}.py", "--session", "s0")
             for i in range(claims)]
    stop = threading.Event()
    sent = [0]

    def sender(i: int, clone: Path) -> None:
        while not stop.is_set():
            if cli(clone, env, "send", "--from", f"s{i + 1}", "--to", "s0", "busy").returncode == 0:
                sent[0] += 1

    threads = [threading.Thread(target=sender, args=(i, c)) for i, c in enumerate(others)]
    for t in threads:
        t.start()
    time.sleep(1.0)
    busy = [timed(claimer, env, "lock", "acquire", f"busy/{i}.py", "--session", "s0")
            for i in range(claims)]
    stop.set()
    for t in threads:
        t.join()
    return {"alone": alone, "busy": busy, "sent": sent[0]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions and messages")
    args = parser.parse_args()
    reps, preload, each, claims = (10, 100, 3, 8) if args.quick else (30, 300, 10, 20)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="messages-bench-") as tmp:
        root = Path(tmp)
        env = hermetic_env(root)
        local = local_costs(root, env, reps, preload)
        fans = [fan_in(root, env, n, each) for n in (1, 4, 16)]
        mixed = claims_under_senders(root, env, claims, 4)
        version = git(root, env, "version").strip()
    load = os.getloadavg()[0]
    lines = [
        "## Messages: `send`, `inbox`, and claims beside them",
        "",
        f"`bench/messages_bench.py{' --quick' if args.quick else ''}`, "
        f"{time.strftime('%Y-%m-%d')}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}, {version}; load average {load:.1f} at the end, "
        f"{time.perf_counter() - started:.0f} s in all; remotes are bare repositories on the "
        "same disk (no network latency).",
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
    alone, busy = mixed["alone"], mixed["busy"]
    lines += ["", f"One clone claiming {claims} distinct paths through the remote, alone and "
              f"while 4 other clones send without pause ({mixed['sent']} messages sent meanwhile):",
              "", "| claims | median ms | p90 ms |", "|---|---|---|",
              f"| alone | {statistics.median(alone):.0f} | {pct(alone, 0.9):.0f} |",
              f"| beside 4 senders | {statistics.median(busy):.0f} | {pct(busy, 0.9):.0f} |",
              "", f"Here messages and claims share one registry branch, so each send is one "
              "more push the remote takes one at a time: beside 4 busy senders a claim's median "
              f"is {statistics.median(busy) / statistics.median(alone):.1f}x its time alone. "
              "Every message file is owned by one session (`messages/<sender>/`, "
              "`acks/<recipient>/`), so with the sharded storage of issue 11 a send can ride its "
              "sender's shard and stop queueing in front of other sessions' claims; that is "
              "not measured here yet."]
    write_section(ROOT / "docs" / "benchmarks.md", "\n".join(lines), name="messages")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
