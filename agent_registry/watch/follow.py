"""``agent-registry watch``: follow the registry branch and notify four events per session.

- **started**: a session file appears in ``sessions/live/``;
- **executed**: one leaves it as Finished (for ``end``, with the wiki entry's "what");
- **stopped**: one leaves it as Stop or Killed (who and why from the commit's trailers);
- **idle**: a live session with no heartbeat and no registry commit for M minutes, once
  per idle spell (a new heartbeat or commit starts a new one).

Each pass walks the commits new since the last one (``branch.trailers.parse_op`` gives each
commit's operation) and, with sync on, fetches first and follows the remote-tracking
branch too.  In the lock-shard layout it also walks the new commits of the shard branches
(claims) and clone refs (heartbeats, diary lines), by commit time: sessions' activity.  What was seen and sent is kept in ``<git common dir>/agent-registry/
watch.json``: events are keyed (``started/<sid>``…), and a pass writes its new events to
the outbox together with the commits it has walked, in one atomic replace, before
delivering any.  So a watchdog killed at any instant and restarted neither skips an event
(not walked yet, or waiting in the outbox) nor repeats one (keyed, or marked sent); only a
kill between the transport's acceptance and the write that records it sends that message
twice (delivery is at least once).  A failed delivery stays in the outbox and is retried
with exponential backoff, per target.  The first pass of a clone (cold start) records what
it finds and sends nothing.  More events than ``agent-registry.watchDigest`` in one pass go
out as one digest; the registry's own sessions (the shard fence) are never announced.

Over 400 lines on purpose: every read and write of the one state file (what was walked,
keyed, coalesced, queued and delivered) is in the one class here, so its invariants (queued
before sent, keyed once) are checked in one place.
"""
from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections.abc import Callable

from . import notify
from ..errors import BadInput, Refused
from ..store.atomic import replace_file
from ..store.procinfo import hostname, is_alive, start_time
from ..branch.clones import Clones, MainView, clone_patterns
from ..branch.records import LIVE, iso
from ..branch.shards import internal  # the registry's own sessions: never announced
from ..branch.trailers import parse_op
from ..core.registry import Registry
from ..store.flock import file_lock
from ..branch.view import View

STATE_FILE = "watch.json"
DEFAULT_INTERVAL = 60.0
DEFAULT_IDLE_MINUTES = 60.0
RETRY_BASE = 5.0   # seconds before the first retry (the interval, when shorter)
RETRY_CAP = 600.0  # the longest wait between two retries
KEEP = 20          # recent deliveries and failures kept for the dashboard
_LIVE_DIR = "sessions/live/"
_DONE_DIR = "sessions/done/"
DIGEST_KEY = "agent-registry.watchdigest"  # git config agent-registry.watchDigest N
DEFAULT_DIGEST = 5  # more events than this in one pass: one digest notification


def digest_size(registry: Registry) -> int:
    """``agent-registry.watchDigest``: more events than this in one pass are sent as one
    digest notification (0: never); bad input when it is not a whole number >= 0."""
    raw = registry.config.get(DIGEST_KEY)
    if raw is None or raw == "":
        return DEFAULT_DIGEST
    try:
        value = int(raw)
    except ValueError:
        value = -1
    if value < 0:
        raise BadInput(f"git config agent-registry.watchDigest is {raw!r}: a whole number "
                       "of events (0: never coalesce)")
    return value


def state_file(registry: Registry) -> str:
    return registry.repo.state_path(STATE_FILE)


def load_state(path: str) -> dict:
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        return {}
    except ValueError as exc:
        # never half-written (atomic replace): a person broke it.  Starting cold would
        # drop the outbox and re-record history silently, so refuse and say why.
        raise BadInput(f"{path} is not valid JSON ({exc}): fix it, or delete it to start "
                       "cold (what it had queued is then never sent)") from None


def save_state(path: str, state: dict) -> None:
    """Replace the state file atomically: a kill leaves the old one or the new one."""
    replace_file(path, json.dumps(state, indent=1, sort_keys=True), prefix="watch.",
                 durable=True)


