"""Registry states for the benchmark, built quickly and legitimately.

Ours: the library's own writes (``Registry.register`` and one multi-path
``Registry.claim`` per session) build the locks, so the tip is exactly what real use
produces.  A long history is laid down *underneath* that state with ``git fast-import``:
heartbeat commits of a session that is then finished through the API.  The tip tree is
then the same registry state as with a short history, and only the history differs.

The predecessor's home with the same sessions and locks: bench/predecessor.py.
"""
from __future__ import annotations

import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from agent_registry.branch.trailers import trailers
from agent_registry.core.registry import Registry

TTL = 7 * 86400  # the longest TTL: nothing goes stale while a state is being timed
CLAIMER = "bench-claimer"
HISTORY_SID = "bench-history"
HEARTBEAT_PATH = "src/bench/heartbeat.py"  # the claimer holds it: `lock heartbeat PATH SID`


@dataclass(frozen=True)
class Shape:
    """What a state holds: *sessions* live sessions holding *locks_each* locks each,
    on top of *history* commits; in one branch (layout format 1), or with *shards* lock
    shards and clone refs, the layout `agent-registry init` gives a new registry."""
    name: str
    sessions: int
    locks_each: int
    history: int
    shards: int = 0

    @property
    def locks(self) -> int:
        return self.sessions * self.locks_each


def held_path(session: int, index: int) -> str:
    return f"src/pkg{session:03d}/mod{index // 100:02d}/file{index:04d}.py"


def hermetic_env(root: Path) -> dict[str, str]:
    """No user or system git config may change what is measured, nor bytecode left
    uncached."""
    home = root / "home"
    home.mkdir(parents=True, exist_ok=True)
    config = home / ".gitconfig"
    config.write_text("[user]\n\tname = bench\n\temail = bench@localhost\n"
                      "[init]\n\tdefaultBranch = main\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "AGENT_REGISTRY_"))}
    # an install has its bytecode compiled: with this (this sandbox's shells set it) a
    # `--before` checkout, which has none, would compile every module on every run
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.update(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"),
               GIT_CONFIG_GLOBAL=str(config), GIT_CONFIG_NOSYSTEM="1", TZ="UTC")
    return env


def _git(repo: Path, env: dict[str, str], *args: str, input: bytes | None = None) -> str:
    proc = subprocess.run(["git", *args], cwd=repo, env=env, input=input,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=False)
    if proc.returncode:
        raise RuntimeError(f"git {' '.join(args)}: {proc.stderr.decode()}")
    return proc.stdout.decode()


def make_project(repo: Path, env: dict[str, str]) -> None:
    """A user's project: one commit on main.  The registry branch lives beside it."""
    (repo / "src").mkdir(parents=True)
    (repo / "README.md").write_text("project\n")
    (repo / "src" / "app.py").write_text("app = 1\n")
    _git(repo, env, "init", "-q")
    _git(repo, env, "add", "-A")
    _git(repo, env, "commit", "-q", "-m", "initial")


def lay_history(repo: Path, env: dict[str, str], commits: int, start: float) -> None:
    """*commits* heartbeat commits of HISTORY_SID on top of the branch tip, written with
    git fast-import in the shape the library writes (session file, re-rendered
    registry.md, Registry-* trailers).  The session is finished afterwards by the API."""
    registry = Registry.open(str(repo))
    try:
        view = registry.view()
        tip = view.tip
        session_yaml = view.read(f"sessions/live/{HISTORY_SID}.yaml").decode()
        registry_md = view.read("registry.md").decode()
    finally:
        registry.close()
    first_beat = next(line for line in session_yaml.splitlines() if line.startswith("heartbeat_at:"))
    first_at = first_beat.split('"')[1]
    last_op = next(line for line in registry_md.splitlines() if line.startswith("last_operation:"))
    chunks = []
    for i in range(commits):
        at = int(start) + 1 + i
        iso = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(at))
        subject = f"heartbeat {HISTORY_SID} (0 lock(s))"
        beat = session_yaml.replace(first_beat, f'heartbeat_at: "{iso}"').encode()
        view_md = registry_md.replace(first_at, iso).replace(
            last_op, f'last_operation: "{subject}"').encode()
        message = (subject + "\n\n" + trailers({"op": "heartbeat", "at": at,
                                                 "session": HISTORY_SID})).encode()
        head = (f"commit refs/heads/agent-registry\n"
                f"author {HISTORY_SID} <{HISTORY_SID}@bench> {at} +0000\n"
                f"committer agent-registry <agent-registry@localhost> {at} +0000\n"
                f"data {len(message)}\n").encode()
        chunks.append(head + message + b"\n")
        if i == 0:
            chunks.append(f"from {tip}\n".encode())
        chunks.append(f"M 100644 inline sessions/live/{HISTORY_SID}.yaml\ndata {len(beat)}\n".encode()
                      + beat + b"\n")
        chunks.append(f"M 100644 inline registry.md\ndata {len(view_md)}\n".encode() + view_md + b"\n\n")
    _git(repo, env, "fast-import", "--quiet", "--force", input=b"".join(chunks))


def build_ours(repo: Path, shape: Shape, env: dict[str, str]) -> Path:
    """A project repository at *repo* whose registry branch holds *shape*.  The library
    reads os.environ, which the caller has made hermetic (*env*)."""
    make_project(repo, env)
    history = max(0, shape.history - (2 * shape.sessions + 4))  # the API adds the rest
    start = time.time() - history - 60
    # sync's Registry makes (and writes) the layout a new registry gets; the core's, one branch
    from agent_registry.sync import Registry as Sharding
    kind = Sharding if shape.shards else Registry
    with kind.open(str(repo), clock=lambda: start) as registry:
        registry.init(shards=shape.shards)
        registry.register(HISTORY_SID, provider="bench", working_on="a long history",
                          pid=os.getpid())
    if history:
        lay_history(repo, env, history, start)
    with kind.open(str(repo)) as registry:
        registry.finish(HISTORY_SID)
        for s in range(shape.sessions):
            sid = f"holder-{s:03d}"
            registry.register(sid, provider="bench", ai_version="1",
                              working_on=f"holds {shape.locks_each} paths", pid=os.getpid())
            registry.claim(sid, [held_path(s, i) for i in range(shape.locks_each)], ttl=TTL)
        registry.register(CLAIMER, provider="bench", ai_version="1",
                          working_on="claims in the benchmark", pid=os.getpid())
        registry.claim(CLAIMER, [HEARTBEAT_PATH], ttl=TTL)
    return repo


def commit_count(repo: Path, env: dict[str, str]) -> int:
    return int(_git(repo, env, "rev-list", "--count", "agent-registry").strip())


def layout(repo: Path) -> str:
    """The layout the state was made in (what `init` gives a new registry)."""
    from agent_registry.core.sharded import layout as marker_of
    with Registry.open(str(repo)) as registry:
        marker = marker_of(registry)
    if marker["format"] == 1:
        return "one branch (layout format 1)"
    return f"{marker.get('shards', 0)} lock shards, layout format {marker['format']}"
