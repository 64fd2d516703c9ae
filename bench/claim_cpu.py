"""CPU time of one claim through a remote, both ends counted.

    python bench/claim_cpu.py [--claims 40] [--shards 16] [--rounds 1] [--before SRC]
                              [--breakdown]

One clone of a bare remote reached by path, so git runs `upload-pack` and `receive-pack`
as children of the claim's own git processes: the CPU time of every process a claim
starts, the remote's side included, is in this process's RUSAGE_CHILDREN.  The clone
claims distinct paths back to back, one `agent-registry lock acquire` process each.
Divided by the claims, it says how many claims a second a machine's cores can carry at
most, whatever the number of clones (bench/scale_bench.py measures them through a delay
line whose own relaying also costs CPU).  The layout is the one `init` makes, in --shards
lock shards (16 by default; a registry in one branch is no longer made).

`--before SRC` (repeatable) measures the package of another checkout too (on PYTHONPATH,
named by its folder), each round right before this checkout's, on a remote of its own:
one table, before and after, under the same load.  `--rounds N` repeats each measurement and keeps the median.
`--breakdown` (Linux) then runs the claims once more with every git process behind a shim
(bench/proctimes.py) and says where the CPU goes: each process a claim starts, on which
end, and the Python process itself; and what the floor costs, measured alone: a `git
fetch` with nothing to fetch and a `git push` of a claim-sized commit.  Writes the
section `claim-cpu` of docs/benchmarks.md.
"""
from __future__ import annotations

import argparse
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
import install  # noqa: E402
from proctimes import processes, wrap  # noqa: E402
from report import write_section  # noqa: E402
from states import hermetic_env, make_project  # noqa: E402

CLI = str(Path(sys.executable).with_name("agent-registry"))


def run(cwd: Path, env: dict, *args: str) -> str:
    proc = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"{' '.join(args)}: {proc.stderr.strip()}")
    return proc.stdout


def prepare(root: Path, shards: int, source: str | None) -> tuple[Path, dict]:
    """A project with a bare remote and a registry of *shards* lock shards made by the
    tool of *source* (None: this checkout), one session registered."""
    env = hermetic_env(root)
    if source:
        env["PYTHONPATH"] = source  # ahead of the installed package
    repo = root / "project"
    make_project(repo, env)
    run(root, env, "git", "init", "-q", "--bare", "remote.git")
    run(repo, env, "git", "remote", "add", "origin", str(root / "remote.git"))
    run(repo, env, "git", "push", "-q", "origin", "main")
    if "--shards" in run(repo, env, CLI, "init", "--help"):  # a layout chosen at init
        run(repo, env, CLI, "init", "--shards", str(shards))
    else:  # an older tool: one branch, converted when asked
        run(repo, env, CLI, "init")
        if shards:
            run(repo, env, CLI, "shard", "--count", str(shards))
    run(repo, env, CLI, "register", "bench-1", "--provider", "Codex")
    return repo, env


def claim_all(repo: Path, env: dict, claims: int) -> float:
    """Claim *claims* distinct paths back to back; the wall seconds.  A claim the remote
    did not confirm in time (exit 3: a machine so loaded that a push took longer than
    the network timeout) is said on stderr and counted like the others."""
    start = time.perf_counter()
    for i in range(claims):
        proc = subprocess.run([CLI, "lock", "acquire", f"dir{i}/sub/file.py", "--session",
                               "bench-1"], cwd=repo, env=env, capture_output=True, text=True)
        if proc.returncode == 3:
            print(f"unconfirmed claim: {proc.stderr.strip()}", file=sys.stderr)
        elif proc.returncode:
            sys.exit(f"lock acquire: {proc.stderr.strip()}")
    return time.perf_counter() - start


def measure(claims: int, shards: int, source: str | None) -> dict:
    """CPU seconds (user, system) and wall seconds per claim on a fresh remote."""
    with tempfile.TemporaryDirectory() as tmp:
        repo, env = prepare(Path(tmp), shards, source)
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        wall = claim_all(repo, env, claims)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    user, system = after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime
    return {"user": user / claims, "system": system / claims, "wall": wall / claims}


