#!/usr/bin/env python3
"""Benchmark of the wiki search: 10,000 generated entries on the registry branch.

Measured:

    build          the first query of a fresh clone: the whole Whoosh index built from
                   the branch (list wiki/, read every entry through cat-file, index it)
    query-api      a warm `wiki.search()` call in one process (index up to date)
    query-cli      `agent-registry wiki query ...` as a whole process, warm index
                   (DESIGN.md target: under 300 ms over 10,000 entries)
    update-10      10 entries changed on the branch (one commit), then the next query:
                   tree diff since the indexed commit + 10 documents re-indexed
    update-10-cli  the same, as a whole `wiki query` process

Entries are generated deterministically (28 topics x 12 components x 14 failures, a
router line, bugs, a 10-line diary naming the session's own functions and modules) by a benchmark-only registry operation, so the 10,000 files land
in one commit without a 10 MB operation trailer.  Results go to the section of
docs/benchmarks.md between ``<!-- wiki:start -->`` and ``<!-- wiki:end -->``.

    .venv/bin/python bench/wiki_bench.py [--entries N] [--reps N] [--no-doc]

A benchmark, not a test: it asserts nothing about time.
"""
from __future__ import annotations

import argparse
import os
import platform
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))

import report  # noqa: E402
import states  # noqa: E402
from agent_registry.registry import Outcome, Registry, operation  # noqa: E402
from agent_registry.wiki import search  # noqa: E402
from agent_registry.wiki.entry import dump_entry, entry_id  # noqa: E402
from agent_registry.wiki.index import WikiIndex  # noqa: E402
from run import stats  # noqa: E402  (the core benchmark's own)
from run import timed as timed_process  # noqa: E402  (one whole process, its git included)

CLI = str(Path(sys.executable).parent / "agent-registry")
QUERIES = ["sqlite database is locked during migration", "token refresh race in the oauth client",
           "flaky test around midnight", "memory leak in websocket handler"]
TOPICS = ["oauth token refresh", "postgres migration", "sqlite locking", "docker image",
          "rate limiter", "csv export", "search pagination", "ci cache", "password reset",
          "django upgrade", "pdf invoices", "stripe webhooks", "react forms", "kubernetes probes",
          "cron scheduling", "s3 uploads", "graphql loaders", "feature flags", "unicode names",
          "redis cache", "websocket reconnect", "dark mode", "celery queue", "tls certificates",
          "pandas report", "accessibility", "two-factor login", "logging pipeline"]
COMPONENTS = ["api", "worker", "scheduler", "frontend", "billing", "accounts", "search",
              "notifications", "reports", "storage", "gateway", "admin"]
FAILURES = ["race condition", "timeout", "memory leak", "deadlock", "off-by-one error",
            "encoding error", "stale cache", "missing index", "wrong time zone", "null pointer",
            "permission denied", "duplicate rows", "lost messages", "slow query"]
VERBS = ["fixed", "refactored", "added", "removed", "optimized", "migrated", "documented",
         "tested", "reproduced", "investigated"]


SYLLABLES = ["ka", "lo", "mi", "ren", "tu", "vax", "zel", "po", "qui", "dra", "sen", "bor",
             "fi", "gul", "hex", "jam", "nor", "pli", "sta", "wen"]


def identifier(rng: random.Random) -> str:
    """A project-specific name (function, class, module): most words of a real diary are
    such names, each shared by a few sessions only."""
    return "_".join("".join(rng.choice(SYLLABLES) for _ in range(2)) for _ in range(2))


