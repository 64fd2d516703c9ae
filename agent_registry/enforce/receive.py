"""The server's pre-receive hook (docs/server.md): refuse a push to a code branch that
changes a path another live session holds, reading the registry refs the clones pushed
to this bare repository.  Standard library only: ``agent-registry server install`` bundles
it, with the modules it reads the registry through, into the hook file itself.

Fail closed: a registry branch that exists but cannot be read, or a push whose changes
git cannot list, is refused in one line naming the override.  The override is a push
option, ``git push -o agent-registry.allow=REASON``, recorded (who, when, which ref, over
whose locks, why) in ``<repo>/agent-registry/server-overrides.jsonl`` before the push is
let through: when it cannot be recorded, the push is refused.
"""
from __future__ import annotations

import os
import sys
import time

from ..store import jsontext
from ..store.git import GitError, discover
from .guard import PERSON, UNREADABLE, Guard, Report, describe
from .pushcheck import ZERO, is_code_ref, judge, reach, received_changes

ALLOW = "agent-registry.allow"
SESSION = "agent-registry.session"
LOG = "server-overrides.jsonl"
# who pushes, as the usual ways of serving git name them (ssh forced commands, gitolite,
# GitLab, Gitea/Forgejo, http with auth), else the account the hook runs as (account())
USER_VARS = ("GL_USERNAME", "GL_USER", "GITEA_PUSHER_NAME", "REMOTE_USER", "USER")


def say(message: str) -> None:
    print(message, file=sys.stderr)


def account() -> str:
    """The name of the account the hook runs as, for a server that names no pusher and
    leaves $USER unset (a service, a container): its passwd entry's, else its uid."""
    try:
        import pwd
    except ImportError:  # Windows: no passwd, the variable names the account
        return os.environ.get("USERNAME", "")
    try:
        return pwd.getpwuid(os.getuid()).pw_name
    except KeyError:  # a uid with no passwd entry
        return str(os.getuid())


def push_options(environ: dict[str, str]) -> dict[str, str]:
    """The push's ``-o KEY=VALUE`` options (git hands them to pre-receive as
    GIT_PUSH_OPTION_<i>), the last of a key winning."""
    try:
        count = int(environ.get("GIT_PUSH_OPTION_COUNT", "0"))
    except ValueError:
        count = 0
    options = {}
    for i in range(count):
        key, _, value = environ.get(f"GIT_PUSH_OPTION_{i}", "").partition("=")
        options[key.strip()] = value.strip()
    return options


def refusal(ref: str, report: Report, changed_by: dict[str, list[str]], pusher: str) -> str:
    """The refusal of one ref update: each held path, its holder, what changes it, and
    how to reach the holder; then the ways on."""
    if report.unreadable:
        return (f"agent-registry: push to {ref} refused: {report.mode[len(UNREADABLE):]}; "
                "repair it (agent-registry sync from a clone pushes the registry again), or "
                f"override deliberately: git push -o {ALLOW}='REASON' ... (recorded on the "
                "server)")
    lines = [f"agent-registry: push to {ref} refused: {len(report.conflicts)} path(s) "
             f"locked by another live session (pushing as {pusher}):"]
    for conflict in report.conflicts:
        lines.append(f"  {describe(conflict)}; changed by "
                     + ", ".join(changed_by.get(conflict.path, ["this push"])))
    owners = list(dict.fromkeys(c.owner for c in report.conflicts))
    lines += ["  " + line for line in reach(report.conflicts)]
    lines.append(f"agent-registry: if you are {' or '.join(owners)}: git push -o "
                 f"{SESSION}={owners[0]} ...; else override deliberately: git push -o "
                 f"{ALLOW}='REASON' ... (recorded on the server)")
    return "\n".join(lines)


def record(common_dir: str, entry: dict) -> None:
    """Append one override to the server's log (OSError when it cannot)."""
    folder = os.path.join(common_dir, "agent-registry")
    os.makedirs(folder, exist_ok=True)
    line = jsontext.dumps(entry, sort_keys=True, ensure_ascii=True) + "\n"
    fd = os.open(os.path.join(folder, LOG), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())  # one write of one line: concurrent hooks never interleave
    finally:
        os.close(fd)


def main(stdin_text: str, environ: dict[str, str]) -> int:
    updates = [tuple(line.split()) for line in stdin_text.splitlines() if len(line.split()) == 3]
    options = push_options(environ)
    session = options.get(SESSION) or None
    try:
        guard = Guard(discover("."))
    except Exception as exc:
        # nothing can be checked or recorded: refused, even with the override
        say(f"agent-registry: push refused: the server hook cannot read this repository "
            f"({exc}); repair it, or remove the hook: agent-registry server uninstall")
        return 1
    guard.my_pids = set()  # the hook's processes are the server's, never an agent's
    try:
        refused = []
        for old, new, ref in updates:
            if new == ZERO or not is_code_ref(ref, guard.branch):
                continue
            try:
                changes = received_changes(environ, old, new)
            except GitError as exc:
                report = Report([], session, mode=f"{UNREADABLE}cannot list what the push "
                                                  f"changes ({exc})")
                refused.append((ref, old, new, report, {}))
                continue
            report, changed_by = judge(guard, changes, session, ref[len("refs/heads/"):])
            if report.mode.startswith("off"):
                say(f"agent-registry: {report.mode}: {ref} not checked")
            elif report.blocked:
                refused.append((ref, old, new, report, changed_by))
    finally:
        guard.close()
    if not refused:
        return 0
    pusher = session or PERSON
    reason = options.get(ALLOW, "")
    if not reason:
        say("\n".join(refusal(ref, report, changed_by, pusher)
                      for ref, _, _, report, changed_by in refused))
        return 1
    user = next((environ[v] for v in USER_VARS if environ.get(v)), None) or account()
    try:
        for ref, old, new, report, changed_by in refused:
            record(guard.info.common_dir, {
                "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "ref": ref,
                "old": old, "new": new, "reason": reason, "session": session, "user": user,
                "mode": report.mode, "conflicts": [c.to_dict() for c in report.conflicts],
                "changed_by": changed_by})
    except OSError as exc:
        say(f"agent-registry: push refused: the override could not be recorded ({exc})")
        return 1
    for ref, _, _, report, _ in refused:
        say(f"agent-registry: {ALLOW}: push to {ref} allowed over "
            + ("; ".join(describe(c) for c in report.conflicts) or report.mode)
            + f" (recorded on the server: {reason})")
    return 0
