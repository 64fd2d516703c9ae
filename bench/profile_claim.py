"""Where the time of one whole-process ``agent-registry lock acquire`` goes.

Four views of the same command, run against a prepared repository:

* phases: the command runs under a small runner (claim_runner.py) that imports the CLI,
  wraps the library's git-facing functions with timers (exclusive time: a phase's
  children are not counted twice), runs the click-free path and reports; interpreter start and
  exit are what the outer clock sees around it;
* imports: ``python -X importtime`` of the real console script;
* processes and syscalls: ``strace -f`` (execve and ``-c``) when strace is available;
* Python hot spots: ``cProfile`` of the real console script.

Nothing in agent_registry is changed: the wrappers live in this process only.
"""
from __future__ import annotations

import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

RUNNER = Path(__file__).resolve().parent / "claim_runner.py"


# -- the inner runner ---------------------------------------------------------------

# -- the outer measurements ---------------------------------------------------------

def _run_inner(argv: list[str], cwd: Path, env: dict[str, str], python: str) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        report_file = Path(tmp, "report.json")
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.time()
        proc = subprocess.run([python, str(RUNNER), str(report_file), *argv],
                              cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        ended = time.time()
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if proc.returncode != 0 or not report_file.exists():
            raise RuntimeError(f"inner run failed: {proc.stderr.decode()}")
        report = json.loads(report_file.read_text())
    total_cpu = (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000
    report["startup"] = [(report["first"] - started) * 1000, report["first_cpu"]]
    report["exit"] = [(ended - report["last"]) * 1000, total_cpu - report["last_cpu"]]
    report["total"] = [(ended - started) * 1000, total_cpu]
    return report


def phase_table(claim_argv, cwd: Path, env: dict[str, str], release, reps: int,
                python: str = sys.executable) -> dict:
    """Median (wall ms, CPU ms) of each phase over *reps* instrumented claims (*release*
    undoes each), run by *python* (the interpreter of the installation measured)."""
    runs = []
    for i in range(reps):
        runs.append(_run_inner(claim_argv(i), cwd, env, python))
        release(i)
    med = lambda pairs: (statistics.median(p[0] for p in pairs), statistics.median(p[1] for p in pairs))
    rows = [("interpreter start (python, site, .pth files)", *med([r["startup"] for r in runs]), 1),
            ("import re + agent_registry.cli.fast", *med([r["import re + agent_registry.cli.fast"] for r in runs]), 1),
            ("import the core modules", *med([r["import the core modules"] for r in runs]), 1)]
    for label in sorted({k for r in runs for k in r["wall"]}):
        calls = max(r["calls"].get(label, 0) for r in runs)
        if label.startswith("start git cat-file"):  # asked on every read, spawns once
            calls = runs[-1]["spawned"].count("git cat-file")
        rows.append((label, *med([(r["wall"].get(label, 0.0), r["cpu"].get(label, 0.0)) for r in runs]), calls))
    rest = [(r["main"][0] - sum(r["wall"].values()), r["main"][1] - sum(r["cpu"].values())) for r in runs]
    rows.append(("other Python (parsing, paths, decisions, output)", *med(rest), 1))
    rows.append(("interpreter exit", *med([r["exit"] for r in runs]), 1))
    return {"rows": rows, "total": med([r["total"] for r in runs]),
            "spawned": runs[-1]["spawned"], "reps": reps}


# modules whose first import on the claim path is worth naming (cumulative: what that
# import costs given everything imported before it)
WATCHED = ("click", "secrets", "socket", "tempfile", "subprocess", "importlib.resources",
           "dataclasses", "json", "datetime", "zlib", "ruamel.yaml", "yaml", "filelock")


def import_table(argv: list[str], cwd: Path, env: dict[str, str], reps: int = 7,
                 python: str = sys.executable) -> list[tuple[str, float]]:
    """Import costs (ms) of the real console script from ``-X importtime``: the smallest
    of *reps* runs, the figure least disturbed by other load."""
    script = Path(python).parent / "agent-registry"
    groups: dict[str, list[float]] = defaultdict(list)
    for _ in range(reps):
        proc = subprocess.run([python, "-X", "importtime", str(script), *argv], cwd=cwd,
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        seen: dict[str, float] = defaultdict(float)
        for line in proc.stderr.splitlines():
            m = re.match(r"import time:\s+(\d+) \|\s+(\d+) \| (\s*)(\S+)", line)
            if not m:
                continue
            self_ms, cum_ms, top_level, name = int(m[1]) / 1000, int(m[2]) / 1000, not m[3], m[4]
            if top_level:
                seen["all imports"] += cum_ms
            if name == "site" and top_level:
                seen["site (.pth files included)"] += cum_ms
            if name.startswith("__editable__"):
                seen["editable-install finder (.pth)"] += cum_ms
            if name.startswith("agent_registry"):
                seen["agent_registry's own modules (self time)"] += self_ms
            if name in WATCHED:
                seen[name] += cum_ms
        for key, value in seen.items():
            groups[key].append(value)
    return [(key, min(values)) for key, values in groups.items()]


def strace_summary(argv: list[str], cwd: Path, env: dict[str, str],
                   python: str = sys.executable) -> dict | None:
    """Processes executed and syscall counts of one run, or None without strace."""
    if not shutil.which("strace"):
        return None
    script = Path(python).parent / "agent-registry"
    with tempfile.TemporaryDirectory() as tmp:
        trace = Path(tmp, "execve")
        proc = subprocess.run(["strace", "-f", "-qq", "-e", "trace=execve", "-o", str(trace),
                               str(script), *argv], cwd=cwd, env=env, capture_output=True)
        if proc.returncode != 0 or not trace.exists():
            return None
        programs = []
        for line in trace.read_text().splitlines():
            m = re.search(r'execve\("([^"]+)", \["[^"]*"(?:, "([^"]*)")?.*\) = 0$', line)
            if m:
                programs.append(os.path.basename(m[1]) + (f" {m[2]}" if m[2] else ""))
        failed_lookups = sum(1 for line in trace.read_text().splitlines() if "ENOENT" in line)
        return {"programs": programs, "failed_execve": failed_lookups,
                "syscalls": _syscall_counts(script, argv, cwd, env, Path(tmp))}


def _syscall_counts(script: Path, argv, cwd, env, tmp: Path) -> dict[str, int]:
    out = tmp / "counts"
    subprocess.run(["strace", "-f", "-c", "-o", str(out), str(script), *argv], cwd=cwd, env=env,
                   capture_output=True)
    counts = {}
    for line in out.read_text().splitlines() if out.exists() else []:
        parts = line.split()
        if len(parts) >= 5 and parts[0][0].isdigit() and parts[-1] != "total":
            counts[parts[-1]] = int(parts[3])
        elif parts and parts[-1] == "total":
            counts["total"] = int(parts[3 if len(parts) >= 5 else 2])
    return counts


PROFILED_MAIN = ("import cProfile, sys\nprofile = cProfile.Profile()\nprofile.enable()\n"
                 "import re\nfrom agent_registry.cli.fast import execute, parse\n"
                 "execute(parse(sys.argv[2:]))\nprofile.disable()\n"
                 "profile.dump_stats(sys.argv[1])\n")


def cprofile_top(argv: list[str], cwd: Path, env: dict[str, str], limit: int = 8,
                 python: str = sys.executable) -> list[tuple]:
    """(function, calls, own ms, cumulative ms) by own time, from one cProfile run of the
    command's imports and the click-free path (the console script leaves by os._exit, which
    would skip cProfile's own output)."""
    with tempfile.TemporaryDirectory() as tmp:
        stats_file = Path(tmp, "claim.prof")
        proc = subprocess.run([python, "-c", PROFILED_MAIN, str(stats_file), *argv],
                              cwd=cwd, env=env, capture_output=True)
        if proc.returncode != 0 or not stats_file.exists():
            raise RuntimeError(f"cProfile run failed: {proc.stderr.decode()}")
        import pstats
        stats = pstats.Stats(str(stats_file)).stats  # type: ignore[attr-defined]
    rows = []
    for (filename, line, func), (_, calls, own, cum, _) in stats.items():
        where = f"{Path(filename).name}:{line}" if line else filename
        rows.append((f"{func} ({where})", calls, own * 1000, cum * 1000))
    return sorted(rows, key=lambda r: -r[2])[:limit]


def interpreter_floor(reps: int = 9, python: str = sys.executable) -> dict[str, tuple[float, float]]:
    """Median (wall ms, CPU ms) of a bare interpreter, with this venv's site (.pth
    files) and without, and of one small git process."""
    import resource
    out = {}
    for label, argv in (("python -c pass", [python, "-c", "pass"]),
                        ("python -S -c pass", [python, "-S", "-c", "pass"]),
                        ("python -I -c pass", [python, "-I", "-c", "pass"]),
                        ("git rev-parse --git-dir", ["git", "rev-parse", "--git-dir"])):
        walls, cpus = [], []
        for _ in range(reps):
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            start = time.perf_counter()
            subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
            walls.append((time.perf_counter() - start) * 1000)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpus.append((after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000)
        out[label] = (statistics.median(walls), statistics.median(cpus))
    return out