def entry_text(n: int, revision: int = 0) -> bytes:
    rng = random.Random(n * 1000 + revision)
    sid = f"bench-{n:05d}"
    topic, component, failure = rng.choice(TOPICS), rng.choice(COMPONENTS), rng.choice(FAILURES)
    names = [identifier(rng) for _ in range(6)]
    lines = [f"prompt: {topic} in the {component} is broken ({failure})",
             *(f"{rng.choice(VERBS)} {rng.choice(names)} in {component}/{rng.choice(names)}.py"
               for _ in range(7)),
             f"cause: {failure} in {rng.choice(names)}", f"tests pass{' (revised)' if revision else ''}"]
    diary = "".join(f"- 2026-01-01T00:{i:02d}:00Z {line}\n" for i, line in enumerate(lines))
    return dump_entry({
        "id": entry_id(sid), "session_id": sid, "provider": rng.choice(["Claude", "Kimi", "Codex"]),
        "model": "m", "date": "2026-01-01T00:00:00Z",
        "router": f"{rng.choice(VERBS)} {topic} in the {component}: {failure}",
        "what": f"{rng.choice(VERBS).capitalize()} the {component} {topic} code ({names[0]})",
        "how": "not documented", "solved": f"{failure} in {component}",
        "files_touched": [f"src/{component}/{names[1]}.py"],
        "bugs": [failure, f"{rng.choice(FAILURES)} in {names[2]}"], "tools": ["pytest"],
        "handoff": "", "git_pushes": [], "status": "Finished", "pending_ingest": False,
        "undocumented": [], "body": f"# Diary of {sid}\n\n{diary}"})


@operation("bench-wiki-load")
def _op_load(registry, view, op):
    for n in op["numbers"] if "numbers" in op else range(op["count"]):
        view.write(f"wiki/bench-{n:05d}.md", entry_text(n, op.get("revision", 0)))
    return Outcome({}, f"bench: write {len(op.get('numbers', [])) or op['count']} wiki entries")


