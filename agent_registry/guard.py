"""The git hooks' entry point, kept at this path because hooks already installed in
users' repositories run ``python -m agent_registry.guard ...``; the guard itself lives in
:mod:`agent_registry.enforce.guard`."""
from __future__ import annotations

if __name__ == "__main__":
    from .enforce.guard import main
    raise SystemExit(main())
