"""CPU time of one claim through a remote, both ends counted.

    python bench/claim_cpu.py [--claims 40] [--shards 16]

One clone of a bare remote reached by path, so git runs `upload-pack` and `receive-pack`
as children of the claim's own git processes: the CPU time of every process a claim
starts, the remote's side included, is in this process's RUSAGE_CHILDREN.  The clone
claims distinct paths back to back, one `agent-registry lock acquire` process each.
Divided by the claims, it says how many claims a second a machine's cores can carry at
most, whatever the number of clones (bench/scale_bench.py measures them through a delay
line whose own relaying also costs CPU).  Writes the section `claim-cpu` of
docs/benchmarks.md.
"""
from __future__ import annotations

import argparse
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
from report import write_section  # noqa: E402
from states import hermetic_env, make_project  # noqa: E402

CLI = str(Path(sys.executable).with_name("agent-registry"))


def run(cwd: Path, env: dict, *args: str) -> None:
    proc = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"{' '.join(args)}: {proc.stderr.strip()}")


def measure(root: Path, claims: int, shards: int) -> dict:
    """CPU seconds (user, system) and wall seconds per claim on a fresh remote."""
    env = hermetic_env(root)
    repo = root / "project"
    make_project(repo, env)
    run(root, env, "git", "init", "-q", "--bare", "remote.git")
    run(repo, env, "git", "remote", "add", "origin", str(root / "remote.git"))
    run(repo, env, "git", "push", "-q", "origin", "main")
    run(repo, env, CLI, "init")
    if shards:
        run(repo, env, CLI, "shard", "--count", str(shards))
    run(repo, env, CLI, "register", "bench-1", "--provider", "Codex")
    before, start = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    for i in range(claims):
        run(repo, env, CLI, "lock", "acquire", f"dir{i}/sub/file.py", "--session", "bench-1")
    wall, after = time.perf_counter() - start, resource.getrusage(resource.RUSAGE_CHILDREN)
    user, system = after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime
    return {"user": user / claims, "system": system / claims, "wall": wall / claims}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--claims", type=int, default=40, help="claims to time")
    parser.add_argument("--shards", type=int, default=16, help="lock shards (0: one branch)")
    args = parser.parse_args()
    rows = []
    for shards in dict.fromkeys((0, args.shards)):
        with tempfile.TemporaryDirectory() as tmp:
            got = measure(Path(tmp), args.claims, shards)
        cpu = got["user"] + got["system"]
        rows.append(f"| {f'{shards} lock shards' if shards else 'one branch'} | {cpu:.3f} | "
                    f"{got['user']:.3f} | {got['system']:.3f} | {got['wall']:.3f} | "
                    f"{os.cpu_count() / cpu:.1f} |")
    version = subprocess.run(["git", "--version"], capture_output=True, text=True).stdout.strip()
    section = "\n".join([
        "## CPU of one claim, both ends",
        "",
        f"`bench/claim_cpu.py --claims {args.claims} --shards {args.shards}`, "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}, {version}. One clone of a bare remote reached "
        "by path (no delay line), one `lock acquire` process per claim, back to back; the "
        "CPU time of every process a claim starts, the remote's `receive-pack` and "
        "`upload-pack` included. \"Ceiling\" is the claims a second this machine's cores "
        "could carry at that cost, were nothing else running.",
        "",
        "| layout | CPU s per claim | user s | system s | wall s | ceiling, claims/s |",
        "|---|---|---|---|---|---|",
        *rows,
    ])
    write_section(ROOT / "docs" / "benchmarks.md", section, "claim-cpu")
    print(section)


if __name__ == "__main__":
    main()
