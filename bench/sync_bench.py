"""Sync benchmark: claims confirmed through a remote, and how cost grows with clones.

    python bench/sync_bench.py [--quick]

1. Latency of one `lock acquire` (whole process) in a clone whose registry syncs with a
   local bare remote, against the same command in a clone with sync off (the baseline in
   the same run, alternating).
2. N clones (N = 1, 4, 16) of one bare remote, each making 20 claims on distinct paths at
   the same time (one process per claim, as agents do): total wall time, claims per
   second, and push attempts per claim (1 = no retry), read from each clone's sync state.

Writes the section between `<!-- sync:start -->` and `<!-- sync:end -->` of
docs/benchmarks.md.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
import install  # noqa: E402
from report import write_section  # noqa: E402
from states import hermetic_env, make_project  # noqa: E402

CLI = str(Path(sys.executable).parent / "agent-registry")


def git(cwd: Path, env: dict, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True,
                          capture_output=True, text=True).stdout


def cli(cwd: Path, env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([CLI, *args], cwd=cwd, env=env, capture_output=True, text=True)


def attempts(clone: Path) -> int:
    state = json.loads((clone / ".git" / "agent-registry" / "sync.json").read_text())
    return int(state.get("last_push_attempts", 1))


def setup(root: Path, env: dict, clones: int) -> tuple[Path, list[Path]]:
    seed, bare = root / "seed", root / "remote.git"
    seed.mkdir(parents=True)
    make_project(seed, env)
    git(root, env, "init", "-q", "--bare", str(bare))
    git(seed, env, "push", "-q", str(bare), "HEAD:main")
    out = []
    for i in range(clones):
        clone = root / f"c{i}"
        git(root, env, "clone", "-q", str(bare), str(clone))
        r = cli(clone, env, "register", f"s{i}", "--provider", "bench", "--working-on", "bench")
        assert r.returncode == 0, r.stderr
        out.append(clone)
    return bare, out


def latency(root: Path, env: dict, reps: int) -> dict[str, list[float]]:
    _, (synced,) = setup(root / "latency", env, 1)
    local = root / "local"
    local.mkdir()
    make_project(local, env)
    cli(local, env, "register", "s0", "--provider", "bench", "--working-on", "bench")
    times: dict[str, list[float]] = {"synced": [], "local": []}
    for i in range(reps):
        for name, where in (("synced", synced), ("local", local)):
            start = time.perf_counter()
            r = cli(where, env, "lock", "acquire", f"lat/{i}.py", "--session", "s0")
            times[name].append((time.perf_counter() - start) * 1000)
            assert r.returncode == 0, r.stderr
    return times


def fan_in(root: Path, env: dict, n: int, claims: int) -> dict:
    bare, clones = setup(root / f"fan{n}", env, n)
    tries: list[int] = []
    failures: list[str] = []
    lock = threading.Lock()

    def agent(i: int, clone: Path) -> None:
        for k in range(claims):
            r = cli(clone, env, "lock", "acquire", f"n{n}/c{i}/f{k}.py", "--session", f"s{i}")
            with lock:
                if r.returncode != 0:
                    failures.append(r.stderr.strip())
                else:
                    tries.append(attempts(clone))

    threads = [threading.Thread(target=agent, args=(i, c)) for i, c in enumerate(clones)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - start
    return {"n": n, "claims": n * claims, "wall": wall, "failures": failures,
            "held": len(remote_locks(root / f"fan{n}", bare, env)), "tries": tries}


def remote_locks(root: Path, bare: Path, env: dict) -> list[dict]:
    """The locks a fresh clone of *bare* sees after a sync (in whatever layout the
    registry is: one branch, or lock shards)."""
    check = root / "verify"
    git(root, env, "clone", "-q", str(bare), str(check))
    assert cli(check, env, "sync").returncode == 0
    data = json.loads(cli(check, env, "--json", "lock", "list").stdout)
    return data if isinstance(data, list) else data.get("locks", [])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions and claims")
    install.add_option(parser)
    args = parser.parse_args()
    global CLI
    tool = install.chosen(args)
    CLI = tool.cli
    reps, claims = (10, 5) if args.quick else (30, 20)
    with tempfile.TemporaryDirectory(prefix="sync-bench-") as tmp:
        root = Path(tmp)
        env = hermetic_env(root)
        lat = latency(root, env, reps)
        fans = [fan_in(root, env, n, claims) for n in (1, 4, 16)]
    med = {k: statistics.median(v) for k, v in lat.items()}
    lines = [
        "## Sync: claims confirmed through a remote",
        "",
        f"`bench/sync_bench.py{' --quick' if args.quick else ''}`, "
        f"{time.strftime('%Y-%m-%d')}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}, {git(root.parent, env, 'version').strip()}; "
        "the remote is a bare repository on the same disk (no network latency); ours: "
        + ("the checkout (`.venv`, `--checkout`)." if tool.kind == "checkout" else
           "a plain install (a wheel of the checkout in a fresh venv, `bench/install.py`)."),
        "",
        "| `lock acquire`, whole process | median ms | p90 ms |",
        "|---|---|---|",
    ]
    for name, label in (("local", "sync off (baseline, same run)"),
                        ("synced", "fetch + replay + push to the remote")):
        values = sorted(lat[name])
        lines.append(f"| {label} | {med[name]:.0f} | {values[int(len(values) * 0.9) - 1]:.0f} |")
    lines += ["", f"Confirming a claim through the remote costs {med['synced'] - med['local']:.0f} ms "
              f"more than a local claim ({med['synced'] / med['local']:.1f}x).", "",
              f"N clones, each making {claims} claims on distinct paths at once "
              "(one process per claim):", "",
              "| clones | claims | wall s | claims/s | push attempts per claim: mean | max | failed |",
              "|---|---|---|---|---|---|---|"]
    for f in fans:
        tries = f["tries"] or [0]
        lines.append(f"| {f['n']} | {f['claims']} | {f['wall']:.1f} | {f['claims'] / f['wall']:.1f} | "
                     f"{statistics.mean(tries):.2f} | {max(tries)} | {len(f['failures'])} |")
    one, many = fans[0], fans[-1]
    lines += ["", f"Every claim landed: {all(not f['failures'] and f['held'] == f['claims'] for f in fans)} (each confirmed, and held as a fresh clone of the remote sees it). Throughput is bounded "
              f"by the remote, which takes one push at a time: {one['claims'] / one['wall']:.1f} claims/s "
              f"with one clone, {many['claims'] / many['wall']:.1f} claims/s with {many['n']} racing; "
              "each lost race costs a fetch, a replay and another push, so attempts per claim grow "
              "with N while the jittered backoff keeps them bounded."]
    write_section(ROOT / "docs" / "benchmarks.md", "\n".join(lines), name="sync")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
