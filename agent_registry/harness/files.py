"""Writing a harness's files so that they can be taken back byte for byte.

An install is a *plan*: the full new bytes of every file it changes, computed from what is
there before anything is written (a file that cannot be merged raises first, so a bad
file changes nothing at all).  Applying it records, once per file and per harness, the
file's original bytes (or its absence) and the directories it had to create, under
``$(git rev-parse --git-dir)/agent-registry/harness/<harness>.json`` (the common dir for
the main worktree; a linked worktree has files of its own, so a record of its own); a second
install writes nothing when the plan equals the files.  ``restore`` puts each file back
as recorded: original bytes rewritten, files we created deleted, directories we created
removed when empty.

Two harnesses may share a file (AGENTS.md for codex, opencode, aider; the
``.agents/skills`` skill).  The harness that recorded it first holds its true original;
uninstalling one of several only hands its record down to the others and leaves the file
(the others still need it), and the last one restores it.  A file changed by hand after
our last write is never overwritten: restore leaves it and says so.
"""
from __future__ import annotations

import base64
import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import BadInput, os_failure

HARNESSES = ("claude", "codex", "gemini", "cursor", "opencode", "aider", "generic",
             "copilot", "qwen")


def record_dir(common_dir: str) -> Path:
    return Path(common_dir, "agent-registry", "harness")


def record_file(common_dir: str, harness: str) -> Path:
    return record_dir(common_dir) / f"{harness}.json"


def _digest(data: bytes | None) -> str | None:
    return None if data is None else hashlib.sha256(data).hexdigest()


