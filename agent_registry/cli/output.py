"""What commands print, without click: shared by the click commands (cli/main.py) and the
click-free fast path (cli/fast.py), so both say exactly the same thing."""
import os

from ..store import jsontext
from ..branch.staleness import age


def to_json(data) -> str:
    return jsontext.dumps(data, indent=2, ensure_ascii=False, default=str)


def error_json(exc) -> str:
    """The documented ``{"error": {...}}`` document of a RegistryError."""
    return jsontext.dumps({"error": {"code": exc.exit_code, "message": exc.message,
                                     **exc.details}}, indent=2, ensure_ascii=False)


def claim_text(result: dict) -> str:
    """`lock acquire` and `lock release`: one `status: path` line per target."""
    return "\n".join(f"{l['status']}: {l['path']}" for l in result["locks"])


def takeover_lines(result: dict) -> list[str]:
    """For stderr: each stale holder a claim took a lock over from, and why it was stale."""
    return [f"agent-registry: took over {l['path']} from {t['session']}: {t['reason']}"
            for l in result.get("locks", []) for t in l.get("taken_over", [])]


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


def check_code(results: list[dict]) -> int:
    """`lock check`'s exit code, the predecessor's contract (``if lock check …; then
    edit``): 1 when another live session holds one of the paths, else 0 (free, yours,
    or stale)."""
    return 1 if any(r["state"] == "locked" for r in results) else 0


def display_zone():
    """The zone times are shown in: AGENT_REGISTRY_TZ, or None for the system zone."""
    name = os.environ.get("AGENT_REGISTRY_TZ")
    if not name:
        return None
    from zoneinfo import ZoneInfo
    try:
        return ZoneInfo(name)
    except (ValueError, OSError, KeyError):
        return None


def local_time(text: str | None) -> str:
    """An ISO UTC timestamp as shown to a person, in the display zone."""
    if not text:
        return ""
    from datetime import datetime, timezone

    from ..branch.records import parse_iso
    ts = parse_iso(text)
    if ts is None:
        return text
    moment = datetime.fromtimestamp(ts, timezone.utc)
    zone = display_zone()
    return (moment.astimezone(zone) if zone else moment.astimezone()).strftime("%Y-%m-%d %H:%M:%S %Z")
