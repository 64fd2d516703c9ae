#!/usr/bin/env python3
"""Benchmark of the registry-branch core (``make bench``): whole-process ``lock acquire``,
``lock check`` and ``status`` of agent-registry against bench/baseline_flock.py (the
predecessor's flock-and-file design), in four states, timed in rounds: each round runs
every command of both tools (in alternating order) in every state, so a change of load
on a shared machine falls on all of them alike:

    small        10 locks (10 sessions x 1)         ~100 commits on the branch
    locks-10k    10,000 locks (10 sessions x 1,000)  ~100 commits
    sessions-100 10,000 locks (100 sessions x 100)   ~200 commits  (full run only)
    history-100k 10 locks (10 sessions x 1)          100,000 commits

plus the in-process Python API claim, and a profile of one whole-process claim.  Results
go to the section of docs/benchmarks.md between ``<!-- core:start -->`` and
``<!-- core:end -->``; the rest of that file belongs to others and is left as it is.

    .venv/bin/python bench/run.py [--quick] [--reps N] [--states a,b] [--keep] [--no-doc]

A benchmark, not a test: it asserts nothing about time.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))

import baseline_flock  # noqa: E402
import profile_claim  # noqa: E402
import report  # noqa: E402
import states  # noqa: E402
from states import CLAIMER, TTL, Shape  # noqa: E402

SHAPES = [
    Shape("small", sessions=10, locks_each=1, history=100),
    Shape("locks-10k", sessions=10, locks_each=1000, history=100),
    Shape("sessions-100", sessions=100, locks_each=100, history=100),
    Shape("history-100k", sessions=10, locks_each=1, history=100_000),
]
QUICK_SKIPS = {"sessions-100"}
COMMANDS = ("acquire", "check", "status")
OURS = str(Path(sys.executable).parent / "agent-registry")


@dataclass
class StateResult:
    shape: Shape
    commits: int
    times: dict[tuple[str, str], list[float]] = field(default_factory=dict)  # (tool, command): wall ms
    cpu: dict[tuple[str, str], list[float]] = field(default_factory=dict)  # user+sys ms, git included
    api: dict[str, list[float]] = field(default_factory=dict)
    build_seconds: float = 0.0


def stats(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    p90 = ordered[min(len(ordered) - 1, int(round(0.9 * (len(ordered) - 1))))]
    return {"median": statistics.median(ordered), "p90": p90, "min": ordered[0], "n": len(ordered)}


def timed(argv: list[str], cwd: Path, env: dict[str, str], expect: int = 0) -> tuple[float, float]:
    """(wall ms, CPU ms) of one process.  The CPU time (user + system, of the process and
    of the git processes it waited for) is the figure least disturbed by other load on a
    shared machine."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    elapsed = (time.perf_counter() - start) * 1000
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != expect:
        raise SystemExit(f"{' '.join(argv)} exited {proc.returncode}: {proc.stderr.decode().strip()}")
    cpu = (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000
    return elapsed, cpu


class Pair:
    """One state, both tools: the argv of each command, how to undo a claim, and the
    measurements taken in it."""

    def __init__(self, repo: Path, home: Path, registry, result: StateResult) -> None:
        self.repo, self.home, self.registry, self.result = repo, home, registry, result
        self.held = states.held_path(0, 0)

    def argv(self, tool: str, command: str, rep: int) -> list[str]:
        claim = f"src/bench/claim{rep:04d}.py"
        if tool == "ours":
            return {"acquire": [OURS, "lock", "acquire", claim, "--session", CLAIMER, "--ttl", str(TTL)],
                    "check": [OURS, "lock", "check", self.held, "--session", CLAIMER],
                    "status": [OURS, "status"]}[command]
        base = [sys.executable, str(BENCH / "baseline_flock.py"), "--home", str(self.home)]
        return base + {"acquire": ["acquire", claim, CLAIMER, "--timeout", str(TTL)],
                       "check": ["check", self.held, "--session-id", CLAIMER],
                       "status": ["status"]}[command]

    def undo(self, tool: str, rep: int) -> None:
        """Release the claim of *rep* in process, outside the timed window, so every
        timed acquire is a fresh claim and the state does not grow."""
        claim = f"src/bench/claim{rep:04d}.py"
        if tool == "ours":
            self.registry.release(CLAIMER, [claim])
        else:
            with contextlib.chdir(self.repo):  # its lock files are named by realpath
                baseline_flock.release(str(self.home), [claim], CLAIMER)


def time_processes(pairs: list[Pair], env: dict[str, str], reps: int, warmup: int) -> None:
    """Whole processes, in rounds: every round visits every state, every command, and
    both tools in alternating order, so a change in the machine's load during the run
    falls on all of them alike and the comparisons between states stay fair."""
    for pair in pairs:
        for tool in ("ours", "baseline"):
            for command in COMMANDS:
                pair.result.times[(tool, command)] = []
                pair.result.cpu[(tool, command)] = []
    for rep in range(-warmup, reps):
        for pair in pairs:
            for command in COMMANDS:
                order = ("ours", "baseline") if rep % 2 == 0 else ("baseline", "ours")
                for tool in order:
                    # ours: `lock check` of a path another session holds exits 1; the
                    # baseline keeps its predecessor's advisory single-path exit 0
                    expect = 1 if (tool, command) == ("ours", "check") else 0
                    wall, cpu = timed(pair.argv(tool, command, rep + warmup), pair.repo, env,
                                      expect)
                    if rep >= 0:
                        pair.result.times[(tool, command)].append(wall)
                        pair.result.cpu[(tool, command)].append(cpu)
                    if command == "acquire":
                        pair.undo(tool, rep + warmup)
        if rep >= 0 and (rep + 1) % 10 == 0:
            print(f"  round {rep + 1}/{reps}", flush=True)


def time_api(pairs: list[Pair], reps: int) -> None:
    """In-process claims through the Python API (DESIGN's 15 ms target), in rounds over
    the states: warm (the pair's open Registry, as a long-lived agent or the dashboard
    holds one) and cold (open, claim, close: what a one-shot command does after its
    imports)."""
    from agent_registry.core.registry import Registry
    for pair in pairs:
        pair.result.api = {"claim": [], "release": [], "open+claim+close": []}
    for i in range(reps):
        for pair in pairs:
            api, path = pair.result.api, f"src/api/claim{i:04d}.py"
            start = time.perf_counter()
            pair.registry.claim(CLAIMER, [path], ttl=TTL)
            middle = time.perf_counter()
            pair.registry.release(CLAIMER, [path])
            api["claim"].append((middle - start) * 1000)
            api["release"].append((time.perf_counter() - middle) * 1000)
            start = time.perf_counter()
            with Registry.open(str(pair.repo)) as registry:
                registry.claim(CLAIMER, [path], ttl=TTL)
            api["open+claim+close"].append((time.perf_counter() - start) * 1000)
            pair.registry.release(CLAIMER, [path])


def bench_env(root: Path) -> dict[str, str]:
    """Hermetic git config, and compiled bytecode cached as an installed package would
    have it (this sandbox sets PYTHONDONTWRITEBYTECODE, which makes every run compile the
    project's modules: measured separately in the profile)."""
    env = states.hermetic_env(root)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(root / "pycache")
    return env


def machine_facts() -> dict[str, str]:
    git = subprocess.run(["git", "--version"], capture_output=True, text=True).stdout.strip()
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"nproc": str(os.cpu_count()), "cpu": cpu or platform.processor(),
            "python": platform.python_version(), "git": git.removeprefix("git version "),
            "os": f"{platform.system()} {platform.release()}"}


