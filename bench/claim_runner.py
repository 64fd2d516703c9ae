"""The instrumented runner of one ``agent-registry`` command, for profile_claim.py.

    python claim_runner.py REPORT_FILE ARGS...

runs the console script's click-free path (``agent_registry.cli.fast``: parse, execute;
after ``import re``, as pip's console script does) with the library's git-facing functions wrapped in
timers (exclusive wall and CPU time per phase; nothing in agent_registry is changed on
disk) and writes the phases as JSON to REPORT_FILE.  It imports nothing of its own
before the command has run, so the import phases are the command's own, and it leaves
the way the console script does (``cli.run``: no interpreter teardown) when there is one.
"""
import resource
import sys
import time


def cpu_ms() -> float:
    """CPU time so far of this process and of the children it has waited for."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime) * 1000


class Phases:
    """Exclusive wall and CPU time per label: time spent in a wrapped call, minus the
    time of wrapped calls inside it.  A git process's CPU counts where it is waited for."""

    def __init__(self) -> None:
        self.wall: dict[str, float] = {}
        self.cpu: dict[str, float] = {}
        self.calls: dict[str, int] = {}
        self._children: list[list[float]] = []

    def wrap(self, label: str, fn):
        def timed(*args, **kwargs):
            wall0, cpu0 = time.perf_counter() * 1000, cpu_ms()
            self._children.append([0.0, 0.0])
            try:
                return fn(*args, **kwargs)
            finally:
                wall, cpu = time.perf_counter() * 1000 - wall0, cpu_ms() - cpu0
                inner_wall, inner_cpu = self._children.pop()
                self.wall[label] = self.wall.get(label, 0.0) + wall - inner_wall
                self.cpu[label] = self.cpu.get(label, 0.0) + cpu - inner_cpu
                self.calls[label] = self.calls.get(label, 0) + 1
                if self._children:
                    self._children[-1][0] += wall
                    self._children[-1][1] += cpu
        return timed


def main(report_file: str, argv: list[str]) -> None:
    first, first_cpu = time.time(), cpu_ms()
    marks = [(time.perf_counter() * 1000, first_cpu)]
    import re  # noqa: F401  (pip's console script imports it before the command)
    from agent_registry.cli import fast as cli
    marks.append((time.perf_counter() * 1000, cpu_ms()))
    import fcntl
    from agent_registry.store import git as gitstore
    from agent_registry.store import spawn
    from agent_registry.core import registry
    from agent_registry.branch import view
    marks.append((time.perf_counter() * 1000, cpu_ms()))

    phases = Phases()
    spawned: list[str] = []
    real_start = spawn._start

    def counting_start(argv, *rest):
        words = list(argv)
        if words[1:2] == ["-C"]:
            del words[1:3]
        spawned.append(" ".join(words[:2]))
        return real_start(argv, *rest)

    spawn._start = counting_start
    targets = [
        (registry, "discover", "find the repository (its files, else git rev-parse)"),
        (registry, "read_config", "registry settings (config files, else git config)"),
        (gitstore.ObjectReader, "_start", "start git cat-file --batch"),
        (gitstore.ObjectReader, "read", "cat-file round trips"),
        (gitstore.ObjectReader, "close", "cat-file exit (its CPU for all reads lands here)"),
        (gitstore.Repo, "read_ref", "read the ref file"),
        (gitstore.Repo, "write_object", "write loose objects (zlib, files)"),
        (gitstore.Repo, "update_ref", "move the ref: the compare-and-swap (in process, else git update-ref)"),
        (registry, "registry_md", "render registry.md (Python)"),
        (registry, "branch_readme", "render README.md (Python)"),
        (view, "load_session", "parse session YAML"),
        (view, "dump_session", "emit session YAML"),
        (fcntl, "flock", "flock"),
    ]
    for owner, name, label in targets:
        if hasattr(owner, name):
            setattr(owner, name, phases.wrap(label, getattr(owner, name)))
    marks.append((time.perf_counter() * 1000, cpu_ms()))
    code = cli.execute(cli.parse(argv))
    marks.append((time.perf_counter() * 1000, cpu_ms()))
    report = {
        "code": code, "first": first, "first_cpu": first_cpu,
        "import re + agent_registry.cli.fast": [marks[1][0] - marks[0][0], marks[1][1] - marks[0][1]],
        "import the core modules": [marks[2][0] - marks[1][0], marks[2][1] - marks[1][1]],
        "main": [marks[4][0] - marks[3][0], marks[4][1] - marks[3][1]],
        "wall": dict(phases.wall), "cpu": dict(phases.cpu), "calls": dict(phases.calls),
        "spawned": spawned, "last": time.time(), "last_cpu": cpu_ms(),
    }
    import json  # only now: the command has run
    with open(report_file, "w") as out:
        out.write(json.dumps(report))
    if hasattr(cli, "run"):  # the console script's way out: no interpreter teardown
        import os
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
