"""Moving a branch in this process, as git's files backend moves it
(refs/files-backend.c), for a process that moves its refs again and again (the MCP
server, the dashboard, a heartbeat thread).

Through the kept ``git update-ref --stdin`` (store/refupdates.py) every move is a round
trip to another process and back, about a millisecond of a warm claim, most of it
waking one process and then the other.  Here it is git's own steps, in git's order:
create ``<ref>.lock`` (``O_CREAT|O_EXCL``: the lock git takes, so git's processes and
this one exclude each other), read the ref under it, compare it with the expected value,
check that the new value is a commit, write it into the lock, append git's reflog line,
rename the lock onto the ref.  A failure at any step removes the lock; a kill leaves it,
as a killed git does, and the one-shot ``update-ref`` meets it (store/git.py says how).

A process learns that identity from git's line; a later process of the same user, under
the same config files and environment, reads it from where the last one kept it
(``<common dir>/agent-registry/reflog-ident``, with what it was learned under), so a
one-shot claim or heartbeat starts no git process either.  It is kept only where the
e-mail is set (config or environment): git's default e-mail is the host's name as the
resolver spells it, which nothing here can vouch for.

Only where that is all git would do: a loose ref under ``refs/heads/`` whose reflog
exists (git appends to an existing log whatever ``core.logAllRefUpdates`` says; whether
to create one is git's to decide), moved from a value to another, with the committer
identity git itself wrote in this process's last reflog line, under config files
unchanged since.  Everything else is git's: reftable repositories (the caller's check),
a ``reference-transaction`` hook, config that names ``core.hooksPath``, hooks, includes,
``core.sharedRepository``, ``core.fsync*`` or symlinked refs, config from the
environment, HEAD pointing at the ref (git writes HEAD's reflog too), a symbolic, packed
or unreadable ref, creations and deletions, a reason git would reword.
"""
from __future__ import annotations

import os
import stat
import time

from .gitconfig import config_files
from .rawfile import read_bytes, write_all

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

# config that changes what a ref update does beyond these steps: git's, then
CONFIG_GIT_DECIDES = (b"sharedrepository", b"fsync", b"hookspath", b"[hook", b"[include",
                      b"symlinkrefs")
ENV_CONFIG = ("GIT_CONFIG_PARAMETERS", "GIT_CONFIG_COUNT", "GIT_CONFIG")
# what else git's committer identity is read from: $EMAIL, the user's passwd entry (the
# name, when no config names one) and the host's name (GIT_COMMITTER_* never reach the
# git a registry runs: store/git.py clean_env)
ENV_IDENT = ("EMAIL",)
MARGIN_NS = 50_000_000  # 50 ms, several of the kernel's coarse clock ticks
TAIL = 4096  # bytes of a reflog read back for the line git just wrote


