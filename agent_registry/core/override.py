"""Recording a deliberate override of the guard (``AGENT_REGISTRY_ALLOW=1``).

The override is an operation like any other: it commits one small file under
``overrides/`` (one file per override, so concurrent writers never touch the same file)
and its ``Registry-*`` trailers name the paths, who overrode and whose locks.  Imported
only when an override happens, so the guard itself stays standard-library only.
"""
from __future__ import annotations

import json
import secrets
import time

from ..branch.records import iso
from .operations import Outcome, operation
from .registry import Registry
from ..branch.view import View


@operation("override")
def _op_override(registry: Registry, view: View, op: dict) -> Outcome:
    at = iso(op["at"])
    name = f"overrides/{at[:7]}/{at.replace('-', '').replace(':', '')}-{op['token']}.json"
    record = {"at": at, "action": op["action"], "by": op["by"], "paths": op["paths"],
              "owners": op["owners"], "host": registry.host,
              **{key: op[key] for key in ("tree", "parent") if key in op}}
    view.write(name, (json.dumps(record, indent=1, ensure_ascii=False) + "\n").encode())
    owners = sorted({o for held in op["owners"].values() for o in held})
    more = f" and {len(op['paths']) - 1} more" if len(op["paths"]) > 1 else ""
    return Outcome({"recorded": name, **record},
                   f"override {op['paths'][0]}{more} by {op['by']} "
                   f"(held by {', '.join(owners)}) on {op['action']}")


def record_override(registry: Registry, report, action: str, *, by: str, switch: str,
                    commit: dict | None = None) -> dict:
    """Commit the override described by a guard *report* on the registry branch: *by*
    overrode with the environment variable *switch* (the guard's names, passed down so
    this module never imports the guard back).  *commit*: ``{"tree", "parent"}`` of the
    commit let through, by which the pre-push guard knows it (enforce/overridden.py)."""
    owners: dict[str, list[str]] = {}
    for conflict in report.conflicts:
        held = owners.setdefault(conflict.path, [])
        if conflict.owner not in held:
            held.append(conflict.owner)
    holders = ", ".join(sorted({c.owner for c in report.conflicts}))
    return registry.apply({
        "op": "override", "at": time.time(), "action": action,
        "by": by, "paths": sorted(owners), "owners": owners,
        "token": secrets.token_hex(3), **(commit or {}),
        "reason": f"{action} with {switch}=1 over locks of {holders}"})
