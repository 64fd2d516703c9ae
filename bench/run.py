#!/usr/bin/env python3
"""Benchmark of the registry-branch core (``make bench``): whole-process ``lock acquire``,
``lock check``, ``lock heartbeat`` and ``status`` of agent-registry against the
predecessor's own scripts (``../shared/predecessors/code/``: ``lock_manager.py
acquire|check|heartbeat``, ``registry_manager.py status``), in four states, timed in
rounds: each round runs every command of every tool (in alternating order) in every
state, so a change of load on a shared machine falls on all of them alike:

    small        10 locks (10 sessions x 1)         ~100 commits on the branch
    small-16     the same in the layout `init` gives a new registry (16 lock shards,
                 heartbeats on each clone's own ref)
    locks-10k    10,000 locks (10 sessions x 1,000)  ~100 commits
    sessions-100 10,000 locks (100 sessions x 100)   ~200 commits  (full run only)
    history-100k 10 locks (10 sessions x 1)          100,000 commits

With ``--before REV`` the same commands of agent-registry at commit REV run too (a
``git archive`` of it on PYTHONPATH, the same console script and interpreter), so a
change is measured before and after in one run.  Plus the in-process Python API claim,
and a profile of one whole-process claim.  Results go to the section of
docs/benchmarks.md between ``<!-- core:start -->`` and ``<!-- core:end -->``; the rest of
that file belongs to others and is left as it is.

    .venv/bin/python bench/run.py [--quick] [--reps N] [--states a,b] [--before REV]
                                  [--no-profile] [--keep] [--no-doc]

A benchmark, not a test: it asserts nothing about time.
"""
from __future__ import annotations

import argparse
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

import install  # noqa: E402
import predecessor  # noqa: E402
import profile_claim  # noqa: E402
import report  # noqa: E402
import states  # noqa: E402
from states import CLAIMER, HEARTBEAT_PATH, TTL, Shape  # noqa: E402

SHAPES = [
    Shape("small", sessions=10, locks_each=1, history=100),
    Shape("small-16", sessions=10, locks_each=1, history=24, shards=16),  # `init`'s layout
    Shape("locks-10k", sessions=10, locks_each=1000, history=100),
    Shape("sessions-100", sessions=100, locks_each=100, history=100),
    Shape("history-100k", sessions=10, locks_each=1, history=100_000),
]
QUICK_SKIPS = {"sessions-100"}
COMMANDS = report.COMMANDS
PREDECESSOR = predecessor.code_dir()
FREE_PATH = "src/bench/free.py"  # a `lock check` checks two paths: a held one and this


@dataclass
class StateResult:
    shape: Shape
    commits: int
    layout: str = ""
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
    """One state, every tool: the argv of each command, how to undo a claim, and the
    measurements taken in it.  Tools: ``ours`` (this checkout), ``before`` (the commit
    given with --before, same console script, its code on PYTHONPATH) and
    ``predecessor`` (its own scripts, on a home holding the same sessions and locks)."""

    def __init__(self, repo: Path, home: Path, registry, result: StateResult,
                 tool: install.Install) -> None:
        self.repo, self.home, self.registry, self.result = repo, home, registry, result
        self.tool = tool  # the installation whose console script is measured
        self.held = states.held_path(0, 0)
        self.beaten = time.time()  # the checked holder's last heartbeat (its registration)

    def argv(self, tool: str, command: str, rep: int) -> list[str]:
        claim = f"src/bench/claim{rep:04d}.py"
        if tool == "predecessor":
            path = {"acquire": claim, "check": self.held, "heartbeat": HEARTBEAT_PATH}.get(command, "")
            return predecessor.argv(PREDECESSOR, command, path, CLAIMER, also=(FREE_PATH,))
        # the console script run by the interpreter: `before` puts its code first on the path
        return [self.tool.python, self.tool.cli] + {
            "acquire": ["lock", "acquire", claim, "--session", CLAIMER, "--ttl", str(TTL)],
            "check": ["lock", "check", self.held, FREE_PATH, "--session", CLAIMER],
            "heartbeat": ["lock", "heartbeat", HEARTBEAT_PATH, "--session", CLAIMER],
            "status": ["status"]}[command]

    def env(self, tool: str, env: dict[str, str], before: Path | None) -> dict[str, str]:
        if tool == "predecessor":
            return {**env, "AGENT_REGISTRY_HOME": str(self.home)}
        env = self.tool.env(env)
        return {**env, "PYTHONPATH": str(before)} if tool == "before" else env

    def prepare(self, tool: str, command: str) -> None:
        """Keep the checked holder fresh, as a working agent keeps itself: the
        predecessor's locks go stale after two minutes, ours 600 s after the holder's
        last heartbeat (a run of more states or rounds outlasts that), each renewed
        outside the timed window."""
        if (tool, command) == ("predecessor", "check"):
            predecessor.refresh(PREDECESSOR, self.home, self.repo, self.held, self.held_by)
        elif command == "check" and time.time() - self.beaten > 240:
            self.registry.heartbeat(self.held_by)
            self.beaten = time.time()

    @property
    def held_by(self) -> str:
        return "holder-000"

    def undo(self, tool: str, rep: int) -> None:
        """Release the claim of *rep* in process, outside the timed window, so every
        timed acquire is a fresh claim and the state does not grow."""
        claim = f"src/bench/claim{rep:04d}.py"
        if tool == "predecessor":
            predecessor.release(PREDECESSOR, self.home, self.repo, claim, CLAIMER)
        else:
            self.registry.release(CLAIMER, [claim])


