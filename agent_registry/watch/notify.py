"""What ``agent-registry watch`` says, and where it says it.

Messages come from a pool of templates per event: the default pool shipped in
``templates/notify/messages.json``, overridden event by event by a local pool in the
clone's state folder (``<git common dir>/agent-registry/notify-messages.json``: inside
``.git``, so never committed). A session's own text (``register --notify-started``,
``finish|end --notify-executed``) wins over both.

Targets are Apprise URLs (https://github.com/caronc/apprise) from
``$AGENT_REGISTRY_NOTIFY_URLS``, else that variable in a git-ignored ``.env`` at the top
of the worktree, plus every ``git config agent-registry.notify``: secrets never come from
the branch. Apprise is imported only when a message is sent (the ``notify`` extra).
"""
from __future__ import annotations

import hashlib
import json
import os
import random
import re
from urllib.parse import urlsplit

from ..store.shipped import folder
from ..errors import BadInput
from ..store.git import Repo

EVENTS = ("started", "executed", "stopped", "idle")
URLS_ENV = "AGENT_REGISTRY_NOTIFY_URLS"
NAME_ENV = "AGENT_REGISTRY_NOTIFY_NAME"
LOCAL_POOL = "notify-messages.json"
_PLACEHOLDER = re.compile(r"\{(\w+)\}")


class Target:
    """One Apprise URL.  Only its ``key`` (a hash) and ``label`` (scheme and host) are
    ever stored or shown: the URL itself may hold a token."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.key = hashlib.sha256(url.encode()).hexdigest()[:16]
        parts = urlsplit(url)
        try:
            port = f":{parts.port}" if parts.port else ""
        except ValueError:
            port = ""
        self.label = f"{parts.scheme}://{parts.hostname or ''}{port}"


def _apprise():
    from ..store.extras import needed
    try:
        import apprise
    except ImportError as exc:
        raise needed("notify", exc) from None
    return apprise


def dotenv(repo: Repo) -> dict[str, str]:
    """Our variables from ``.env`` at the top of the worktree.  One that sets them must
    be git-ignored (a tracked or committable .env would put secrets in the repository);
    a .env without them is none of our business."""
    top = repo.info.toplevel
    path = os.path.join(top, ".env") if top else ""
    if not path or not os.path.isfile(path):
        return {}
    values = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            key, _, value = line.strip().removeprefix("export ").partition("=")
            key, value = key.strip(), value.strip()
            if key not in (URLS_ENV, NAME_ENV):
                continue
            if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
                value = value[1:-1]
            values[key] = value
    if values and repo.git("check-ignore", "-q", ".env", cwd=top, check=False).returncode:
        raise BadInput(f"{path} is not git-ignored: add it to .gitignore before it "
                       "holds notification secrets")
    return values


def settings(repo: Repo) -> dict[str, str]:
    """The environment, with a git-ignored .env filling what it leaves unset."""
    names = (URLS_ENV, NAME_ENV)
    local = dotenv(repo) if not all(os.environ.get(n) for n in names) else {}
    return {name: os.environ.get(name) or local.get(name, "") for name in names}


def targets(repo: Repo, env: dict[str, str]) -> list[Target]:
    """Every configured Apprise URL (separated by spaces or commas), checked by Apprise."""
    config = repo.git("config", "--get-all", "agent-registry.notify", check=False)
    raw = [env[URLS_ENV], *config.stdout.decode(errors="replace").splitlines()]
    urls = list(dict.fromkeys(u for value in raw for u in re.split(r"[\s,]+", value) if u))
    if not urls:
        raise BadInput(f"no notification target: set {URLS_ENV} or "
                       "`git config --add agent-registry.notify URL` (an Apprise URL)")
    apprise = _apprise()
    found = [Target(url) for url in urls]
    for target in found:
        if apprise.Apprise.instantiate(target.url) is None:
            raise BadInput(f"not an Apprise URL Apprise can use: {target.label or '?'}…")
    return found


def recipient(repo: Repo, env: dict[str, str]) -> str:
    """{name}: whom the messages are for ($AGENT_REGISTRY_NOTIFY_NAME, else
    ``git config agent-registry.notify-name``, else ``user.name``)."""
    if env[NAME_ENV]:
        return env[NAME_ENV]
    for key in ("agent-registry.notify-name", "user.name"):
        value = repo.git("config", "--get", key, check=False).stdout.decode().strip()
        if value:
            return value
    return ""


def pool(repo: Repo) -> dict[str, list[str]]:
    """The template pool: the shipped one, each event replaced by the local pool's."""
    with (folder("templates") / "notify" / "messages.json").open(encoding="utf-8") as f:
        merged = json.load(f)
    path = repo.state_path(LOCAL_POOL)
    try:
        with open(path, encoding="utf-8") as f:
            local = json.load(f)
    except FileNotFoundError:
        return merged
    except ValueError as exc:
        raise BadInput(f"{path} is not valid JSON: {exc}") from None
    if not isinstance(local, dict):
        raise BadInput(f"{path} must be a JSON object: event -> list of templates")
    for event, texts in local.items():
        if event in EVENTS and isinstance(texts, list) and texts and \
                all(isinstance(t, str) for t in texts):
            merged[event] = texts
        else:
            raise BadInput(f"{path}: {event!r} must be one of {', '.join(EVENTS)} "
                           "with a non-empty list of strings")
    return merged


def fill(template: str, values: dict[str, str]) -> str:
    """*template* with each known ``{placeholder}`` replaced; unknown ones stay as
    written (no str.format: a template must not reach attributes of the values)."""
    return _PLACEHOLDER.sub(lambda m: str(values.get(m.group(1), m.group(0))), template)


def message(templates: dict[str, list[str]], event: str, values: dict[str, str],
            own: str = "") -> str:
    """The text for *event*: the session's *own* text if it wrote one, else one of the
    pool's templates at random."""
    return fill(own or random.choice(templates[event]), values)


def send(target: Target, title: str, body: str) -> str | None:
    """Deliver one message; None when the transport accepted it, else why not."""
    apprise = _apprise()
    import logging
    notifier = apprise.Apprise()
    notifier.add(target.url)
    with apprise.LogCapture(level=logging.WARNING) as log:
        # plain text: a service that reads HTML or Markdown escapes it, so an agent's
        # `<b>` or `<img>` in its working-on is shown as written, never interpreted
        ok = notifier.notify(title=title, body=body, body_format=apprise.NotifyFormat.TEXT)
        said = log.getvalue().strip().splitlines()
    if ok:
        return None
    return (said[-1].split(" - ")[-1] if said else "not accepted")[:300]
