#!/usr/bin/env python3
"""The baseline the benchmark compares against: a plain flock-and-file lock CLI in the
predecessor tool's design (its 0.2+ lock manager and per-session registry), written for
this benchmark with argparse and PyYAML.  No git.

Layout under the home directory (``--home``, else ``$AGENT_REGISTRY_HOME``)::

    locks/<sha1(realpath)>.lock   one file per locked path; its JSON content is the state
    sessions/<session_id>.yaml    one YAML file per session (do_not_touch, space, ...)
    registry.md                   view re-rendered from every session file on each write
    registry.md.lock              flock guarding session and view writes; never renamed

As in the predecessor, ``flock`` only guards the critical section; who owns a path is the
content of its lock file, which outlives the process.  A lock is stale when its
heartbeat is older than its timeout (default 120 s).  ``acquire`` then records the path in
the session's ``do_not_touch`` and ``space`` lists and re-renders ``registry.md``, in the
same operation.  ``status`` reads every session file.

It is meant to be a fair opponent: it uses libyaml's C loader/dumper when available,
writes files in place under flock (no fsync, as our git object writes have none) and
does nothing the job does not need.

    baseline_flock.py [--home DIR] acquire PATH SESSION_ID [--timeout S]
    baseline_flock.py [--home DIR] release PATH SESSION_ID
    baseline_flock.py [--home DIR] check PATH... [--session-id S]
    baseline_flock.py [--home DIR] status [--status S] [--provider P] [--project P]

Exit codes: 0 done, 1 held by another session / not the owner, 2 bad usage.
"""
from __future__ import annotations

import argparse
import fcntl
import hashlib
import json
import os
import sys
import time
from contextlib import contextmanager
from datetime import datetime, timezone
from typing import Iterable, Iterator

import yaml

Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
Dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
DEFAULT_TIMEOUT = 120


def now_iso(ts: float) -> str:
    return datetime.fromtimestamp(int(ts), timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_iso(text: str) -> float:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc).timestamp()


def home_dir(explicit: str | None) -> str:
    return explicit or os.environ.get("AGENT_REGISTRY_HOME") or os.path.expanduser("~/.agent-registry")


def lock_file(home: str, path: str) -> str:
    return os.path.join(home, "locks", hashlib.sha1(os.path.realpath(path).encode()).hexdigest() + ".lock")


def session_file(home: str, sid: str) -> str:
    return os.path.join(home, "sessions", sid + ".yaml")