def expected_code(tool: str, command: str) -> int:
    """A `lock check` of two paths, one of them held by another session, exits 1: the
    predecessor's batch contract, and ours."""
    return 1 if command == "check" else 0


def time_processes(pairs: list[Pair], env: dict[str, str], reps: int, warmup: int,
                   tools: tuple[str, ...], before: Path | None) -> None:
    """Whole processes, in rounds: every round visits every state, every command, and
    every tool in an order that turns each round, so a change in the machine's load
    during the run falls on all of them alike and the comparisons stay fair."""
    for pair in pairs:
        for tool in tools:
            for command in COMMANDS:
                pair.result.times[(tool, command)] = []
                pair.result.cpu[(tool, command)] = []
    for rep in range(-warmup, reps):
        for pair in pairs:
            for command in COMMANDS:
                shift = rep % len(tools)
                order = tools[shift:] + tools[:shift]
                for tool in (order if rep % 2 == 0 else order[::-1]):
                    pair.prepare(tool, command)
                    wall, cpu = timed(pair.argv(tool, command, rep + warmup), pair.repo,
                                      pair.env(tool, env, before), expected_code(tool, command))
                    if rep >= 0:
                        pair.result.times[(tool, command)].append(wall)
                        pair.result.cpu[(tool, command)].append(cpu)
                    if command == "acquire":
                        pair.undo(tool, rep + warmup)
        if rep >= 0 and (rep + 1) % 10 == 0:
            print(f"  round {rep + 1}/{reps}", flush=True)


def import_counts(pair: Pair, env: dict[str, str], tools: tuple[str, ...],
                  before: Path | None, reps: int = 5) -> dict:
    """Per command and tool (ours, before): the modules the whole process imports and the
    least ``-X importtime`` total of *reps* runs (ms; a sum of what each first import
    cost), from the same console script."""
    out: dict[tuple[str, str], tuple[int, float]] = {}
    for command in COMMANDS:
        for tool in (t for t in tools if t != "predecessor"):
            best, names = None, set()
            for rep in range(reps):
                argv = pair.argv(tool, command, 9500 + rep)
                proc = subprocess.run([argv[0], "-X", "importtime", *argv[1:]], cwd=pair.repo,
                                      env=pair.env(tool, env, before), capture_output=True,
                                      text=True)
                rows = [line.split("|") for line in proc.stderr.splitlines()
                        if line.startswith("import time:") and "self [us]" not in line]
                names = {row[2].strip() for row in rows}
                total = sum(int(row[0].split(":")[1]) for row in rows) / 1000
                best = total if best is None else min(best, total)
                if command == "acquire":
                    pair.undo(tool, 9500 + rep)
            out[(tool, command)] = (len(names), best or 0.0, "click" in names,
                                    "subprocess" in names, "hashlib" in names)
    return out


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
    env = states.hermetic_env(root)  # without PYTHONDONTWRITEBYTECODE
    env["PYTHONPYCACHEPREFIX"] = str(root / "pycache")
    return env


def machine_facts(tool: install.Install) -> dict[str, str]:
    git = subprocess.run(["git", "--version"], capture_output=True, text=True).stdout.strip()
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    script = Path(tool.cli).read_text(errors="replace")
    pip = subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True,
                         text=True).stdout.split()
    return {"pip": pip[1] if len(pip) > 1 else "?",
            "launcher": "it imports re" if "import re" in script else "it does not import re",
            "install": tool.kind, "nproc": str(os.cpu_count()), "cpu": cpu or platform.processor(),
            "python": platform.python_version(), "git": git.removeprefix("git version "),
            "os": f"{platform.system()} {platform.release()}"}


