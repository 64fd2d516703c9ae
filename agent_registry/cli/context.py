"""The context every click command shares (cli/main.py and the feature modules' commands):
where results go (--json, --quiet) and the registry opened for the command.  Kept apart
from cli/main.py so the feature commands it loads lazily never import it back."""
from __future__ import annotations

import click

from . import output


class Output:
    """Where results go: --json, --quiet, and the registry opened for this command."""

    def __init__(self, json_mode: bool, quiet: bool, directory: str) -> None:
        self.json = json_mode
        self.quiet = quiet
        self.directory = directory
        self._registry = None

    @property
    def registry(self):
        if self._registry is None:
            from ..sync import Registry
            self._registry = Registry.open(self.directory)
        return self._registry

    def emit(self, data, text: str | None = None) -> None:
        if self.json:
            click.echo(output.to_json(data))
        elif text and not self.quiet:
            click.echo(text)

    def notice(self, lines: list[str]) -> None:
        """Lines for stderr that are not errors (a takeover), unless --quiet."""
        if not self.quiet:
            for line in lines:
                click.echo(line, err=True)

    def warn(self, message: str) -> None:
        if not self.quiet:
            click.echo(f"agent-registry: warning: {message}", err=True)

    def close(self) -> None:
        if self._registry is not None:
            from .console import ignored_variables
            for message in self._registry.warnings + ignored_variables():
                self.warn(message)
            self._registry.close()


pass_out = click.make_pass_decorator(Output)
