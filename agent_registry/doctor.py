"""``agent-registry doctor``: is this clone set up to coordinate agents, and if not, what
is wrong and what fixes it?

Each check gives one line: a verdict with a status, ``ok``, ``warn`` (worth knowing,
nothing broken) or ``fail`` (a problem: ``doctor`` exits 1).  Where a fix is safe, that
is, it does only what one of our own commands does when asked (``init``, ``hooks
install``, ``harness install``, ``sync``, ``cleanup``, bringing the wiki index up to
date), ``--fix`` runs it and then checks everything again, so the answer is the state
after the fixes.  A fix that needs a person (a corrupt record, a remote that does not
answer, a clock) is named, never guessed at.  Nothing here touches the working tree,
the index or HEAD: only what the named commands touch.

Over 400 lines: one short function per check, with the probes the hooks, harness and
extras checks share; a split would scatter what `doctor` says about one clone.
"""
from __future__ import annotations

import json
import os
import sys
from functools import partial
from pathlib import Path
from typing import Callable

from .branch.records import UnreadableRecord, load_session
from .branch.staleness import CLOCK_SKEW
from .branch.view import parse_lock
from .core.registry import Registry
from .enforce import hooks as githooks
from .errors import RegistryError, Unreadable
from .store.git import git_version, run_git

MIN_GIT = (2, 31)  # rev-parse --path-format=absolute, which discovery and hooks rely on
SHOWN = 3  # names listed in a verdict before "and N more"


class Finding:
    """One check's answer: status, one-line verdict, the fix in words, and *repair*
    (the fix as a function) when it is safe to run."""

    def __init__(self, name: str, status: str, verdict: str, fix: str = "",
                 repair: Callable[[], object] | None = None) -> None:
        self.name, self.status, self.verdict, self.fix, self.repair = \
            name, status, verdict, fix, repair

    def to_dict(self) -> dict:
        return {"name": self.name, "status": self.status, "verdict": self.verdict,
                "fix": self.fix or None, "fixable": self.repair is not None}


def _names(items: list[str]) -> str:
    more = len(items) - SHOWN
    return ", ".join(items[:SHOWN]) + (f" and {more} more" if more > 0 else "")


# -- git and the branch -----------------------------------------------------------------

def check_git(registry: Registry) -> Finding:
    version = git_version()
    fmt = registry.repo.info.object_format
    # git's own words only when they hold no version number
    shown = ".".join(map(str, version)) or run_git(["version"]).stdout.decode().strip()
    if version and version[:2] < MIN_GIT:
        return Finding("git", "fail", f"git {shown} is older than "
                       f"{'.'.join(map(str, MIN_GIT))}, which agent-registry needs",
                       "install a newer git")
    return Finding("git", "ok", f"git {shown}, object format {fmt}, "
                   f"ref format {registry.repo.ref_format}")


def unreadable_records(registry: Registry, tip: str) -> tuple[int, list[str]]:
    """(records read, "path (why)" of those that do not parse) of commit *tip*: every
    session, lock and wiki entry, read in one pipelined batch."""
    from .wiki.entry import parse_entry, sid_of
    out = registry.repo.git("ls-tree", "-r", "-z", tip).stdout.decode(errors="replace")
    files = []
    for item in filter(None, out.split("\0")):
        meta, _, path = item.partition("\t")
        if meta.split()[1] == "blob" and path.startswith(("sessions/", "locks/", "wiki/")):
            files.append((path, meta.split()[2]))
    bad = []
    for (path, _), raw in zip(files, registry.repo.read_blobs([oid for _, oid in files])):
        try:
            if raw is None:
                raise UnreadableRecord("missing object")
            if path.endswith(".yaml"):
                load_session(raw)
            elif path.startswith("locks/") and path.endswith(".json"):
                parse_lock(raw, path)  # as every lookup reads it: also stored under its name
            elif path.endswith(".json"):
                json.loads(raw)
            elif path.startswith("wiki/") and (sid := sid_of(path[5:])):
                parse_entry(raw, sid)
        except (UnreadableRecord, ValueError) as exc:
            bad.append(f"{path} ({str(exc).splitlines()[0] if str(exc) else 'unreadable'})")
    return len(files), bad


