"""The predecessor's own command-line scripts (``../shared/predecessors/code/``), as the
benchmark's baseline: their commands, the state they read, and undoing a timed claim.

Their state lives in a home directory (``AGENT_REGISTRY_HOME``): one YAML file per
session (``do_not_touch`` and ``space`` list what it holds), one lock file per path
(named by the path's real path, so it depends on the directory the command runs in) and
the ``registry.md`` view re-rendered on every write.  It is built here with their own
functions, called in process (``register_session``, ``update_session``; each held lock
written by their ``acquire_lock``'s own naming and ``heartbeat``), so the files are
exactly what their commands write.  Their code needs PyYAML in the interpreter that
runs them (the benchmark's own, as for ours).
"""
from __future__ import annotations

import contextlib
import importlib
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CANDIDATES = (ROOT.parent / "shared" / "predecessors" / "code",  # a checkout beside shared/
              Path("/work/shared/predecessors/code"))
STALE_SECONDS = 120  # their lock_manager's DEFAULT_TIMEOUT: an older lock file is stale


def code_dir() -> Path | None:
    """Where their scripts are ($AGENT_REGISTRY_PREDECESSOR, else beside the checkout)."""
    given = os.environ.get("AGENT_REGISTRY_PREDECESSOR")
    for folder in ([Path(given)] if given else []) + list(CANDIDATES):
        if (folder / "lock_manager.py").is_file() and (folder / "registry_manager.py").is_file():
            return folder
    return None


def argv(code: Path, command: str, path: str, sid: str, also: tuple[str, ...] = ()) -> list[str]:
    """Their command for *command* (acquire, check, status, heartbeat), run by this
    interpreter; a check checks *also* too (their batch form, exit 1 when one is held)."""
    lock, registry = str(code / "lock_manager.py"), str(code / "registry_manager.py")
    return {"acquire": [sys.executable, lock, "acquire", path, sid],
            "check": [sys.executable, lock, "check", path, *also, "--session-id", sid],
            "heartbeat": [sys.executable, lock, "heartbeat", path, sid],
            "status": [sys.executable, registry, "status"]}[command]


@contextlib.contextmanager
def _in(code: Path, home: Path, cwd: Path):
    """Their modules, imported in this process, acting on *home* from *cwd*."""
    if str(code) not in sys.path:
        sys.path.insert(0, str(code))
    saved_home, saved_cwd = os.environ.get("AGENT_REGISTRY_HOME"), os.getcwd()
    os.environ["AGENT_REGISTRY_HOME"] = str(home)
    os.chdir(cwd)
    try:
        yield importlib.import_module("registry_manager"), importlib.import_module("lock_manager")
    finally:
        os.chdir(saved_cwd)
        if saved_home is None:
            os.environ.pop("AGENT_REGISTRY_HOME", None)
        else:
            os.environ["AGENT_REGISTRY_HOME"] = saved_home


def build(code: Path, home: Path, cwd: Path, holders: dict[str, list[str]],
          claimer: str, claimer_holds: list[str]) -> Path:
    """*home* holding the sessions of *holders* (session id -> held paths) and *claimer*
    (holding *claimer_holds*), every lock fresh."""
    with _in(code, home, cwd) as (registry, locks):
        for sid, paths in [*holders.items(), (claimer, claimer_holds)]:
            registry.register_session(sid, "bench", "1", f"holds {len(paths)} paths")
            for path in paths:
                _write_lock(locks, path, sid)
            if paths:  # what their acquire's registry sync leaves, in one write per session
                registry.update_session(sid, do_not_touch=list(paths), space=list(paths))
    return home


def _write_lock(locks, path: str, sid: str) -> None:
    """The lock file their acquire writes for *path*, through their own naming and their
    own ``heartbeat`` (which writes ``sid|now`` into an existing lock file)."""
    lock_file = locks._lock_file(path)
    lock_file.parent.mkdir(parents=True, exist_ok=True)
    lock_file.touch()
    lock_file.write_text(f"{sid}|0")
    if not locks.heartbeat(path, sid).get("ok"):
        raise RuntimeError(f"predecessor: could not write the lock of {path}")


def refresh(code: Path, home: Path, cwd: Path, path: str, sid: str) -> None:
    """Keep *path*'s lock fresh (their locks go stale after two minutes, and their
    ``check`` then deletes the lock file), outside the timed window."""
    with _in(code, home, cwd) as (_registry, locks):
        if not locks.heartbeat(path, sid).get("ok"):
            raise RuntimeError(f"predecessor: {path} is no longer held by {sid}")


def release(code: Path, home: Path, cwd: Path, path: str, sid: str) -> None:
    """Undo a timed acquire with their own release (lock file and session record)."""
    with _in(code, home, cwd) as (_registry, locks):
        result = locks.release_lock(path, sid)
        if not result.get("released"):
            raise RuntimeError(f"predecessor: release of {path} refused: {result}")
