"""``agent-registry dashboard``: serve the live dashboard for this repository."""
from __future__ import annotations

import os
import signal

import click

from ..cli.context import Output, pass_out


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to bind; anything but loopback requires the access token.")
@click.option("--port", type=click.IntRange(0, 65535), default=8765, show_default=True,
              help="Port (0: any free one). Taken by this repository's dashboard: reused; "
                   "by something else: the next free port.")
@click.option("--open", "open_browser", is_flag=True, help="Open the page in a browser.")
@click.option("--repos", "every_repo", is_flag=True,
              help="Also list the sessions and locks of every repository on your list "
                   "(`repos list`), with a repository column: read-only, nothing fetched; "
                   "the actions act on this repository only.")
@pass_out
def dashboard(out: Output, host: str, port: int, open_browser: bool,
              every_repo: bool = False) -> None:
    """Serve a live web page of sessions, locks, sync and wiki, with actions.

    Needs the web extra: pip install '.[web]' from a clone. Changes through the API
    need the X-Agent-Registry-Token header with the token printed at start; a bind other
    than 127.0.0.1 needs that token (or $AGENT_REGISTRY_DASHBOARD_TOKEN) for every request.
    """
    from ..store.extras import needed, require
    try:
        require("web")  # uvicorn too, which serving imports later
        from .app import create_app, repo_id
        from .serve import access_token, place, serve
    except ImportError as exc:
        raise needed("web", exc) from None
    registry = out.registry  # validates the repository before anything listens
    token = access_token(host)
    placement = place(host, port, repo_id(registry.repo.info.common_dir))
    app = None if placement.reused else create_app(registry, token, repos=every_repo)
    if placement.reused and every_repo and not (placement.answer or {}).get("repos"):
        placement.notes.append(f"the dashboard on port {placement.port} lists this repository "
                               "only: stop it for one with --repos (or give --port 0)")
    post_token = app.state.post_token if app else None
    url = placement.url(token)
    if app is not None:
        # Ctrl-C from the start line on stops at once, also before uvicorn listens for
        # it: a KeyboardInterrupt landing inside an import or a logging lock could leave
        # the process hanging at exit.  Uvicorn takes the signal over while it serves
        # and hands it back once it has shut down (the registry closed by then).
        signal.signal(signal.SIGINT, _stop)
    for note in placement.notes:
        out.warn(note)
    out.emit({"url": url, "host": placement.host, "port": placement.port,
              "reused": placement.reused, "token": post_token,
              "token_required": token is not None, "notes": placement.notes},
             f"dashboard: {url}" + (f"\nchanges through the API need the header "
                                    f"X-Agent-Registry-Token: {post_token}" if post_token else ""))
    click.get_text_stream("stdout").flush()
    if open_browser:
        import webbrowser
        webbrowser.open(url)
    if app is not None:
        serve(app, placement)


def _stop(signum: int, frame) -> None:
    os._exit(128 + signum)  # nothing to undo: the server was not up, or has shut down