def damaged_refs(registry: Registry) -> list[tuple[str, Unreadable]]:
    """(ref, why) of each registry ref, local or remote-tracking, that cannot be read
    whole: the ref itself (an empty file, a loop), or an object of its tip's tree."""
    repo, found = registry.repo, []
    prefixes = [f"refs/heads/{registry.branch}"] + (
        [f"refs/remotes/{registry.remote}/{registry.branch}"] if registry.remote else [])
    for prefix in prefixes:
        try:
            names = repo.ref_names(prefix)
        except Unreadable as exc:  # packed-refs itself
            found.append(("packed-refs", exc))
            continue
        for ref in names:
            try:
                if (tip := repo.read_ref(ref)) is not None:
                    repo.read_whole(tip)
            except Unreadable as exc:
                found.append((ref, exc))
    return found


def repair_refs(registry: Registry, damaged: list[tuple[str, Unreadable]]) -> None:
    """Set the packs cut short and the damaged objects' loose files aside, fetch every
    registry ref again from the remote (all its objects: ``--refetch``, since git takes
    the tips for whole), and put each damaged ref back where its reflog, else the
    remote, last had it."""
    repo = registry.repo
    repo.set_aside_packs()
    for _, exc in damaged:
        if exc.details.get("object"):
            repo.set_aside(exc.details["object"])
    tracking = f"refs/remotes/{registry.remote}/"
    for ref, _ in damaged:
        if ref.startswith(tracking):
            repo.drop_damaged_ref(ref)  # a copy of the remote's: the fetch writes it again
    if registry.remote:
        spec = f"+refs/heads/{registry.branch}*:{tracking}{registry.branch}*"
        proc = repo.git("fetch", "--quiet", "--refetch", registry.remote, spec, check=False)
        if proc.returncode != 0:
            raise RegistryError(f"cannot fetch the registry again from {registry.remote}: "
                                + (proc.stderr.decode(errors="replace").strip().splitlines()
                                   or ["?"])[-1])
    for ref, _ in damaged:
        if not ref.startswith("refs/heads/"):
            continue
        mirror = tracking + ref[len("refs/heads/"):] if registry.remote else None
        tip = next((tip for tip in (repo.reflog_tip(ref), repo.read_ref(mirror) if mirror
                                    else None) if tip and _whole(registry, tip)), None)
        if tip is not None and (repo.drop_damaged_ref(ref) or repo.read_ref(ref) != tip):
            repo.git("update-ref", "-m", "agent-registry doctor --fix: restored", ref, tip)


def _whole(registry: Registry, tip: str) -> bool:
    try:
        registry.repo.read_whole(tip)
    except Unreadable:
        return False
    return True


def check_branch(registry: Registry) -> Finding:
    damaged = damaged_refs(registry)
    packs = [os.path.basename(idx)[:-4] + ".pack" for idx in registry.repo.mismatched_packs()]
    if damaged or packs:
        fixable = registry.remote or any(r.startswith("refs/heads/") and
                                         exc.details.get("object") is None for r, exc in damaged)
        said = [exc.message.split("; ")[0] for _, exc in damaged] + [
            f"{name} does not match its index (cut short)" for name in packs]
        return Finding("branch", "fail", f"{len(said)} damaged: {'; '.join(said[:SHOWN])}"
                       + (f" and {len(said) - SHOWN} more" if len(said) > SHOWN else ""),
                       "agent-registry doctor --fix" if fixable else
                       "git fsck, then restore the objects from another clone",
                       partial(repair_refs, registry, damaged) if fixable else None)
    tip = registry.tip()
    if tip is None:
        return Finding("branch", "fail", f"no registry branch {registry.branch!r} yet",
                       "agent-registry init", registry.init)
    try:
        count, bad = unreadable_records(registry, tip)
    except RegistryError as exc:
        return Finding("branch", "fail", f"{registry.branch} cannot be read: {exc.message}",
                       "repair or remove the branch by hand")
    if bad:
        return Finding("branch", "fail", f"{registry.branch}: {len(bad)} of {count} records "
                       f"do not parse: {_names(bad)}",
                       "fix or remove them on the branch by hand (commands fail closed on them)")
    return Finding("branch", "ok", f"{registry.branch} at {tip[:12]}: {count} records, "
                   "all readable")


# -- hooks and harness settings ----------------------------------------------------------