def breakdown(claims: int, shards: int) -> dict[tuple[str, str, str], list[float]]:
    """(process, started by, end) -> [runs, CPU seconds] per claim, this checkout's
    tool; ("python", "", "local") is the `agent-registry` process itself."""
    with tempfile.TemporaryDirectory() as tmp:
        repo, env = prepare(Path(tmp), shards, None)
        log = os.path.join(tmp, "processes.log")
        shimmed = wrap(os.path.join(tmp, "shims"), log, env)
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        claim_all(repo, shimmed, claims)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        rows, shims = processes(log)
    total = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    out: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0.0, 0.0])
    for row in rows:
        key = out[(row["name"], row["parent"] or "agent-registry",
                   "remote" if row["remote"] else "local")]
        key[0] += 1 / claims
        key[1] += row["own"] / claims
    top = sum(row["total"] for row in rows if row["parent"] is None)
    out[("python", "", "local")] = [1.0, (total - top - shims) / claims]
    return out


def floor(shards: int) -> dict[str, float]:
    """CPU seconds, both ends, of the two network commands a claim may run, alone: a
    fetch of the registry branch with nothing new, and a push of a claim-sized commit."""
    with tempfile.TemporaryDirectory() as tmp:
        repo, env = prepare(Path(tmp), shards, None)
        git = ["git", "-C", str(repo)]
        ref = run(repo, env, *git, "for-each-ref", "--count=1", "--format=%(refname)",
                  "refs/heads/agent-registry-shards/").strip()
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        run(repo, env, *git, "fetch", "--quiet", "--no-tags", "--no-write-fetch-head",
            "--no-auto-maintenance", "origin", f"+{ref}:refs/remotes/origin/{ref[11:]}")
        middle = resource.getrusage(resource.RUSAGE_CHILDREN)
        # what a claim writes: a lock record two folders down, its session file two folders
        # down (and registry.md): a commit, three blobs, five trees
        tip = run(repo, env, *git, "rev-parse", ref).strip()
        commit = _claim_sized(repo, env, tip)
        middle2 = resource.getrusage(resource.RUSAGE_CHILDREN)
        run(repo, env, *git, "push", "--quiet", "--no-verify", "origin", f"{commit}:{ref}")
        after = resource.getrusage(resource.RUSAGE_CHILDREN)

    def cpu(a, b) -> float:
        return b.ru_utime - a.ru_utime + b.ru_stime - a.ru_stime
    return {"fetch": cpu(before, middle), "push": cpu(middle2, after)}


def _claim_sized(repo: Path, env: dict, tip: str) -> str:
    def git(*args: str, stdin: str = "") -> str:
        return subprocess.run(["git", "-C", str(repo), *args], input=stdin, env=env,
                              capture_output=True, text=True, check=True).stdout.strip()
    blobs = [git("hash-object", "-w", "--stdin", stdin=f"floor {i} {time.time()}\n")
             for i in range(3)]
    inner = [git("mktree", stdin=f"100644 blob {b}\tf.json\n") for b in blobs[:2]]
    outer = [git("mktree", stdin=f"040000 tree {t}\tsub\n") for t in inner]
    root = git("ls-tree", tip) + "".join(f"\n040000 tree {t}\tfloor{i}" for i, t in
                                         enumerate(outer)) + f"\n100644 blob {blobs[2]}\tfloor.md\n"
    return git("commit-tree", git("mktree", stdin=root), "-p", tip, "-m", "floor")


