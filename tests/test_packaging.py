"""The wheel ships every package of the tree.  pyproject.toml lists the packages by name
(templates/ and hooks/ are mapped into the package from the top of the checkout), so a
new subpackage left off that list installs from a checkout and breaks in a wheel: this
fast test says so in ``make test`` instead of the slow wheel test in ``make test-slow``."""
from __future__ import annotations

from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")

ROOT = Path(__file__).resolve().parents[1]


def test_every_subpackage_is_listed_in_pyproject():
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())
                 ["tool"]["setuptools"]["packages"])
    package = ROOT / "agent_registry"
    found = {".".join(init.parent.relative_to(ROOT).parts)
             for init in package.rglob("__init__.py") if "__pycache__" not in init.parts}
    assert found - listed == set(), "add these to [tool.setuptools] packages"