def check_hooks(registry: Registry) -> Finding:
    info = registry.repo.info
    state = githooks.status(info)
    repair = partial(githooks.install, info)
    missing, foreign, broken, stale, chained, idle = [], [], [], [], [], []
    unimportable: list[str] = []
    cannot: set[str] = set()
    for hook in state["hooks"]:
        name, path = hook["hook"], Path(hook["path"])
        if hook["state"] == "not installed":
            missing.append(name)
        elif hook["state"] == "other hook (not ours)":
            foreign.append(name)
        elif hook["state"].startswith("broken"):
            broken.append(name)
        elif (why := _hook_python_problem(path)):
            unimportable.append(name)
            cannot.add(why)
        elif path.read_text(encoding="utf-8", errors="replace") != githooks.hook_text(name):
            stale.append(name)
        if hook["chained"] and hook["state"] == "installed":
            # our hook runs the chained one only when it is executable, as git would
            (chained if os.access(hook["chained"], os.X_OK) else idle).append(name)
    fix = "agent-registry hooks install"
    if len(missing) == len(state["hooks"]):
        return Finding("hooks", "fail", "no agent-registry git hook is installed: the guard "
                       "is off", fix, repair)
    problems = [f"{what}: {', '.join(names)}" for what, names in (
        ("not installed", missing), ("another tool's hook in our place", foreign),
        ("pointing at a Python that is gone", broken),
        (f"refusing every commit, since {'; '.join(sorted(cannot))}", unimportable),
        (f"not current (another version or Python than {sys.executable})", stale)) if names]
    if problems:
        return Finding("hooks", "fail", "; ".join(problems), fix, repair)
    note = f", chaining the existing {', '.join(chained)}" if chained else ""
    verdict = f"{len(state['hooks'])} hooks installed and current in {state['hooks_dir']}{note}"
    if idle:
        return Finding("hooks", "warn", f"{verdict}; the chained {', '.join(idle)} is not "
                       "executable, so it does not run (as git would not run it)",
                       f"chmod +x the {githooks.CHAINED_SUFFIX} file if it should run")
    return Finding("hooks", "ok", verdict)


_PROBED: dict[str, str | None] = {}  # interpreter -> what it lacks (None: nothing), per run


def _probe(python: str, extras: list[str] = ()) -> str | None:
    """What interpreter *python* lacks among agent_registry and *extras*, in one phrase
    (``agent_registry: No module named …``, ``the mcp extra (mcp)``), or None; asked once
    per interpreter and extras in a run of doctor."""
    import subprocess
    from .store.extras import install_command, probe_code
    key = f"{python} {' '.join(extras)}"
    if key not in _PROBED:
        try:
            proc = subprocess.run([python, "-c", probe_code(list(extras))], capture_output=True,
                                  text=True, timeout=60, cwd="/")
            lines = proc.stdout.splitlines() or (
                [f"package: {proc.stderr.strip().splitlines()[-1]}"] if proc.returncode else [])
        except (OSError, subprocess.TimeoutExpired) as exc:
            lines = [f"package: cannot run ({exc})"]
        said = [f"{python} cannot import agent_registry ({l[9:]})" if l.startswith("package: ")
                else f"{python} lacks the {l.split(':')[0]} extra ({l.split(': ', 1)[1]} not "
                f"installed: {install_command(l.split(':')[0])})" for l in lines]
        _PROBED[key] = "; ".join(said) or None
    return _PROBED[key]


def _hook_python_problem(path: Path) -> str | None:
    """Why the Python hook *path* runs cannot import agent_registry (None: it can, or it
    is gone, which the hook's own state says)."""
    python = githooks.installed_python(path)
    if python is None or not os.access(python, os.X_OK):
        return None
    return _probe(python)


def _interpreter(executable: str) -> str | None:
    """The Python that *executable* runs: itself, or its script's ``#!`` interpreter."""
    try:
        with open(executable, "rb") as f:
            head = f.readline(400).decode(errors="replace")
    except OSError:
        return None
    if not head.startswith("#!"):
        return executable  # a binary: an interpreter itself (`python -m agent_registry`)
    words = head[2:].split()
    if words and os.path.basename(words[0]) == "env" and len(words) > 1:
        import shutil
        return shutil.which(words[1])
    return words[0] if words else None


