"""agent-registry: several AI coding agents on one git repository, coordinated through an
orphan branch of that repository.  The library is the product; the CLI is a thin layer.

    from agent_registry import Registry
    with Registry.open(".") as registry:
        registry.register("kimi-1", provider="Kimi", working_on="auth")
        registry.claim("kimi-1", ["src/auth.py"])
"""
__version__ = "0.3.0"


# what a caller of the library catches: `except Refused` around a claim
ERRORS = ("RegistryError", "Refused", "NotFound", "BadInput", "Unconfirmed", "SystemFailure")


def __getattr__(name: str):
    # lazy, so that `import agent_registry.guard` stays standard-library only
    if name == "Registry":
        from .sync import Registry  # with a remote, it commits through sync's committer
        return Registry
    if name in ERRORS:
        from . import errors
        return getattr(errors, name)
    raise AttributeError(name)