class Watcher:
    """One clone's watchdog: passes over the branch, an outbox, and its delivery."""

    def __init__(self, registry: Registry, *, idle_minutes: float = DEFAULT_IDLE_MINUTES,
                 interval: float = DEFAULT_INTERVAL, fetch: bool = True,
                 now: Callable[[], float] = time.time) -> None:
        self.registry = registry
        self.repo = registry.repo
        self.idle_seconds = idle_minutes * 60
        self.retry_base = min(interval, RETRY_BASE)
        self.fetch = fetch and registry.remote is not None
        self.now = now
        self.path = state_file(registry)
        env = notify.settings(self.repo)
        self.targets = notify.targets(self.repo, env)
        self.name = notify.recipient(self.repo, env)
        self.templates = notify.pool(self.repo)
        self.digest = digest_size(registry)
        self.state = load_state(self.path)

    # -- one pass --------------------------------------------------------------------
    def run_pass(self, *, retry_all: bool = False) -> dict:
        """Fetch (with sync on), walk new commits, queue their events, deliver."""
        report: dict = {"at": iso(self.now()), "cold_start": "since" not in self.state,
                        "fetch_error": self._fetch(), "events": []}
        heads, shard_heads = self._heads(), self._shard_heads()
        if report["cold_start"]:
            self._record_history(heads)
            self.state["since"] = report["at"]
        else:
            self._ended_before()
            queued = len(self.state.get("outbox", []))
            report["events"] = self._walk(heads, shard_heads) + \
                self._idle(heads, record_only=False)
            report["digest"] = self._coalesce(queued)
        self.state.update(heads=heads, heads_time=self._heads_time(heads),
                          shard_heads=shard_heads,
                          last_pass=report["at"], pid=os.getpid(),
                          pid_start=start_time(os.getpid()), host=hostname(),
                          targets=[t.label for t in self.targets],
                          fetch_error=report["fetch_error"])
        save_state(self.path, self.state)  # events are queued before any is sent
        delivered, failed = self._deliver(retry_all)
        report.update(delivered=delivered, failed=failed,
                      pending=len(self.state.get("outbox", [])), tip=heads[0] if heads else None,
                      overlaps=self._overlaps())
        return report

    def _overlaps(self) -> dict:
        """Tell the agents of each new overlap between live sessions' branches, once
        (forecast/tell.py keeps what it sent; a failure is reported, the pass goes on)."""
        from ..forecast.tell import notify as tell
        try:
            return {"notified": tell(self.registry)}
        except Exception as exc:  # noqa: BLE001 — the forecast is advice: the pass goes on
            return {"notified": [], "error": str(exc)}

    def _fetch(self) -> str | None:
        if not self.fetch:
            return None
        from ..sync.remote import Offline, fetch
        try:
            fetch(self.registry)
        except Offline as exc:  # the local branch is still followed
            return exc.message
        return None

    def _heads(self) -> list[str]:
        refs = [self.registry.ref, self.registry.tracking_ref]
        return list(dict.fromkeys(h for r in refs if r and (h := self.repo.read_ref(r))))

    def _shard_heads(self) -> list[str]:
        """The tips of the shard branches (claims) and clone refs (format 3: heartbeats,
        diary lines), local and remote-tracking, not the intent refs; none in format 1.
        One for-each-ref, whatever the count."""
        from ..branch.shards import shard_patterns
        branch, remote = self.registry.branch, self.registry.remote
        out = self.repo.git("for-each-ref", "--format=%(objectname)", *shard_patterns(
            branch, remote), *clone_patterns(branch, remote)).stdout
        return list(dict.fromkeys(out.decode().split()))

    def _record_history(self, heads: list[str]) -> None:
        """Cold start: what is live now counts as started, idle spells as notified."""
        done = self.state.setdefault("done", {})
        for session in self._live(heads).values():
            done.setdefault(f"started/{session.id}", "history")
        self._idle(heads, record_only=True)
        self.state["before"] = self._done_ids(heads)

    def _done_ids(self, heads: list[str]) -> list[str]:
        """The sessions that ended at *heads* (``sessions/done/``: one listing each)."""
        found: set[str] = set()
        for head in heads:
            out = self.repo.git("ls-tree", "-r", "--name-only", head, "--",
                                _DONE_DIR).stdout.decode("utf-8", errors="replace")
            found |= {line.rsplit("/", 1)[-1].removesuffix(".yaml")
                      for line in out.splitlines() if line.endswith(".yaml")}
        return sorted(found)

    def _ended_before(self) -> None:
        """A state written before ``before`` was kept: the sessions ended at the heads
        of its last pass (each either told or history), while those commits exist."""
        if "before" in self.state:
            return
        old = [h for h in self.state.get("heads", []) if self.repo.reader.read(h)]
        if old:
            self.state["before"] = self._done_ids(old)

    def _coalesce(self, start: int) -> str | None:
        """More than ``agent-registry.watchDigest`` events queued by this pass (the
        outbox from *start*): one digest notification instead, each event a line; the
        events' keys stay recorded, so none is told again on its own."""
        outbox = self.state.get("outbox", [])
        new = outbox[start:]
        if not self.digest or len(new) <= self.digest:
            return None
        del outbox[start:]
        done = self.state.setdefault("done", {})
        for entry in new:
            done[entry["key"]] = "digest"
        lines = [f"{e['session']} {e['event']}: {' '.join(e['body'].split())[:200]}"
                 for e in new]
        key = f"digest/{self.now():.6f}"
        outbox.append({"key": key, "event": "digest", "session": "",
                       "body": "\n".join(lines),
                       "title": f"agent-registry: {len(new)} events",
                       "queued_at": iso(self.now()), "sent_to": [], "attempts": 0,
                       "next_at": 0.0, "keys": [e["key"] for e in new]})
        done[key] = "queued"
        return key

    # -- events ----------------------------------------------------------------------
    def _walk(self, heads: list[str], shard_heads: list[str] = ()) -> list[dict]:
        """The events of the main branch's new commits, merged by commit time with the
        new commits of the lock shards and clone refs: a claim, a heartbeat or a diary
        line there is a session's activity, so it is not told idle meanwhile."""
        import heapq
        events = []
        for commit, at, message, changes in heapq.merge(
                self._new_commits(heads), self._shard_commits(list(shard_heads)),
                key=lambda c: c[1]):
            op = parse_op(message) or {}
            subject = message.split("\n", 1)[0]
            sid = op.get("session")
            if sid:
                activity = self.state.setdefault("activity", {})
                activity[sid] = max(activity.get(sid, 0), float(op.get("at") or at))
            for status, path in changes:
                name = path[len(_LIVE_DIR):-len(".yaml")]
                if status == "A":
                    events += self._started(commit, name)
                elif status == "D":
                    events += self._ended(commit, name, op, subject)
        return events

    def _new_commits(self, heads: list[str]) -> list[tuple[str, float, str, list]]:
        """(commit, time, message, [(A|D, sessions/live/<sid>.yaml)]) of the commits
        reachable from *heads* and not from the heads of the last pass, oldest first."""
        if not heads:
            return []
        from ..sync.replay import is_ancestor
        old = self.state.get("heads", [])
        seen = [h for h in old if self.repo.reader.read(h)]
        rewritten = old and not any(is_ancestor(self.registry, s, h)
                                    for s in seen for h in heads)
        # history rewritten (gc) or gone: walked again whole, and the keys decide (what
        # was told, the sessions live at the first pass, those ended before it: `before`),
        # so a start dated before the last pass (a machine whose clock is slow) is still
        # told.  A state without `before` falls back on the dates: those up to the last
        # pass's newest commit are not walked
        since = self.state.get("heads_time", 0) if rewritten and "before" not in self.state \
            else 0
        proc = self.repo.git("log", "--reverse", "--topo-order", "--no-renames",
                             "--name-status", "--format=%x1e%H%x1f%ct%x1f%B%x1f",
                             *heads, "--not", *seen, "--")
        out = []
        for chunk in proc.stdout.decode("utf-8", errors="replace").split("\x1e")[1:]:
            commit, ct, message, files = chunk.split("\x1f", 3)
            changes = [tuple(line.split("\t", 1)) for line in files.splitlines()
                       if line[:1] in "AD" and "\t" + _LIVE_DIR in line
                       and line.endswith(".yaml")]
            if float(ct) >= since:
                out.append((commit, float(ct), message, changes))
        return out

    def _shard_commits(self, heads: list[str]) -> list[tuple[str, float, str, list]]:
        """(commit, time, message, []) of the shards' and clone refs' commits new since the
        last pass, oldest first (only their operations count: no session file lives there).  A
        history gc rewrote is walked again; what it gives is activity, kept as the
        newest time seen per session, so nothing is told twice."""
        if not heads:
            return []
        seen = [h for h in self.state.get("shard_heads", []) if self.repo.reader.read(h)]
        proc = self.repo.git("log", "--reverse", "--date-order",
                             "--format=%x1e%H%x1f%ct%x1f%B%x1f", *heads, "--not", *seen, "--")
        out = []
        for chunk in proc.stdout.decode("utf-8", errors="replace").split("\x1e")[1:]:
            commit, ct, message, _ = chunk.split("\x1f", 3)
            out.append((commit, float(ct), message, []))
        return out

    def _heads_time(self, heads: list[str]) -> float:
        """The newest commit time of *heads* (where a rewritten history resumes)."""
        if not heads:
            return 0.0
        times = self.repo.git("show", "-s", "--format=%ct", *heads).stdout.split()
        return max(float(t) for t in times)

    def _started(self, commit: str, sid: str) -> list[dict]:
        session = View(self.repo, commit).session(sid, strict=False)
        if session is None or internal(session) or sid in self.state.get("before", ()):
            return []
        return self._queue("started", session, own=session.notify_started)

    def _ended(self, commit: str, sid: str, op: dict, subject: str) -> list[dict]:
        session = View(self.repo, commit).done_session(sid)
        if session is None or session.status == LIVE or internal(session) \
                or sid in self.state.get("before", ()):
            return []
        done = self.state.setdefault("done", {})
        done.setdefault(f"started/{sid}", "ended")  # never announce its start after its end
        for key in [k for k in done if k.startswith(f"idle/{sid}/")]:
            del done[key]  # an ended session is never idle again: keep the state small
        self.state.get("activity", {}).pop(sid, None)
        if session.status == "Finished":
            what = (op.get("fields") or {}).get("what") if op.get("op") == "end" else ""
            return self._queue("executed", session, own=session.notify_executed,
                               what=what or session.working_on)
        by = op.get("by") or op.get("session") or "?"
        why = op.get("reason") or {
            "cleanup": "a zombie: no heartbeat within its TTL, or its process is gone",
            "update": f"set to {session.status} by update",
        }.get(op.get("op", ""), subject)
        return self._queue("stopped", session, by=by, why=why)

    def _live(self, heads: list[str]) -> dict:
        """Live sessions at any of *heads* (the freshest heartbeat of each, clone refs' too)."""
        found: dict = {}
        clones = Clones(self.repo, self.registry.branch, self.registry.remote)
        for head in heads:
            for session in MainView(self.repo, head, clones).live_sessions():
                if internal(session):
                    continue
                old = found.get(session.id)
                if old is None or session.heartbeat_ts() > old.heartbeat_ts():
                    found[session.id] = session
        return found

    def _idle(self, heads: list[str], record_only: bool) -> list[dict]:
        now, events = self.now(), []
        done = self.state.setdefault("done", {})
        activity = self.state.setdefault("activity", {})
        live = self._live(heads)
        for sid in set(activity) - set(live):  # commits of ended sessions (a wiki ingest)
            del activity[sid]
        for sid, session in live.items():
            # live at one head, ended at the other (the remote saw the end first)
            if f"executed/{sid}" in done or f"stopped/{sid}" in done:
                continue
            last = max(session.heartbeat_ts(), activity.get(sid, 0.0))
            key = f"idle/{sid}/{int(last)}"  # one spell: silent since *last*
            if now - last < self.idle_seconds or key in done:
                continue
            if record_only:
                done[key] = "history"
            else:
                events += self._queue("idle", session, key=key,
                                      minutes=str(int((now - last) // 60)))
        return events

    def _queue(self, event: str, session, *, own: str = "", key: str = "",
               **values: str) -> list[dict]:
        """Put *event* of *session* in the outbox, unless its key was seen before."""
        key = key or f"{event}/{session.id}"
        done = self.state.setdefault("done", {})
        if key in done:
            return []
        fields = {"name": self.name, "session_id": session.id, "provider": session.provider,
                  "working_on": session.working_on, "minutes": "", "what": "", "by": "",
                  "why": "", **values}
        body = notify.message(self.templates, event, fields, own)
        entry = {"key": key, "event": event, "session": session.id, "body": body,
                 "title": f"agent-registry: {session.id} {event}", "queued_at": iso(self.now()),
                 "sent_to": [], "attempts": 0, "next_at": 0.0}
        done[key] = "queued"
        self.state.setdefault("outbox", []).append(entry)
        return [{k: entry[k] for k in ("key", "event", "session", "body")}]

    # -- delivery --------------------------------------------------------------------
    def _deliver(self, retry_all: bool) -> tuple[list[dict], list[dict]]:
        """Send what is due; an entry leaves the outbox once every target accepted it."""
        delivered, failed = [], []
        for entry in list(self.state.get("outbox", [])):
            if not retry_all and entry["next_at"] > self.now():
                continue
            errors = []
            for target in self.targets:
                if target.key in entry["sent_to"]:
                    continue
                error = notify.send(target, entry["title"], entry["body"])
                if error is None:
                    entry["sent_to"].append(target.key)
                else:
                    errors.append({"target": target.label, "error": error})
                save_state(self.path, self.state)  # an accepted send is recorded at once
            if errors:
                failed.append(self._failed(entry, errors))
            else:
                delivered.append(self._sent(entry))
            save_state(self.path, self.state)
        return delivered, failed

    def _sent(self, entry: dict) -> dict:
        self.state["outbox"].remove(entry)
        self.state["done"][entry["key"]] = "sent"
        record = {"key": entry["key"], "event": entry["event"], "session": entry["session"],
                  "body": entry["body"], "sent_at": iso(self.now()),
                  "attempts": entry["attempts"] + 1}
        self.state["recent"] = (self.state.get("recent", []) + [record])[-KEEP:]
        return record

    def _failed(self, entry: dict, errors: list[dict]) -> dict:
        entry["attempts"] += 1
        delay = min(self.retry_base * 2 ** (entry["attempts"] - 1), RETRY_CAP)
        entry["next_at"] = self.now() + delay
        record = {"key": entry["key"], "event": entry["event"], "session": entry["session"],
                  "errors": errors, "attempts": entry["attempts"], "at": iso(self.now()),
                  "retry_at": iso(entry["next_at"])}
        self.state["failures"] = (self.state.get("failures", []) + [record])[-KEEP:]
        return record

    def next_due(self) -> float | None:
        """When the earliest pending retry is due (None: nothing pending)."""
        return min((e["next_at"] for e in self.state.get("outbox", [])), default=None)


def watch(registry: Registry, *, interval: float, idle_minutes: float, once: bool,
          report: Callable[[dict], None]) -> None:
    """Run passes every *interval* seconds (one with *once*), each given to *report*.
    One watchdog per clone: a second is refused while the first runs.  SIGTERM and
    SIGINT (``docker compose stop``, Ctrl-C) end it between passes, never inside one: a
    message the transport accepted is recorded as sent before the watchdog exits, so a
    stop does not make the next watchdog send it again."""
    def busy() -> None:
        raise Refused(f"another `agent-registry watch` runs for this clone "
                      f"(pid {load_state(state_file(registry)).get('pid', '?')})")
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    with file_lock(registry.repo.state_path("watch.lock"), on_wait=busy):
        watcher = Watcher(registry, idle_minutes=idle_minutes, interval=interval)
        while not stop.is_set():
            report(watcher.run_pass(retry_all=once))
            if once:
                return
            due = watcher.next_due()
            stop.wait(interval if due is None else min(interval, max(due - time.time(), 0.05)))


def status(registry: Registry) -> dict:
    """The watchdog's state for the dashboard: running or not, last pass, what is
    pending, the last deliveries and failures.  Read-only; no URL is ever stored."""
    state = load_state(state_file(registry))
    if not state:
        return {"configured": False, "running": False}
    running = state.get("host") == hostname() and is_alive(state.get("pid"),
                                                            state.get("pid_start"))
    outbox = state.get("outbox", [])
    return {"configured": True, "running": running, "pid": state.get("pid"),
            "host": state.get("host"), "last_pass": state.get("last_pass"),
            "targets": state.get("targets", []), "fetch_error": state.get("fetch_error"),
            "pending": [{k: e[k] for k in ("key", "event", "session", "attempts", "queued_at")}
                        for e in outbox],
            "recent": state.get("recent", [])[::-1], "failures": state.get("failures", [])[::-1]}


def pass_lines(report: dict) -> list[str]:
    """A pass as text: what was queued, sent, or failed (and when it is retried)."""
    lines = [f"fetch failed, following the local branch: {report['fetch_error']}"] \
        if report["fetch_error"] else []
    if report["cold_start"]:
        lines.append("cold start: recorded the registry as it is; nothing sent for history")
    lines += [f"{e['event']} {e['session']}: {e['body']}" for e in report["events"]]
    lines += [f"sent {d['key']}" for d in report["delivered"]]
    lines += [f"told {n['to']} of its overlap with {n['from']} ({n['id']})"
              for n in report.get("overlaps", {}).get("notified", []) if n["created"]]
    if report.get("overlaps", {}).get("error"):
        lines.append(f"overlap forecast failed: {report['overlaps']['error']}")
    lines += [f"not sent {f['key']} (attempt {f['attempts']}, retry at {f['retry_at']}): "
              + "; ".join(f"{e['target']}: {e['error']}" for e in f["errors"])
              for f in report["failed"]]
    return lines