def read_bytes(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise os_failure(exc, str(path)) from None


def read_text(path: Path) -> str:
    """A text file we merge into ("" when absent); one that is not UTF-8 is refused."""
    data = read_bytes(path)
    try:
        return "" if data is None else data.decode("utf-8")
    except UnicodeDecodeError:
        raise BadInput(f"{path} is not UTF-8 text; nothing changed") from None


@dataclass
class Plan:
    """What one install writes: relative path -> new text (None: leave the file alone)."""
    harness: str
    toplevel: str
    files: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # what a person should know

    def edit(self, rel: str, merge) -> None:
        """Plan *rel* as ``merge(text, path)`` of its planned (else current) text; a
        merge returning None leaves the text as it is."""
        path = Path(self.toplevel, rel)
        text = self.files[rel] if rel in self.files else read_text(path)
        new = merge(text, path)
        self.files[rel] = text if new is None else new

    def pending(self) -> list[str]:
        """The files whose bytes differ from the plan (what applying would write)."""
        return [rel for rel, text in self.files.items()
                if read_bytes(Path(self.toplevel, rel)) != text.encode("utf-8")]


def load_record(common_dir: str, harness: str) -> dict:
    try:
        data = json.loads(record_file(common_dir, harness).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {"files": {}, "dirs": []}
    return data if isinstance(data, dict) else {"files": {}, "dirs": []}


def _save_record(common_dir: str, harness: str, record: dict) -> None:
    path = record_file(common_dir, harness)
    if not record["files"] and not record["dirs"]:
        path.unlink(missing_ok=True)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def _next_seq(common_dir: str) -> int:
    seqs = [entry.get("seq", 0) for h in HARNESSES
            for entry in load_record(common_dir, h)["files"].values()]
    return max(seqs, default=0) + 1


def _write(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.agent-registry-tmp")
    try:
        tmp.write_bytes(data)
        if path.exists():  # keep the mode a person gave the file
            os.chmod(tmp, path.stat().st_mode & 0o7777)
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise os_failure(exc, str(path)) from None


def apply(plan: Plan, common_dir: str, unmerge=None) -> list[str]:
    """Write the plan's files that differ, recording originals first; the relative
    paths written.  A file that holds our parts already, written by an install that kept
    no record (an earlier version, another clone), is recorded as it would be without
    them (``unmerge(rel, text)``), so uninstall does not bring them back."""
    record = load_record(common_dir, plan.harness)
    others = {h: load_record(common_dir, h) for h in HARNESSES if h != plan.harness}
    written = []
    seq = None
    for rel, text in plan.files.items():
        path = Path(plan.toplevel, rel)
        data = text.encode("utf-8")
        old = read_bytes(path)
        if old is None and not data:
            continue  # nothing to say in a file that is not there
        sharing = [h for h, r in others.items() if rel in r["files"]]
        if rel not in record["files"] and (old != data or sharing):
            # a file another harness wrote is ours too now: its record hands its
            # original down to us when it is uninstalled first
            seq = seq or _next_seq(common_dir)
            before = old
            if old is not None and unmerge is not None and not sharing:
                try:
                    clean = unmerge(rel, old.decode("utf-8"))
                except (UnicodeDecodeError, ValueError, BadInput):
                    clean = None
                if clean is not None:
                    before = clean.encode("utf-8") if clean else None
            original = None if before is None else base64.b64encode(before).decode()
            record["files"][rel] = {"original": original, "seq": seq,
                                    "written": _digest(old)}
            _save_record(common_dir, plan.harness, record)
        if old == data:
            continue
        missing = []
        parent = path.parent
        while not parent.exists():
            missing.append(parent)
            parent = parent.parent
        for directory in reversed(missing):
            directory.mkdir()
            rel_dir = os.path.relpath(directory, plan.toplevel)
            if rel_dir not in record["dirs"]:
                record["dirs"].append(rel_dir)
        _write(path, data)
        record["files"][rel]["written"] = _digest(data)
        written.append(rel)
        _save_record(common_dir, plan.harness, record)  # after each file: a crash loses none
        for h in sharing:  # the same bytes are what they wrote too
            others[h]["files"][rel]["written"] = _digest(data)
            _save_record(common_dir, h, others[h])
    return written


def restore(toplevel: str, common_dir: str, harness: str, unmerge=None) -> dict:
    """Take back what *harness*'s installs wrote: ``{"restored", "deleted", "kept",
    "unmerged", "changed", "dirs"}`` (relative paths; *kept*: still used by another
    installed harness; *unmerged*: edited since we wrote it, so only our parts were taken
    out by ``unmerge(rel, text)`` (the text left, or None when it cannot tell ours);
    *changed*: edited since, left as it is)."""
    record = load_record(common_dir, harness)
    out: dict[str, list[str]] = {"restored": [], "deleted": [], "kept": [], "unmerged": [],
                                 "changed": [], "dirs": []}
    others = {h: load_record(common_dir, h) for h in HARNESSES if h != harness}
    for rel, entry in sorted(record["files"].items()):
        sharing = [h for h, r in others.items() if rel in r["files"]]
        if sharing:
            # the others keep the file; the earliest record holds the true original
            for h in sharing:
                theirs = others[h]["files"][rel]
                if entry.get("seq", 0) < theirs.get("seq", 0):
                    theirs.update(original=entry["original"], seq=entry["seq"])
                _save_record(common_dir, h, others[h])
            out["kept"].append(rel)
            continue
        path = Path(toplevel, rel)
        now = read_bytes(path)
        if now is not None and _digest(now) != entry.get("written"):
            # edited since our last write: a person's changes stay, ours go
            try:
                left = unmerge(rel, now.decode("utf-8")) if unmerge else None
            except (UnicodeDecodeError, ValueError, BadInput):
                left = None
            if left is None:
                out["changed"].append(rel)
                continue
            if left or entry["original"] is not None:
                _write(path, left.encode("utf-8"))
            else:
                path.unlink()
            out["unmerged"].append(rel)
            continue
        if entry["original"] is None:
            if now is not None:
                try:
                    path.unlink()
                except OSError as exc:
                    raise os_failure(exc, str(path)) from None
            out["deleted"].append(rel)
        else:
            original = base64.b64decode(entry["original"])
            if now != original:
                _write(path, original)
            out["restored"].append(rel)
    shared_dirs = {d for r in others.values() for d in r["dirs"]}
    for rel_dir in sorted(record["dirs"], key=len, reverse=True):
        directory = Path(toplevel, rel_dir)
        if rel_dir in shared_dirs:
            continue
        try:
            directory.rmdir()  # only when empty: never a person's files
            out["dirs"].append(rel_dir)
        except OSError:
            # still holds another harness's file: it removes the directory later
            for h, r in others.items():
                if any(f.startswith(rel_dir + "/") for f in r["files"]) and \
                        rel_dir not in r["dirs"]:
                    r["dirs"].append(rel_dir)
                    _save_record(common_dir, h, r)
    record_file(common_dir, harness).unlink(missing_ok=True)
    return out


def installed(common_dir: str) -> list[str]:
    """The harnesses this clone holds an install record of."""
    return [h for h in HARNESSES if record_file(common_dir, h).exists()]