def _cpu() -> float:
    """CPU seconds of this process and of its finished children (the CLI processes and
    the git processes they ran): much less sensitive than wall time to other load."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def timed(fn) -> tuple[float, float]:
    """(wall ms, CPU ms) of fn() in this process (and any children it waits for)."""
    start, cpu = time.perf_counter(), _cpu()
    fn()
    return (time.perf_counter() - start) * 1000, (_cpu() - cpu) * 1000


def run(entries: int, reps: int) -> dict:
    root = Path(tempfile.mkdtemp(prefix="wiki-bench-"))
    try:
        env = states.hermetic_env(root)
        os.environ.update({k: v for k, v in env.items() if k in ("HOME", "GIT_CONFIG_GLOBAL",
                                                                   "GIT_CONFIG_NOSYSTEM")})
        repo = root / "repo"
        states.make_project(repo, env)
        out: dict = {"entries": entries, "load": [os.getloadavg()[0]]}
        with Registry.open(str(repo)) as registry:
            registry.init()
            out["load_s"] = timed(lambda: registry.apply(
                registry._op("bench-wiki-load", count=entries)))[0] / 1000
            out["build"] = [timed(lambda: WikiIndex(registry).open())]
            for q in QUERIES:  # warm-up
                search(registry, q)
            out["query-api"] = [timed(lambda q=q: search(registry, q))
                                for _ in range(reps) for q in QUERIES]
            out["query-cli"], out["floor"], out["cli-floor"] = [], [], []
            for q in QUERIES * max(1, reps // len(QUERIES)):  # alternating: same load
                out["query-cli"].append(timed_process([CLI, "wiki", "query", q], repo, env))
                out["floor"].append(timed_process([sys.executable, "-c", "pass"], repo, env))
                out["cli-floor"].append(timed_process([CLI, "wiki", "--help"], repo, env))
            rng = random.Random(7)
            out["update-10"], out["update-10-cli"] = [], []
            for revision in range(1, reps + 1):
                numbers = rng.sample(range(entries), 10)
                registry.apply(registry._op("bench-wiki-load", numbers=numbers, revision=revision))
                if revision % 2:
                    out["update-10"].append(timed(lambda: search(registry, QUERIES[0])))
                else:
                    out["update-10-cli"].append(timed_process([CLI, "wiki", "query", QUERIES[0]],
                                                              repo, env))
            index = WikiIndex(registry)
            index.open()
            out["load"].append(os.getloadavg()[0])
            out["index_mb"] = sum(f.stat().st_size for f in index.root.rglob("*") if f.is_file()) / 2**20
        return out
    finally:
        shutil.rmtree(root, ignore_errors=True)


def render(result: dict, seconds: float) -> str:
    git_version = subprocess.run(["git", "--version"], capture_output=True, text=True).stdout.split()[-1]
    cli_wall = stats([w for w, _ in result["query-cli"]])["median"]
    cli_cpu = stats([c for _, c in result["query-cli"]])["median"]

    def row(name: str, label: str) -> str:
        wall = stats([w for w, _ in result[name]])
        cpu = stats([c for _, c in result[name]])
        return f"| {label} | {wall['median']:.0f} | {wall['p90']:.0f} | {cpu['median']:.0f} | {wall['n']} |"
    return "\n".join([
        f"## Wiki search: {result['entries']:,} entries",
        "",
        f"_Written by `bench/wiki_bench.py` on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; "
        f"the run took {seconds / 60:.1f} min. Load average {result['load'][0]:.1f} at the start, "
        f"{result['load'][1]:.1f} at the end, on {os.cpu_count()} cores: a machine shared with "
        "other developers' test runs, so wall times are on the high side; CPU time (user + "
        "system, the process and the git processes it ran) is the steadier measure._",
        "",
        f"**Machine:** {platform.python_implementation()} {platform.python_version()}, git "
        f"{git_version}, {platform.system()} {platform.release()}.",
        "",
        f"{result['entries']:,} generated entries (router line, what, bugs, a 10-line diary) "
        f"committed to the branch in one commit ({result['load_s']:.1f} s). The index takes "
        f"{result['index_mb']:.1f} MiB under the git common dir.",
        "",
        "| measurement | wall median ms | wall p90 ms | CPU median ms | runs |",
        "|---|---|---|---|---|",
        row("build", "first query of a fresh clone: full index build"),
        row("query-api", "warm query, library call (`wiki.search`)"),
        row("query-cli", "warm query, whole `agent-registry wiki query` process"),
        row("update-10", "10 entries changed, then a query: tree diff + re-index, library call"),
        row("update-10-cli", "10 entries changed, then a whole `wiki query` process"),
        row("floor", "floor: `python -c pass`, alternating with the CLI queries"),
        row("cli-floor", "floor: `agent-registry wiki --help` (interpreter, click, the CLI and wiki modules, no Whoosh)"),
        "",
        f"The DESIGN.md target for `wiki query` over 10,000 entries is 300 ms as a whole process: "
        f"in this run the median was {cli_wall:.0f} ms wall, {cli_cpu:.0f} ms CPU, so it was "
        f"{'met' if cli_wall < 300 else 'missed' if cli_cpu >= 300 else 'met in CPU time but missed in wall time (the machine was loaded)'}. "
        "Where a warm whole-process query goes: the interpreter and click (the floor rows), the "
        "registry core (as for every command), importing Whoosh (~50-75 ms on a quiet machine, "
        "DESIGN.md), then the query itself (the library row: BM25F scoring in pure Python of "
        "every entry that matches a word of the question). "
        "The incremental update costs the changed entries only (a `git diff-tree` of `wiki/` "
        "since the indexed commit, then Whoosh `update_document` per entry). The full build is "
        "paid once per clone, or after `wiki rebuild` or an interrupted update; it is Whoosh's "
        "pure-Python analysis (tokenize, stop words, stem) of every entry, all blobs having been "
        "read by one `git cat-file --batch` run.",
    ])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--entries", type=int, default=10_000)
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--no-doc", action="store_true", help="print, do not write docs/benchmarks.md")
    args = parser.parse_args()
    start = time.monotonic()
    result = run(args.entries, args.reps)
    section = render(result, time.monotonic() - start)
    print(section)
    if not args.no_doc:
        report.write_section(ROOT / "docs" / "benchmarks.md", section, name="wiki")
    return 0


if __name__ == "__main__":
    sys.exit(main())