def label(shards: int) -> str:
    return f"{shards} lock shards"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--claims", type=int, default=40, help="claims to time")
    parser.add_argument("--shards", type=int, default=16, help="lock shards (1 to 64)")
    parser.add_argument("--rounds", type=int, default=1, help="measurements to take the median of")
    parser.add_argument("--before", metavar="SRC", action="append", default=[],
                        help="also measure the package of another checkout (on PYTHONPATH), "
                             "each round first, on a remote of its own (repeatable)")
    parser.add_argument("--breakdown", action="store_true",
                        help="then say which processes the CPU goes to (Linux)")
    install.add_option(parser)
    args = parser.parse_args()
    global CLI
    CLI = install.chosen(args).cli
    tools = [(os.path.basename(os.path.abspath(src)), os.path.abspath(src))
             for src in args.before] + [("now", None)]
    load = os.getloadavg()
    results: dict[tuple[str, int], list[dict]] = defaultdict(list)
    for _ in range(args.rounds):
        for shards in (args.shards,):
            for name, source in tools:
                results[(name, shards)].append(measure(args.claims, shards, source))
    rows = []
    for shards in (args.shards,):
        for name, _ in tools:
            got = {k: statistics.median(r[k] for r in results[(name, shards)])
                   for k in ("user", "system", "wall")}
            cpu = got["user"] + got["system"]
            rows.append(f"| {label(shards)} | {name + ' | ' if args.before else ''}{cpu:.3f} | "
                        f"{got['user']:.3f} | {got['system']:.3f} | {got['wall']:.3f} | "
                        f"{os.cpu_count() / cpu:.1f} |")
    load = max(load[0], os.getloadavg()[0])
    version = subprocess.run(["git", "--version"], capture_output=True, text=True).stdout.strip()
    tool = "| tool " if args.before else ""
    section = [
        "## CPU of one claim, both ends",
        "",
        f"`bench/claim_cpu.py --claims {args.claims} --shards {args.shards} --rounds "
        f"{args.rounds}{' --before <checkout>' * len(args.before)}"
        f"{' --breakdown' if args.breakdown else ''}`, "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} cores "
        f"(load average up to {load:.1f} while it ran), "
        f"Python {platform.python_version()}, {version}. One clone of a bare remote reached "
        "by path (no delay line), one `lock acquire` process per claim, back to back; the "
        "CPU time of every process a claim starts, the remote's `receive-pack` and "
        "`upload-pack` included. \"Ceiling\" is the claims a second this machine's cores "
        "could carry at that cost, were nothing else running."
        + (" A tool other than `now` is the package of another checkout (PYTHONPATH), "
           "measured right before `now` in each round, on a remote of its own; medians of "
           "the rounds." if args.before else ""),
        "",
        f"| layout {tool}| CPU s per claim | user s | system s | wall s | ceiling, claims/s |",
        f"|---{'|---' if args.before else ''}|---|---|---|---|---|",
        *rows,
    ]
    if args.breakdown:
        section += breakdown_section(args.claims, args.shards)
    write_section(ROOT / "docs" / "benchmarks.md", "\n".join(section), "claim-cpu")
    print("\n".join(section))


def breakdown_section(claims: int, shards: int) -> list[str]:
    parts = {s: breakdown(claims, s) for s in (shards,)}
    floors = {s: floor(s) for s in (shards,)}
    keys = sorted({k for part in parts.values() for k in part},
                  key=lambda k: -max(p.get(k, [0, 0])[1] for p in parts.values()))
    head = " | ".join(f"{label(s)}: runs, ms" for s in parts)
    lines = ["", "Where it goes (`--breakdown`, this checkout): each process a claim starts, "
             "its own CPU (without its children's), per claim; runs per claim below 1 are "
             "claims that fetched first (the others were decided within FRESH of a fetch, "
             "sync/remote.py). Every git process behind a shim (bench/proctimes.py), whose "
             "own start-up is counted apart; `git push` includes the `sh -c` that starts "
             "`receive-pack`, `git fetch` the one of `upload-pack`.", "",
             f"| process | started by | end | {head} |",
             "|---|---|---|" + "---|" * len(parts)]
    for key in keys:
        name, parent, end = key
        cells = " | ".join(f"{p[key][0]:.2f}, {p[key][1] * 1000:.1f}" if key in p else "–"
                           for p in parts.values())
        lines.append(f"| {'the agent-registry process (Python)' if name == 'python' else name} "
                     f"| {parent} | {end} | {cells} |")
    totals = " | ".join(f"{sum(v[1] for v in p.values()) * 1000:.1f} ms" for p in parts.values())
    lines.append(f"| all | | | {totals} |")
    lines += ["", "The floor, measured alone in the same layouts: " + "; ".join(
        f"{label(s)}: a `git fetch` with nothing new {f['fetch'] * 1000:.1f} ms, a `git push` "
        f"of a claim-sized commit (3 blobs, 5 trees) {f['push'] * 1000:.1f} ms, both ends"
        for s, f in floors.items()) + "."]
    return lines


if __name__ == "__main__":
    main()