def run_profile(pair: Pair, env: dict[str, str], reps: int) -> dict:
    argv = lambda i: ["lock", "acquire", f"src/prof/claim{i:04d}.py", "--session", CLAIMER]
    release = lambda i: pair.registry.release(CLAIMER, [f"src/prof/claim{i:04d}.py"])
    out = {"phases": profile_claim.phase_table(argv, pair.repo, env, release, reps),
           "imports": profile_claim.import_table(argv(9000), pair.repo, env),
           "floor": profile_claim.interpreter_floor()}
    release(9000)
    out["strace"] = profile_claim.strace_summary(argv(9001), pair.repo, env)
    release(9001)
    out["cprofile"] = profile_claim.cprofile_top(argv(9002), pair.repo, env)
    release(9002)
    # as this sandbox's shells run it: no bytecode written, and none cached for the
    # project's own (editable) modules, so each run compiles them
    cold_env = {k: v for k, v in env.items() if k != "PYTHONPYCACHEPREFIX"}
    cold_env["PYTHONDONTWRITEBYTECODE"] = "1"
    out["project_pycache"] = (ROOT / "agent_registry" / "__pycache__").is_dir()
    cold = []
    for i in range(max(3, reps // 2)):
        cold.append(timed([OURS, *argv(9100 + i)], pair.repo, cold_env)[0])
        release(9100 + i)
    out["no_bytecode_cache"] = stats(cold)
    out["cli_layer"] = cli_layer(pair, env, reps)
    return out


BARE_CLAIM = ("import os, sys\nfrom agent_registry.core.registry import Registry\n"
              "with Registry.open('.') as registry:\n"
              f"    registry.claim(sys.argv[1], [sys.argv[2]], ttl={TTL})\n"
              "os._exit(0)  # as the console script leaves: no interpreter teardown\n")


def cli_layer(pair: Pair, env: dict[str, str], reps: int) -> dict:
    """The same claim as a bare ``python -c`` calling Registry.claim (and leaving as the
    console script does), alternating with the real command: the difference is what the
    CLI layer (click, cli.py) costs."""
    out: dict[str, list[tuple[float, float]]] = {"cli": [], "bare": []}
    for i in range(reps):
        path = f"src/layer/claim{i:04d}.py"
        runs = [("cli", [OURS, "lock", "acquire", path, "--session", CLAIMER, "--ttl", str(TTL)]),
                ("bare", [sys.executable, "-c", BARE_CLAIM, CLAIMER, path])]
        for kind, argv in (runs if i % 2 == 0 else runs[::-1]):
            out[kind].append(timed(argv, pair.repo, env))
            pair.registry.release(CLAIMER, [path])
    return {kind: (statistics.median(w for w, _ in values), statistics.median(c for _, c in values))
            for kind, values in out.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="few repetitions, skip sessions-100")
    parser.add_argument("--reps", type=int, help="timed rounds (each: every state, command and tool)")
    parser.add_argument("--states", metavar="NAMES",
                        help="comma-separated subset of: " + ", ".join(s.name for s in SHAPES))
    parser.add_argument("--keep", action="store_true", help="keep the temporary repositories")
    parser.add_argument("--no-doc", action="store_true", help="print only; leave docs/benchmarks.md")
    args = parser.parse_args(argv)
    reps = args.reps or (10 if args.quick else 30)
    api_reps = 20 if args.quick else 30
    wanted = set(args.states.split(",")) if args.states else None
    if wanted and wanted - {s.name for s in SHAPES}:
        parser.error(f"unknown state(s): {', '.join(sorted(wanted - {s.name for s in SHAPES}))}")
    shapes = [s for s in SHAPES if (s.name in wanted if wanted else
                                    not (args.quick and s.name in QUICK_SKIPS))]

    root = Path(tempfile.mkdtemp(prefix="agent-registry-bench-"))
    env = bench_env(root)
    os.environ.clear()
    os.environ.update(env)  # the library, used in process, reads os.environ
    started = time.time()
    load_before = os.getloadavg()
    pairs: list[Pair] = []
    profile = None
    try:
        from agent_registry.core.registry import Registry
        for shape in shapes:
            t0 = time.time()
            print(f"[{shape.name}] building ...", flush=True)
            repo = states.build_ours(root / shape.name / "repo", shape, env)
            home = states.build_baseline(root / shape.name / "home-baseline", shape, repo)
            result = StateResult(shape, states.commit_count(repo, env), build_seconds=time.time() - t0)
            pairs.append(Pair(repo, home, Registry.open(str(repo)), result))
            print(f"[{shape.name}] built in {result.build_seconds:.0f} s ({result.commits:,} commits)",
                  flush=True)
        print(f"timing {reps} rounds x {len(pairs)} states x {len(COMMANDS)} commands x 2 tools ...",
              flush=True)
        time_processes(pairs, env, reps, warmup=2)
        print(f"timing {api_reps} rounds of in-process API claims ...", flush=True)
        time_api(pairs, api_reps)
        small = next((p for p in pairs if p.result.shape.name == "small"), None)
        if small is not None:
            print("profiling one claim (state small) ...", flush=True)
            profile = run_profile(small, env, reps=9 if args.quick else 15)
        for pair in pairs:
            print(report.state_summary(pair.result, stats), flush=True)
    finally:
        for pair in pairs:
            pair.registry.close()
        if args.keep:
            print(f"kept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)
    results = [pair.result for pair in pairs]
    run = {"quick": args.quick, "reps": reps, "api_reps": api_reps, "seconds": time.time() - started,
           "load": (load_before, os.getloadavg()), "facts": machine_facts(),
           "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    section = report.render(run, results, profile, stats)
    print(section)
    if not args.no_doc:
        report.write_section(ROOT / "docs" / "benchmarks.md", section)
        print(f"wrote the core section of {ROOT / 'docs' / 'benchmarks.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