@contextmanager
def flocked(path: str) -> Iterator[int]:
    """An exclusive flock on *path* (created if missing), held for the block only."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield fd
    finally:
        os.close(fd)


def read_fd(fd: int) -> dict | None:
    raw = os.pread(fd, 1 << 16, 0)
    if not raw.strip():
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return None  # a torn or foreign file counts as free, as in the predecessor


def write_fd(fd: int, data: dict) -> None:
    body = json.dumps(data).encode()
    os.ftruncate(fd, 0)
    os.pwrite(fd, body, 0)


def is_stale(record: dict, at: float) -> bool:
    return at - parse_iso(record["heartbeat_at"]) > record.get("timeout", DEFAULT_TIMEOUT)


def write_atomic(path: str, text: str) -> None:
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as out:
        out.write(text)
    os.replace(tmp, path)


def load_sessions(home: str) -> list[dict]:
    folder = os.path.join(home, "sessions")
    out = []
    for name in sorted(os.listdir(folder)) if os.path.isdir(folder) else []:
        if name.endswith(".yaml"):
            with open(os.path.join(folder, name), encoding="utf-8") as f:
                data = yaml.load(f, Loader=Loader)
            if isinstance(data, dict):
                out.append(data)
    return out


def render_view(home: str, at: float) -> None:
    """registry.md rebuilt from every session file, as the predecessor did on each write."""
    sessions = load_sessions(home)
    live = [s for s in sessions if s.get("status") == "OnWorking"]
    front = yaml.dump({"updated_at": now_iso(at), "sessions": len(sessions), "live": len(live)},
                      Dumper=Dumper, sort_keys=False)
    cell = lambda v: str(v if v is not None else "").replace("|", "\\|").replace("\n", " ")
    rows = ["| " + " | ".join(cell(s.get(k)) for k in
                              ("session_id", "provider", "project", "working_on", "status")) +
            " | " + cell(", ".join(s.get("do_not_touch") or [])) + " |" for s in sessions]
    text = ("---\n" + front + "---\n\n| Session | Provider | Project | Working on | Status | "
            "Do not touch |\n|---|---|---|---|---|---|\n" + "\n".join(rows) + "\n")
    write_atomic(os.path.join(home, "registry.md"), text)


def update_session(home: str, sid: str, at: float, add: Iterable[str] = (),
                   remove: Iterable[str] = ()) -> bool:
    """Keep the session's do_not_touch (and space) in step with its locks; re-render the
    view.  Best effort, as in the predecessor: False when the session is unknown."""
    with flocked(os.path.join(home, "registry.md.lock")):
        path = session_file(home, sid)
        try:
            with open(path, encoding="utf-8") as f:
                session = yaml.load(f, Loader=Loader) or {}
        except FileNotFoundError:
            return False
        blocked = session.get("do_not_touch") or []
        space = session.get("space") or []
        for item in add:
            if item not in blocked:
                blocked.append(item)
            if item not in space:
                space.append(item)
        gone = set(remove)
        session["do_not_touch"] = [p for p in blocked if p not in gone]
        session["space"] = space
        session["updated_at"] = now_iso(at)
        write_atomic(path, yaml.dump(session, Dumper=Dumper, sort_keys=False, allow_unicode=True))
        render_view(home, at)
    return True


def acquire(home: str, paths: list[str], sid: str, timeout: int = DEFAULT_TIMEOUT,
            at: float | None = None) -> tuple[list[str], dict | None]:
    """Claim each path in turn (the predecessor claims one path per call; the benchmark
    builds large states with many).  Returns (acquired, blocking record or None)."""
    at = time.time() if at is None else at
    os.makedirs(os.path.join(home, "locks"), exist_ok=True)
    acquired: list[str] = []
    for path in paths:
        with flocked(lock_file(home, path)) as fd:
            record = read_fd(fd)
            if record and record["session_id"] != sid and not is_stale(record, at):
                blocker = record
                break
            write_fd(fd, {"path": path, "session_id": sid, "pid": os.getppid(),
                          "acquired_at": now_iso(at), "heartbeat_at": now_iso(at),
                          "timeout": timeout})
            acquired.append(path)
    else:
        blocker = None
    if acquired:
        update_session(home, sid, at, add=acquired)
    return acquired, blocker


def release(home: str, paths: list[str], sid: str, at: float | None = None) -> list[str]:
    at = time.time() if at is None else at
    released = []
    for path in paths:
        name = lock_file(home, path)
        if not os.path.exists(name):
            continue
        with flocked(name) as fd:
            record = read_fd(fd)
            if record and record["session_id"] == sid:
                os.ftruncate(fd, 0)  # the file stays: it is the flock's stable object
                released.append(path)
    if released:
        update_session(home, sid, at, remove=released)
    return released


def check(home: str, paths: list[str], sid: str | None, at: float | None = None) -> list[dict]:
    at = time.time() if at is None else at
    out = []
    for path in paths:
        try:
            with open(lock_file(home, path), "rb") as f:
                record = json.loads(f.read() or b"null")
        except (FileNotFoundError, ValueError):
            record = None
        if not record:
            out.append({"path": path, "state": "free"})
            continue
        state = ("stale" if is_stale(record, at) else
                 "locked-by-me" if record["session_id"] == sid else "locked")
        out.append({"path": path, "state": state, "owner": record["session_id"],
                    "age_seconds": int(at - parse_iso(record["acquired_at"]))})
    return out


def register(home: str, sid: str, provider: str, ai_version: str, working_on: str,
             at: float | None = None) -> None:
    at = time.time() if at is None else at
    os.makedirs(os.path.join(home, "sessions"), exist_ok=True)
    session = {"session_id": sid, "provider": provider, "ai_version": ai_version,
               "working_on": working_on, "status": "OnWorking", "project": os.getcwd(),
               "pid": os.getppid(), "registered_at": now_iso(at), "updated_at": now_iso(at),
               "todo_present": [], "space": [], "do_not_touch": [], "issues": ""}
    with flocked(os.path.join(home, "registry.md.lock")):
        write_atomic(session_file(home, sid),
                     yaml.dump(session, Dumper=Dumper, sort_keys=False, allow_unicode=True))
        render_view(home, at)


def status_rows(home: str, status: str | None, provider: str | None,
                project: str | None) -> list[dict]:
    sessions = load_sessions(home)
    if status:
        sessions = [s for s in sessions if s.get("status") == status]
    if provider:
        sessions = [s for s in sessions if str(s.get("provider", "")).lower() == provider.lower()]
    if project:
        sessions = [s for s in sessions if project in str(s.get("project", ""))]
    return sessions


def sync_line(home: str) -> str:
    try:
        with open(os.path.join(home, "sync-status.json")) as f:
            state = json.load(f)
    except (FileNotFoundError, ValueError):
        return "git-sync: enabled: false"
    return f"git-sync: enabled: {str(state.get('enabled', False)).lower()}"


def age(seconds: float) -> str:
    seconds = int(seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="baseline_flock", description=__doc__.split("\n\n")[0])
    parser.add_argument("--home", help="registry home (default: $AGENT_REGISTRY_HOME)")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("acquire")
    p.add_argument("path")
    p.add_argument("session_id")
    p.add_argument("--timeout", type=int, default=DEFAULT_TIMEOUT)
    p = sub.add_parser("release")
    p.add_argument("path")
    p.add_argument("session_id")
    p = sub.add_parser("check")
    p.add_argument("paths", nargs="+")
    p.add_argument("--session-id")
    p = sub.add_parser("status")
    p.add_argument("--status")
    p.add_argument("--provider")
    p.add_argument("--project")
    args = parser.parse_args(argv)
    home = home_dir(args.home)

    if args.command == "acquire":
        acquired, blocker = acquire(home, [args.path], args.session_id, args.timeout)
        if blocker:
            print(json.dumps({"locked": False, "session_id": blocker["session_id"]}))
            return 1
        print(json.dumps({"locked": True, "owner": args.session_id}))
        return 0
    if args.command == "release":
        released = release(home, [args.path], args.session_id)
        print(json.dumps({"released": bool(released)}))
        return 0 if released else 1
    if args.command == "check":
        for result in check(home, args.paths, args.session_id):
            print(json.dumps(result))
        return 0
    now = time.time()
    rows = status_rows(home, args.status, args.provider, args.project)
    widths = (28, 10, 30, 30, 10, 6)
    print("  ".join(h.ljust(w) for h, w in zip(
        ("SESSION ID", "PROVIDER", "PROJECT", "WORKING ON", "STATUS", "AGE"), widths)))
    for s in rows:
        cells = (s.get("session_id"), s.get("provider"), s.get("project"), s.get("working_on"),
                 s.get("status"), age(now - parse_iso(s.get("registered_at", now_iso(now)))))
        print("  ".join(str(c or "")[:w].ljust(w) for c, w in zip(cells, widths)))
    print(sync_line(home))
    return 0


if __name__ == "__main__":
    sys.exit(main())