def check_extras(registry: Registry) -> Finding:
    """The extras what is installed here needs: the MCP entries' server the mcp extra
    (in the interpreter that entry runs); configured notifications the notify extra and a
    configured LLM the llm extra (in this one)."""
    from .harness import mcp
    from .store.extras import install_command, missing
    info = registry.repo.info
    fails, warns, needs = [], [], []
    entries = [h for h in mcp.FILES if info.toplevel and mcp.state(info.toplevel, h) == "current"]
    if entries:
        exe = mcp.server_command(info.toplevel)[0]
        python = _interpreter(exe)
        problem = _probe(python, ["mcp"]) if python else f"{exe} cannot be read"
        needs.append("mcp")
        if problem:
            fails.append(f"the MCP entries ({', '.join(entries)}) run {exe}: {problem}")
    from .watch.notify import URLS_ENV, settings
    repo = registry.repo
    try:
        urls = settings(repo)[URLS_ENV] or repo.git("config", "--get-all",
                                                   "agent-registry.notify", check=False).stdout
    except RegistryError:
        urls = ""
    if urls.strip() and missing("notify"):
        warns.append(f"notification targets are configured, but {sys.executable} lacks the "
                     f"notify extra: {install_command('notify')}")
    from .wiki.llm import resolve
    off = resolve()[1]
    if "[llm]'" in off:
        warns.append(f"an LLM is configured, but {off}")
    if fails:
        return Finding("extras", "fail", "; ".join(fails + warns),
                       "pip install the extra named, into the interpreter named")
    if warns:
        return Finding("extras", "warn", "; ".join(warns), "pip install the extra named")
    return Finding("extras", "ok", f"installed where needed: {', '.join(needs)}" if needs
                   else "none needed (no MCP entry, notification target or LLM configured)")


def check_harness(registry: Registry) -> Finding:
    """Per installed harness: its parts current, the executable its hooks run present and
    importing agent_registry (else the gate blocks every edit), the edit gate running at
    all (a failure naming the one command that fixes it: a harness that does not trust
    it, or Aider's git hook missing, lets every edit through in silence), and the other
    trust the harness needs (a warning: only a person may grant it)."""
    from .harness import install as harness
    info = registry.repo.info
    if info.toplevel is None:
        return Finding("harness", "ok", "a bare repository: no harness settings")
    states = [harness.status(info.toplevel, info.git_dir, h) for h in harness.HARNESSES]
    states = [s for s in states if s["installed"]]
    if not states:
        return Finding("harness", "ok", "no harness integration installed "
                       "(`agent-registry harness install --all`)")
    broken, stale, untrusted, fixes, gates, gate_fixes = [], [], [], [], [], []
    problems: dict[str, str | None] = {}  # one run per executable, however many use it
    for state in states:
        name = state["harness"]
        for exe in state["executable"] or []:
            if exe["path"] not in problems:
                problems[exe["path"]] = _exe_problem(exe["start"]) if exe["ok"] else "is gone"
        gone = [f"{name} hooks run {exe['path']}, which {problems[exe['path']]}"
                for exe in state["executable"] or [] if problems[exe["path"]]]
        broken += gone
        parts = [k for k in ("hooks", "mcp", "skill", "protocol", "config")
                 if state.get(k) == "stale"]
        if state["broken"]:  # a file that cannot be merged: a person's to repair
            stale.append(f"{name} ({state['broken']})")
        elif parts:
            stale.append(f"{name} {', '.join(parts)}")
        if (parts or gone) and not state["broken"]:
            fixes.append(partial(_reinstall, info, state))
        if state.get("gate") and not gone:
            gates.append(f"{name}: the edit gate will not run ({state['gate']}): "
                         f"{state['gate_fix']}")
            gate_fixes.append(state["gate_fix"])
            if name == "aider" and not (parts or state["broken"]):
                fixes.append(partial(_reinstall, info, state))  # installs the git hooks
        elif state["trusted"] is False:
            untrusted.append(f"{name} ({state['trust_step']})")
    repair = (lambda: [fix() for fix in fixes]) if fixes else None
    names = ", ".join(s["harness"] for s in states)
    if broken or stale or gates:
        problems = broken + gates + ([f"not current: {'; '.join(stale)}"] if stale else [])
        fix = "; ".join(dict.fromkeys(gate_fixes)) if gates and not (broken or stale) \
            else "agent-registry harness install <harness> (again)"
        return Finding("harness", "fail", "; ".join(problems), fix, repair)
    if untrusted:
        return Finding("harness", "warn", f"installed, not trusted/approved: "
                       f"{'; '.join(untrusted)}",
                       "agent-registry harness install <harness> --trust, or as said")
    return Finding("harness", "ok", f"current: {names}")


