"""The documentation keeps up with the command tree.

Walks every command and subcommand of ``agent_registry.cli.main.cli`` (LAZY_COMMANDS
included) and fails when one has no --help text, is missing from README.md's command
reference, or has no entry in docs/json.md.
"""
from __future__ import annotations

import re

import click
import pytest
from click.testing import CliRunner

from agent_registry.cli.main import LAZY_COMMANDS, cli
from helpers import ROOT


def walk(group: click.Group, ctx: click.Context, prefix: tuple[str, ...] = ()):
    """(name words, command) of every visible command below *group*, depth first."""
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        assert command is not None, f"{' '.join(prefix + (name,))} is listed but cannot be loaded"
        if command.hidden:
            continue
        yield prefix + (name,), command
        if isinstance(command, click.Group):
            yield from walk(command, click.Context(command, parent=ctx, info_name=name),
                            prefix + (name,))


def commands() -> list[tuple[tuple[str, ...], click.Command]]:
    return list(walk(cli, click.Context(cli, info_name="agent-registry")))


def leaves() -> list[str]:
    return [" ".join(words) for words, cmd in commands() if not isinstance(cmd, click.Group)]


def section(text: str, heading: str) -> str:
    start = text.index(heading)
    end = text.find("\n## ", start + len(heading))
    return text[start:end if end != -1 else len(text)]


def documented_names() -> set[str]:
    """Command names of README's reference rows: the leading lowercase words of each
    row's first code span, with ``a|b`` alternatives expanded."""
    reference = section((ROOT / "README.md").read_text(), "## Command reference")
    names = set()
    for row in reference.splitlines():
        match = re.match(r"\|\s*`([^`]+)`", row)
        if not match:
            continue
        stems = [""]
        for word in match.group(1).split():
            if not re.fullmatch(r"[a-z][a-z0-9-]*(\|[a-z][a-z0-9-]*)*", word):
                break
            stems = [f"{s} {alt}".strip() for s in stems for alt in word.split("|")]
            names.update(stems)
    return names


def test_the_tree_includes_the_lazy_commands():
    top = {words[0] for words, _ in commands()}
    assert set(LAZY_COMMANDS) <= top
    assert {"register", "lock", "status", "finish"} <= top


@pytest.mark.parametrize("words", [w for w, _ in commands()], ids=" ".join)
def test_every_command_has_help_text(words):
    command = dict(commands())[words]
    assert (command.help or command.short_help or "").strip(), f"{' '.join(words)} has no help text"
    result = CliRunner().invoke(cli, [*words, "--help"])
    assert result.exit_code == 0, result.output
    assert "Usage:" in result.output
    summary = (command.help or command.short_help).strip().split("\n")[0][:30]
    assert summary.split()[0] in result.output


def test_every_command_is_in_the_readme_reference():
    documented = documented_names()
    missing = [name for name in leaves() if name not in documented]
    assert not missing, f"missing from README.md's command reference: {missing}"


def test_the_readme_reference_names_only_real_commands():
    top = {words[0] for words, _ in commands()}
    stale = sorted({name.split()[0] for name in documented_names()} - top)
    assert not stale, f"README.md documents commands that do not exist: {stale}"


def test_every_command_has_its_json_documented():
    text = (ROOT / "docs" / "json.md").read_text()
    names = set(re.findall(r"^#+ `([a-z][a-z0-9 -]*[a-z0-9])`", text, flags=re.M))
    missing = [name for name in leaves() if name not in names]
    assert not missing, f"no --json shape in docs/json.md for: {missing}"
    assert '"error"' in text and '"code"' in text and '"message"' in text


def test_the_readme_python_api_runs_as_written(tmp_path):
    """A reviewer's finding: README's example said a claim raises Refused, but `from
    agent_registry import Refused` failed. Its code runs here on a real repository, with
    src/auth.py held by another session, so the claim is refused and caught."""
    import subprocess
    import sys

    from helpers import Runner, make_repo
    repo = make_repo(tmp_path / "repo")
    run = Runner(repo)
    assert run("register", "other-1", "--provider", "Codex").returncode == 0
    assert run("lock", "acquire", "src/auth.py", "--session", "other-1").returncode == 0
    api = section((ROOT / "README.md").read_text(), "## Python API")
    code = api.split("```python\n")[1].split("```")[0].replace("path/to/repo", str(repo))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("src/auth.py is locked by other-1"), proc.stdout
