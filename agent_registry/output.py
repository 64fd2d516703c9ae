"""What commands print, without click: shared by the click commands (cli.py) and the
click-free hot path (hotpath.py), so both say exactly the same thing."""
from __future__ import annotations

import json


def to_json(data) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False, default=str)


def error_json(exc) -> str:
    """The documented ``{"error": {...}}`` document of a RegistryError."""
    return json.dumps({"error": {"code": exc.exit_code, "message": exc.message, **exc.details}},
                      indent=2, ensure_ascii=False)


def age(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    seconds = int(seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def claim_text(result: dict) -> str:
    """`lock acquire` and `lock release`: one `status: path` line per target."""
    return "\n".join(f"{l['status']}: {l['path']}" for l in result["locks"])


def check_text(results: list[dict]) -> str:
    lines = []
    for r in results:
        if r["state"] == "free":
            lines.append(f"free: {r['path']}")
            continue
        extra = f", {r['stale_reason']}" if r.get("stale_reason") else ""
        extra += "" if r.get("confirmed", True) else ", not confirmed by the remote yet"
        what = f" ({r['working_on']})" if r.get("working_on") else ""
        lines.append(f"{r['state']}: {r['path']} by {r['owner']}{what}, "
                     f"{age(r['age_seconds'])} ago{extra}")
    return "\n".join(lines)
