"""The messages branch: ``<registry branch>-messages``, where ``send`` and ``ack`` commit
(docs/messages.md, "On the branch"), and the one helper everything uses to reach it
(:func:`mailbox`), with what readers read (:func:`views`: that branch and the registry
branch, which holds the messages written before the split).  In layout format 3 a send
or an ack is written by one session alone, so it goes to the writing clone's own ref
(:func:`writer`, core/cloned.py), and readers read every clone ref too."""
from __future__ import annotations

from ..branch.clones import Clones, clone_patterns, has_clones
from ..branch.mailbox import branch_of, pages
from ..branch.view import View
from ..errors import Unconfirmed
from .cloned import clone_registry
from .refs import RegistryBranch
from .registry import Registry

def mailbox(registry: Registry) -> Registry:
    """The registry of *registry*'s messages branch (``<branch>-messages``): the same
    class and committer (so with a remote it commits through sync like the registry
    branch), repository, clock, host, config and flock, with a part of its own
    (:class:`MessagesBranch`).  Made once per registry and closed with it.  A registry
    whose part keeps its messages itself (a hub: sync/rooms.py; the messages branch's
    own) is its own mailbox."""
    if registry.part.keeps_messages:
        return registry
    box = registry.__dict__.get("_mailbox")
    if box is None:
        box = registry.__dict__["_mailbox"] = registry.derived(
            branch_of(registry.branch), MessagesBranch(registry))
    return box


class MessagesBranch(RegistryBranch):
    """The part of a messages branch (core/refs.py): read and fetched as a registry
    branch is, its own pages, no layout routing there."""

    kind = "messages"
    routes = False
    keeps_messages = True

    def __init__(self, owner: Registry) -> None:
        self.main, self.registry_branch = owner, owner.branch

    def pages(self, box: Registry, view: View, at: float, subject: str) -> dict[str, bytes]:
        return pages(box.branch, self.registry_branch, at, subject)


def writer(registry: Registry, main: View) -> Registry:
    """Where this clone commits a send or an ack: its own clone ref when the registry
    branch (*main*) is in layout format 3, else the messages branch (or a hub itself)."""
    box = mailbox(registry)
    return clone_registry(registry) if box is not registry and has_clones(main) else box


def views(registry: Registry, main: View | None = None) -> list[View]:
    """What readers read: the clone refs (layout format 3: every clone's sends and
    acks), the messages branch, then the registry branch (*main*, when the caller has
    it) with the messages written before the split."""
    main = main or registry.view()
    main.where = registry.branch  # how a reader's warning names a bad record's ref
    box = mailbox(registry)
    if box is registry:
        return [main]
    clones = []
    if has_clones(main):
        names = {tip: ref for pattern in clone_patterns(registry.branch, registry.remote)
                 for ref, tip in registry.repo.refs_in(pattern[:-1]).items()}
        for tip in Clones(registry.repo, registry.branch, registry.remote).tips():
            clones.append(View(registry.repo, tip))
            clones[-1].where = names.get(tip, tip[:12]).removeprefix("refs/heads/")
    messages = box.view()
    messages.where = box.branch
    return [*clones, messages, main]


def fresh_view(registry: Registry) -> View:
    """The registry branch's view, brought up to date with the remote first when there
    is one (a fetch and replay through the registry's committer, pushing only what this
    clone had pending): a send decides who it reaches, and an ack whether its session is
    a recipient, against what other clones registered and claimed.  Offline, this
    clone's copy decides and a warning says so."""
    if registry.remote:
        try:
            registry.synced().refresh(registry)
        except Unconfirmed as exc:
            registry.warnings.append(f"{exc.message} (deciding on this clone's copy)")
    return registry.view()


def carry(registry: Registry, box: Registry) -> None:
    """The messages branch's sync outcome and warnings, as the registry's: the faces
    print ``registry.unpushed`` and ``registry.warnings``."""
    if box is not registry:
        registry.unpushed = dict(box.unpushed)
        registry.warnings.extend(w for w in box.warnings if w not in registry.warnings)
        box.warnings = []
