"""This machine's name, as sessions record it and liveness compares it.

Apart from :mod:`procinfo` (which re-exports it): a `lock check` whose holders are on
another host or bound to no process judges them without importing the process
backends (issue 35 item 3)."""
import os


def hostname() -> str:
    if os.environ.get("AGENT_REGISTRY_HOST"):
        return os.environ["AGENT_REGISTRY_HOST"]
    if hasattr(os, "uname"):
        return os.uname().nodename  # what gethostname() returns, without importing socket
    import socket
    return socket.gethostname()