def run_profile(pair: Pair, env: dict[str, str], reps: int) -> dict:
    argv = lambda i: ["lock", "acquire", f"src/prof/claim{i:04d}.py", "--session", CLAIMER]
    release = lambda i: pair.registry.release(CLAIMER, [f"src/prof/claim{i:04d}.py"])
    python, env = pair.tool.python, pair.tool.env(env)
    out = {"phases": profile_claim.phase_table(argv, pair.repo, env, release, reps, python),
           "imports": profile_claim.import_table(argv(9000), pair.repo, env, python=python),
           "floor": profile_claim.interpreter_floor(python=python)}
    release(9000)
    out["strace"] = profile_claim.strace_summary(argv(9001), pair.repo, env, python)
    release(9001)
    out["cprofile"] = profile_claim.cprofile_top(argv(9002), pair.repo, env, python=python)
    release(9002)
    # as this sandbox's shells run it: no bytecode written; none cached for the project's
    # own modules if editable (each run compiles them), pip's if a plain install
    out["install"] = pair.tool.kind
    cold_env = {k: v for k, v in env.items() if k != "PYTHONPYCACHEPREFIX"}
    cold_env["PYTHONDONTWRITEBYTECODE"] = "1"
    out["project_pycache"] = (ROOT / "agent_registry" / "__pycache__").is_dir()
    cold = []
    for i in range(max(3, reps // 2)):
        cold.append(timed([pair.tool.cli, *argv(9100 + i)], pair.repo, cold_env)[0])
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
        runs = [("cli", [pair.tool.cli, "lock", "acquire", path, "--session", CLAIMER,
                         "--ttl", str(TTL)]),
                ("bare", [pair.tool.python, "-c", BARE_CLAIM, CLAIMER, path])]
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
    parser.add_argument("--before", metavar="REV",
                        help="also time agent-registry as of commit REV (before a change)")
    parser.add_argument("--no-profile", action="store_true", help="skip the profile of one claim")
    parser.add_argument("--keep", action="store_true", help="keep the temporary repositories")
    parser.add_argument("--no-doc", action="store_true", help="print only; leave docs/benchmarks.md")
    install.add_option(parser)
    args = parser.parse_args(argv)
    reps = args.reps or (10 if args.quick else 30)
    api_reps = 20 if args.quick else 30
    wanted = set(args.states.split(",")) if args.states else None
    if wanted and wanted - {s.name for s in SHAPES}:
        parser.error(f"unknown state(s): {', '.join(sorted(wanted - {s.name for s in SHAPES}))}")
    shapes = [s for s in SHAPES if (s.name in wanted if wanted else
                                    not (args.quick and s.name in QUICK_SKIPS))]

    if PREDECESSOR is None:
        parser.error("the predecessor's scripts were not found: set AGENT_REGISTRY_PREDECESSOR "
                     "to the folder holding lock_manager.py and registry_manager.py")
    try:
        import yaml  # noqa: F401  (the predecessor's scripts need PyYAML)
    except ImportError:
        parser.error(f"the predecessor's scripts need PyYAML: {sys.executable} -m pip install pyyaml")
    tool = install.chosen(args)
    root = Path(tempfile.mkdtemp(prefix="agent-registry-bench-"))
    env = bench_env(root)
    tools: tuple[str, ...] = ("ours", "predecessor")
    before = None
    if args.before:
        before = root / "before"
        before.mkdir()
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", args.before],
                                 stdout=subprocess.PIPE, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(before)], input=archive, check=True)
        tools = ("ours", "before", "predecessor")
        revision = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", args.before],
                                  capture_output=True, text=True, check=True).stdout.strip()
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
            holders = {f"holder-{i:03d}": [states.held_path(i, j) for j in range(shape.locks_each)]
                       for i in range(shape.sessions)}
            home = predecessor.build(PREDECESSOR, root / shape.name / "home-predecessor", repo,
                                     holders, CLAIMER, [HEARTBEAT_PATH])
            result = StateResult(shape, states.commit_count(repo, env), build_seconds=time.time() - t0,
                                 layout=states.layout(repo))
            pairs.append(Pair(repo, home, Registry.open(str(repo)), result, tool))
            print(f"[{shape.name}] built in {result.build_seconds:.0f} s ({result.commits:,} commits)",
                  flush=True)
        print(f"timing {reps} rounds x {len(pairs)} states x {len(COMMANDS)} commands x "
              f"{len(tools)} tools ...", flush=True)
        time_processes(pairs, env, reps, 2, tools, before)
        print(f"timing {api_reps} rounds of in-process API claims ...", flush=True)
        time_api(pairs, api_reps)
        small = next((p for p in pairs if p.result.shape.name == "small"), None)
        imports = None
        if small is not None:
            print("counting imports (state small) ...", flush=True)
            imports = import_counts(small, env, tools, before)
        if small is not None and not args.no_profile:
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
    run = {"quick": args.quick, "reps": reps, "tools": tools,
           "before": f"{revision} ({args.before})" if args.before else None, "api_reps": api_reps, "seconds": time.time() - started,
           "load": (load_before, os.getloadavg()), "facts": machine_facts(tool),
           "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    run["imports"] = imports
    section = report.render(run, results, profile, stats)
    print(section)
    if not args.no_doc:
        report.write_section(ROOT / "docs" / "benchmarks.md", section)
        print(f"wrote the core section of {ROOT / 'docs' / 'benchmarks.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