def _exe_problem(start: list[str]) -> str | None:
    """Why hooks that start with *start* (the program, its flags, the launcher) cannot
    run (None: they can)."""
    import subprocess
    try:
        proc = subprocess.run([*start, "--version"], capture_output=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"cannot run ({exc})"
    if proc.returncode != 0:
        last = (proc.stderr.decode(errors="replace").strip().splitlines() or ["?"])[-1]
        return f"fails ({last[:120]}): it cannot import agent_registry"
    return None


def _reinstall(info, state: dict) -> None:
    """Write the harness's files again with the options they were installed with."""
    from .harness import install as harness
    mod = harness.module(state["harness"])
    commands = mod.installed_commands(info.toplevel) if getattr(mod, "HOOK_FILE", None) \
        else []
    options = harness.options_of(commands)
    options.mcp = state["mcp"] not in (None, "absent")
    harness.install_many(info.toplevel, info.git_dir, [state["harness"]], options)


# -- the remote ------------------------------------------------------------------------

def check_sync(registry: Registry) -> Finding:
    from .sync.remote import Offline, fetch, sync_state
    from .sync.shardsync import clone_sync_state, shard_sync_state, sync_all
    from .sync.state import redact
    if not registry.remote:
        return Finding("sync", "ok", "off: no remote, this clone works alone "
                       "(`agent-registry init --remote URL` shares it)")
    remote = redact(registry.remote)
    try:
        fetch(registry)  # moves only the remote-tracking ref
    except Offline as exc:
        return Finding("sync", "fail", exc.message, exc.advice)
    state = sync_state(registry)
    unconfirmed = registry.unconfirmed_claims()
    where = f"{remote} reachable, {state['ahead']} ahead, {state['behind']} behind"
    shards = shard_sync_state(registry)  # lock shards: their pending operations push too
    if shards is not None:
        where += f", shards ahead {shards['ahead']} of {shards['count']}"
    clone = clone_sync_state(registry)  # format 3: heartbeats and diary lines push too
    if clone is not None and clone["ahead"]:
        where += f", clone ref ahead {clone['ahead']}"
    push = partial(sync_all, registry)
    if unconfirmed:
        paths = sorted(f"{path} ({sid})" for sid, path in unconfirmed)
        return Finding("sync", "fail", f"{where}; {len(paths)} claim(s) not confirmed by "
                       f"{remote}: {_names(paths)}", "agent-registry sync", push)
    if state["ahead"] or (shards or {}).get("ahead") or (clone or {}).get("ahead"):
        return Finding("sync", "warn", f"{where}: this clone's changes are not on {remote} "
                       "yet", "agent-registry sync", push)
    from .sync.state import takes_atomic
    if shards is None and takes_atomic(registry) is False:  # init's one-branch fallback
        from .sync.remote import ACCEPT_ATOMIC
        return Finding("sync", "warn", f"{where}; the registry is one branch, not in lock "
                       f"shards: {remote} does not accept atomic pushes, which lock shards "
                       "are made with", f"{ACCEPT_ATOMIC}, then run "
                       "`agent-registry shard`")
    return Finding("sync", "ok", where)


def check_clock(registry: Registry) -> Finding:
    """This machine's clock against the newest registry commit of the remote (written by
    whichever clone pushed last) and the heartbeats of live sessions."""
    ref = registry.tracking_ref if registry.remote else None
    tip = registry.repo.read_ref(ref) if ref else None
    now = registry.clock()
    ahead = registry.clocks_ahead(registry.sessions())
    if ahead:
        hosts = sorted({a["host"] or a["session"] for a in ahead})
        most = max(a["ahead_seconds"] for a in ahead)
        return Finding("clock", "fail", f"heartbeats dated up to {most} s in the future, "
                       f"from {_names(hosts)}: a clock runs ahead",
                       "fix the clock of that machine (or this one) with NTP")
    if tip is None:
        return Finding("clock", "ok", "no remote commit to compare with; no heartbeat "
                       "from the future")
    stamp = int(registry.repo.git("log", "-1", "--format=%ct", tip).stdout.decode().strip())
    skew = stamp - now
    if skew > CLOCK_SKEW:
        return Finding("clock", "fail", f"the newest commit on {registry.remote} is dated "
                       f"{int(skew)} s after this machine's clock: this clock is slow, or "
                       "the clock of the clone that wrote it runs ahead",
                       "sync the clocks with NTP")
    return Finding("clock", "ok", f"the newest commit on {registry.remote} is "
                   f"{int(-skew)} s old: no skew beyond {int(CLOCK_SKEW)} s seen")


# -- sessions and locks --------------------------------------------------------------------

def check_owners(registry: Registry) -> Finding:
    from .store.procinfo import backend
    live = registry.sessions()
    if not backend().available:
        return Finding("owners", "warn", "no process information here (neither /proc nor "
                       "psutil): no owner's death is seen, so heartbeats and the TTL decide "
                       "when every session ends, and kill signals nothing",
                       "pip install psutil")
    blind = [s.id for s in live if not s.vouched]
    if not blind:
        return Finding("owners", "ok", f"{len(live)} live session(s), every owner process "
                       "vouched for" if live else "no live sessions")
    return Finding("owners", "warn", f"{len(blind)} of {len(live)} live session(s) have no "
                   f"owner process vouched for ({_names(blind)}): heartbeats and the TTL "
                   "decide when they end",
                   "register with --pid (or AGENT_REGISTRY_PID), or install the harness hooks")


def check_stale(registry: Registry) -> Finding:
    zombies = registry.zombies()
    stale = [l for l in registry.locks() if l["stale_reason"]]
    cleanup = partial(registry.cleanup, by="doctor", reason="agent-registry doctor --fix")
    if zombies:
        ids = [f"{session.id} ({reason})" for session, reason in zombies]
        return Finding("stale", "fail", f"{len(zombies)} zombie session(s) holding "
                       f"{sum(len(s.locks) for s, _ in zombies)} lock(s): {_names(ids)}",
                       "agent-registry cleanup", cleanup)
    if stale:
        return Finding("stale", "warn", f"{len(stale)} stale lock(s) others may take over: "
                       f"{_names([l['path'] for l in stale])}")
    return Finding("stale", "ok", "no zombie sessions, no stale locks")


def check_wiki_index(registry: Registry) -> Finding:
    from .wiki.index import EMPTY, WikiIndex
    tip = registry.tip()
    indexed = WikiIndex(registry).indexed()
    refresh = lambda: WikiIndex(registry, _progress()).open()  # noqa: E731
    if indexed is None:
        if tip is None or not registry.view().names("wiki"):
            return Finding("wiki index", "ok", "no wiki entries yet")
        return Finding("wiki index", "warn", "not built in this clone: the next `wiki query` "
                       "builds it first", "agent-registry wiki rebuild", refresh)
    if indexed != (tip or EMPTY):
        return Finding("wiki index", "warn", f"behind the branch (indexed {indexed[:12]}): "
                       "the next query updates it", "agent-registry wiki rebuild", refresh)
    return Finding("wiki index", "ok", f"up to date with {(tip or EMPTY)[:12]}")


def _progress():
    from .wiki.progress import Progress
    return Progress.on_terminal()


CHECKS = (check_git, check_branch, check_hooks, check_harness, check_extras, check_sync,
          check_clock,
          check_owners, check_stale, check_wiki_index)


def examine(registry: Registry) -> list[Finding]:
    """Every check; one that fails to run says so in its verdict, the others still run."""
    out = []
    for check in CHECKS:
        name = check.__name__[len("check_"):].replace("_", " ")
        try:
            out.append(check(registry))
        except RegistryError as exc:
            out.append(Finding(name, "fail", f"could not check: {exc.message}"))
    return out


def doctor(registry: Registry, fix: bool = False) -> dict:
    """``{"healthy", "checks": [{name, status, verdict, fix, fixable}], "fixed": [names],
    "fix_errors": [{name, error}]}``; with *fix*, the safe fixes run and the checks are
    made again."""
    findings = examine(registry)
    fixed, errors = [], []
    if fix:
        for finding in findings:
            if finding.status != "ok" and finding.repair is not None:
                try:
                    finding.repair()
                    fixed.append(finding.name)
                except RegistryError as exc:
                    errors.append({"name": finding.name, "error": exc.message})
        if fixed or errors:
            findings = examine(registry)
    return {"healthy": all(f.status != "fail" for f in findings),
            "checks": [f.to_dict() for f in findings], "fixed": fixed, "fix_errors": errors}
