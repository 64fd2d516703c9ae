"""Where the slowest claims of a benchmark spent their time (issue 35), from the phase
trace each claim process writes with ``AGENT_REGISTRY_SYNC_TRACE`` (agent_registry/
sync/trace.py).

The benchmark adds two lines of its own to each claim's file: ``spawn`` (just before it
started the process) and ``answered`` (just after it exited), so the gap between
``spawn`` and the process's first line is the interpreter, the imports and opening the
registry, and the gap after its last line the exit.
"""
from __future__ import annotations

import time
from pathlib import Path

# the columns of a breakdown, in the order a claim meets them
COLUMNS = ("total", "start", "fetch", "push ok", "push lost", "sleep", "intent",
           "flock wait", "flock held", "exit", "other")


def mark(file: Path, phase: str) -> None:
    """The benchmark's own line (``spawn``, ``answered``) in a claim's trace."""
    now = time.time()
    with open(file, "a", encoding="utf-8") as f:
        f.write(f"{now:.4f}\t{now:.4f}\t{phase}\t\n")


def read(file: Path) -> list[tuple[float, float, str, str]]:
    """(start, end, phase, detail) of each line of *file*."""
    out = []
    for line in file.read_text(encoding="utf-8").splitlines():
        fields = line.split("\t")
        if len(fields) == 4:
            out.append((float(fields[0]), float(fields[1]), fields[2], fields[3]))
    return out


def breakdown(lines: list[tuple[float, float, str, str]]) -> dict:
    """Seconds per column of one claim, with the counts of fetches, pushes lost,
    waiting polls and carries (another clone's intent carried once its own claim
    landed: sync/remote.carry_now).  A flock held while publishing an intent counts in ``intent``."""
    spawn = next(s for s, _, p, _ in lines if p == "spawn")
    answered = next(e for _, e, p, _ in lines if p == "answered")
    own = [x for x in lines if x[2] not in ("spawn", "answered")]
    out = dict.fromkeys(COLUMNS, 0.0)
    out["total"] = answered - spawn
    out["start"] = (own[0][0] - spawn) if own else out["total"]
    out["exit"] = (answered - max(e for _, e, _, _ in own)) if own else 0.0
    intents = [(s, e) for s, e, p, _ in own if p == "intent"]
    counts = {"fetches": 0, "lost": 0, "waiting polls": 0, "carries": 0}
    for s, e, phase, detail in own:
        if phase == "carry":  # its fetch and push are counted in their columns
            counts["carries"] += 1
        elif phase == "fetch":
            out["fetch"] += e - s
            counts["fetches"] += 1
        elif phase == "push":
            out["push ok" if detail == "ok" else "push lost"] += e - s
            counts["lost"] += detail != "ok"
        elif phase in ("sleep", "intent"):
            out[phase] += e - s
        elif phase == "poll" and detail.startswith("waiting"):
            counts["waiting polls"] += 1
        elif phase == "flock" and not any(a <= s and e <= b for a, b in intents):
            words = detail.split()
            wait, held = float(words[1]), float(words[3])
            out["flock wait"] += wait
            out["flock held"] += held
    out["other"] = out["total"] - sum(out[c] for c in COLUMNS[1:-1])
    return {**out, **counts}


def report(files: list[Path], slowest: int = 5) -> list[str]:
    """Markdown lines: the *slowest* claims' breakdowns, and the mean over all of them."""
    rows = []
    for file in files:
        try:
            rows.append((file.stem, breakdown(read(file))))
        except (OSError, StopIteration, ValueError, IndexError):
            continue  # a claim whose trace is incomplete (it failed before its sync)
    if not rows:
        return []
    rows.sort(key=lambda r: -r[1]["total"])
    extra = ("fetches", "lost", "waiting polls", "carries")
    head = ["claim", *COLUMNS, *extra]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]

    def row(name: str, b: dict) -> str:
        return "| " + " | ".join([name, *(f"{b[c]:.2f}" for c in COLUMNS),
                                  *(f"{b[c]:g}" for c in extra)]) + " |"
    lines += [row(name, b) for name, b in rows[:slowest]]
    mean = {k: sum(b[k] for _, b in rows) / len(rows) for k in (*COLUMNS, *extra)}
    lines.append(row(f"mean of {len(rows)}", mean))
    worst = next(f for f in files if f.stem == rows[0][0])
    return lines + ["", f"The slowest, {worst.stem}, phase by phase (seconds from the spawn):",
                    "", *timeline(read(worst))]


def timeline(lines: list[tuple[float, float, str, str]]) -> list[str]:
    """One claim's phases, each ``start-end phase detail`` from its spawn."""
    spawn = lines[0][0]
    return [f"    {s - spawn:6.2f}-{e - spawn:6.2f} {phase} {detail}".rstrip()
            for s, e, phase, detail in sorted(lines, key=lambda x: (x[1], x[0]))]
