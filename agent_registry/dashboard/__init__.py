"""The live dashboard: a FastAPI app over the registry, for people (``agent-registry
dashboard``, extra ``agent-registry[web]``).

Modules: ``app`` builds the app (routes and the security checks), ``queries`` shapes
registry data for the page, ``events`` notices branch changes and pushes them over
Server-Sent Events, ``timeline`` reads one session's history from the branch log, and
``cli`` is the click command.  Nothing here is imported by the other commands.
"""
