"""CPU time of each git process a command starts, the remote's included (Linux).

    env = wrap(folder, log, env)   # git, upload-pack and receive-pack run through shims
    ... run commands with env ...
    rows = processes(log)          # one per process: its own CPU, its parent's name

A shim is this file run as a script under the name of the git program it stands for: it
starts the real program, waits for it (``wait4`` gives the CPU time of the program and of
everything it waited for), and appends one line to the log: the program's pid, its
parent's and grandparent's pids (a ``sh -c`` may sit between git and upload-pack), that
CPU time, its own, and the command.  A process's own CPU is its total minus that of the
shims it started, so the shims' own start-up (a Python interpreter each) is counted
apart and subtracted from nothing it did not cause.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

REMOTE = ("git-upload-pack", "git-receive-pack")  # what git runs for the remote
SHIMMED = ("git", *REMOTE)


def wrap(folder: str, log: str, env: dict[str, str]) -> dict[str, str]:
    """*env* with git, and the git programs git starts, run through shims made in
    *folder* (an empty directory), logging to *log*."""
    real = subprocess.run(["git", "--exec-path"], capture_output=True, text=True,
                          env=env, check=True).stdout.strip()
    exec_path, bin_path = os.path.join(folder, "exec"), os.path.join(folder, "bin")
    os.makedirs(exec_path)
    os.makedirs(bin_path)
    for name in os.listdir(real):  # the helpers git finds on its exec path, as they are
        if name not in SHIMMED:
            os.symlink(os.path.join(real, name), os.path.join(exec_path, name))
    shim = os.path.join(folder, "shim.py")
    with open(shim, "w") as out:
        out.write(f"#!{sys.executable} -S\n")
        with open(__file__) as source:
            out.write(source.read())
    os.chmod(shim, 0o755)
    for name in SHIMMED:
        os.symlink(shim, os.path.join(exec_path, name))
    os.symlink(shim, os.path.join(bin_path, "git"))
    return {**env, "PATH": bin_path + os.pathsep + env.get("PATH", ""),
            "GIT_EXEC_PATH": exec_path, "PROCTIMES_REAL": real, "PROCTIMES_LOG": log}


def processes(log: str) -> tuple[list[dict], float]:
    """The logged processes (``name``, ``parent``: its parent's name or None when the
    measured command started it, ``own``: its CPU seconds without its children's,
    ``remote``: whether it ran for the remote, under upload-pack or receive-pack), and
    the CPU seconds of the shims the measured command started themselves."""
    rows = [dict(zip(("pid", "ppid", "gpid", "total", "shim", "command"), json.loads(line)))
            for line in open(log)]
    by_pid = {row["pid"]: row for row in rows}
    top_shims = 0.0
    for row in rows:
        row["own"], row["name"] = row["total"], _name(row["command"])
    for row in rows:
        row["up"] = by_pid.get(row["ppid"]) or by_pid.get(row["gpid"])
        row["parent"] = row["up"]["name"] if row["up"] else None
        if row["up"]:
            row["up"]["own"] -= row["total"] + row["shim"]
        else:
            top_shims += row["shim"]
    for row in rows:
        up, row["remote"] = row, False
        while up and not row["remote"]:
            row["remote"], up = up["name"] in REMOTE, up["up"]
    return rows, top_shims


def _name(command: list[str]) -> str:
    words = [w for w in command if not w.startswith("--git-dir")]
    return "git " + words[1] if words[0] == "git" and len(words) > 1 else words[0]


def _shim() -> None:
    import resource
    name = os.path.basename(sys.argv[0])
    real = os.path.join(os.environ["PROCTIMES_REAL"], name)
    pid = os.fork()
    if pid == 0:
        os.execv(real, [name, *sys.argv[1:]])
    _, status, usage = os.wait4(pid, 0)
    mine = resource.getrusage(resource.RUSAGE_SELF)
    try:
        with open(f"/proc/{os.getppid()}/stat") as stat:
            gpid = int(stat.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        gpid = 0
    line = json.dumps([pid, os.getppid(), gpid, usage.ru_utime + usage.ru_stime,
                       mine.ru_utime + mine.ru_stime, [name, *sys.argv[1:3]]]) + "\n"
    fd = os.open(os.environ["PROCTIMES_LOG"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.write(fd, line.encode())
    os.close(fd)
    code = os.waitstatus_to_exitcode(status)
    os._exit(code if code >= 0 else 128 - code)  # killed by signal N: 128 + N, as a shell


if __name__ == "__main__":
    _shim()