class LooseRefs:
    """The loose branches of one repository, moved here when git would do no more."""

    def __init__(self, git_dir: str, common_dir: str, is_commit: Callable[[str], bool],
                 kept: str | None = None) -> None:
        self._git_dir = git_dir
        self._common = common_dir
        self._is_commit = is_commit  # does the object store hold this commit (git checks)
        self._configs = config_files(git_dir)
        self._ident: bytes | None = None  # "Name <email>", as git last wrote it here
        self._stamp: list | None = None  # the config files when last judged (None: not yet)
        self._kept = kept  # where the identity is kept for the next process (None: nowhere)
        if kept:
            self._read_kept(kept)

    def _config_stamp(self) -> list:
        stamp = []
        for name in self._configs:
            try:
                st = os.stat(name)
                stamp.append((st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns))
            except OSError:
                stamp.append(None)
        return stamp

    def witnessed(self, ref: str, old: str, new: str) -> None:
        """Learn the committer identity from the reflog line git wrote moving *ref* from
        *old* to *new* in this process, when no config file changed since a little
        before that line's second (git took its identity from them) and none names what
        git must do itself.  Under config files already judged, nothing is read again."""
        stamp = self._config_stamp()
        if stamp == self._stamp:
            return  # learned, or found to be git's, under these very files
        self._ident, self._stamp = None, stamp
        texts = []
        for name, st in zip(self._configs, stamp):
            if st is not None:
                try:
                    texts.append(read_bytes(name).lower())
                except OSError:
                    self._stamp = None
                    return
        if any(os.environ.get(name) for name in ENV_CONFIG) or \
                any(word in text for text in texts for word in CONFIG_GIT_DECIDES):
            return  # git's, until the files change
        self._stamp = None  # not learned yet: from the next line git writes, then
        try:
            with open(os.path.join(self._common, "logs", ref), "rb") as log:
                log.seek(max(0, log.seek(0, os.SEEK_END) - TAIL))
                tail = log.read()
        except OSError:
            return
        prefix = f"{old} {new} ".encode()
        line = next((line for line in reversed(tail.split(b"\n")) if line.startswith(prefix)), b"")
        who, tab, _ = line[len(prefix):].partition(b"\t")
        parts = who.rsplit(b" ", 2)  # "Name <email>", the time, its zone
        ident, when = (parts[0], parts[1]) if len(parts) == 3 else (b"", b"")
        if not (tab and ident.endswith(b">") and b" <" in ident and when.isdigit()):
            return
        # a config file changed in that line's second or after it may hold another
        # identity than git read (with a margin: the kernel stamps files with a clock a
        # tick behind the one git read)
        if any(st is not None and st[3] >= int(when) * 10**9 - MARGIN_NS for st in stamp):
            return
        self._ident, self._stamp = ident, stamp
        if self._kept and (os.environ.get("EMAIL") or any(map(_sets_email, texts))):
            self._keep(self._kept, ident, stamp)

    def _learned_under(self, stamp: list) -> bytes:
        """What git's identity was read from, besides the reflog line: the config files
        and their stamps, the environment, the user, the passwd file and the host."""
        try:
            st = os.stat("/etc/passwd")
            passwd = (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
        except OSError:
            passwd = None
        uid = os.getuid() if hasattr(os, "getuid") else None
        host = os.uname().nodename if hasattr(os, "uname") else None
        return repr((self._configs, stamp, [os.environ.get(n) for n in ENV_CONFIG + ENV_IDENT],
                     uid, host, passwd)).encode()

    def _keep(self, path: str, ident: bytes, stamp: list) -> None:
        """Keep *ident* for the next process (a file replaced whole: a reader sees the
        old one or the new one); one that cannot be written leaves git to write."""
        temp = f"{path}.{os.getpid()}.tmp"
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(temp, "wb") as out:
                out.write(self._learned_under(stamp) + b"\n" + ident + b"\n")
            os.replace(temp, path)
        except OSError:
            try:
                os.unlink(temp)
            except OSError:
                pass

    def _read_kept(self, path: str) -> None:
        """The identity an earlier process kept, when it was learned under what is here
        now; else nothing (git writes the next line, and this process learns from it)."""
        try:
            under, ident, _ = read_bytes(path).split(b"\n", 2)
        except (OSError, ValueError):
            return
        stamp = self._config_stamp()
        if under == self._learned_under(stamp) and ident.endswith(b">") and b" <" in ident:
            self._ident, self._stamp = ident, stamp

    def move(self, ref: str, new: str, old: str, reason: str) -> bool | None:
        """Move *ref* from *old* to *new*: True when moved; False when refused (another
        value, a lock there, a step that failed: nothing changed, the one-shot
        ``update-ref`` says why); None when this is git's to do (nothing changed)."""
        if self._ident is None or not ref.startswith("refs/heads/") or not _plain(reason) \
                or not new.strip("0") or not old.strip("0"):
            return None
        if self._config_stamp() != self._stamp:
            self._ident = None  # learned again from git's next line
            return None
        if os.path.lexists(os.path.join(self._common, "hooks", "reference-transaction")) or \
                self._head_names(ref):
            return None
        path = os.path.join(self._common, ref)
        lock = path + ".lock"
        try:
            fd = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        except FileExistsError:
            return False  # another process's (git's or ours), or one a kill left
        except OSError:
            return None
        moved = False
        try:
            current = _loose_value(path)
            if current != old:
                return None if current is None else False
            if new == current:
                return True  # as git: the ref already names it, nothing is written
            if not self._is_commit(new):
                return None
            write_all(fd, f"{new}\n".encode())
            os.close(fd)
            fd = -1
            try:
                log = os.open(os.path.join(self._common, "logs", ref), os.O_APPEND | os.O_WRONLY)
            except OSError:
                return None  # no reflog: whether to start one is git's
            now = int(time.time())
            try:
                write_all(log, f"{old} {new} ".encode() + self._ident +
                          f" {now} {_zone(now)}\t{reason}\n".encode())
            finally:
                os.close(log)
            os.replace(lock, path)  # rename(2), and on Windows too over the old file
            moved = True
            return True
        except OSError:
            return False
        finally:
            if fd >= 0:
                os.close(fd)
            if not moved:
                try:
                    os.unlink(lock)
                except OSError:
                    pass

    def _head_names(self, ref: str) -> bool:
        """Whether HEAD may point at *ref* (git then writes HEAD's reflog too)."""
        head = os.path.join(self._git_dir, "HEAD")
        try:
            data = read_bytes(head)
        except OSError:
            return True
        if os.path.islink(head):
            return True
        return data.startswith(b"ref:") and data[4:].strip() == ref.encode()


def _loose_value(path: str) -> str | None:
    """The object name in the loose ref file *path*, None when it is anything else (no
    file, a symbolic ref, a symlink, damage): git's to read."""
    try:
        if not stat.S_ISREG(os.lstat(path).st_mode):
            return None
        data = read_bytes(path)
    except OSError:
        return None
    value = data[:-1].decode("ascii", "replace")
    if data.endswith(b"\n") and len(value) in (40, 64) and \
            all(c in "0123456789abcdef" for c in value):
        return value
    return None


def _sets_email(text: bytes) -> bool:
    """Whether one config file's lower-cased *text* gives the committer an e-mail
    (``user.email`` or ``committer.email``, a plain ``key = value`` line of a plain
    section): else git's e-mail may be the host's name as the resolver spells it.  Other
    keys naming an e-mail (``sendemail.*``, ``author.email``) do not count."""
    section = b""
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith(b"["):
            section = line
            continue
        key, eq, value = (part.strip() for part in line.partition(b"="))
        if section in (b"[user]", b"[committer]") and key == b"email" and eq and value:
            return True
    return False


def _plain(reason: str) -> bool:
    """A reflog message git keeps as it is (it folds runs of white space, trims the end)."""
    return bool(reason) and reason == reason.strip(" ") and "  " not in reason and \
        all(c >= " " for c in reason)


def _zone(now: int) -> str:
    """The local UTC offset at *now* as git writes it (``+0100``)."""
    minutes = time.localtime(now).tm_gmtoff // 60
    sign = "-" if minutes < 0 else "+"
    return f"{sign}{abs(minutes) // 60:02d}{abs(minutes) % 60:02d}"
