"""Whoosh without the imports a search never uses: a small, documented shim.

whoosh-reloaded 2.7.5 imports three things at module level that no code path of ours
reaches, and together they are about 40 ms of every ``wiki query`` (docs/benchmarks.md):

=====================  ======================================  ==========================
imported by            what                                    used for
=====================  ======================================  ==========================
``whoosh.compat``      ``urllib.request.urlretrieve``          re-exported, never called
                       (pulls http.client, email, ssl)         inside Whoosh
``whoosh.reading``     the ``cached_property`` package         one property of
                       (pulls asyncio, concurrent.futures)     ``SegmentReader``
``whoosh.query.terms`` ``whoosh.lang.morph_en.variations``     ``Variations`` queries
                       (a 70 kB word table)                    (we never build one)
=====================  ======================================  ==========================

:func:`imported` imports Whoosh's modules while stand-ins for those three sit in
``sys.modules``: ``cached_property`` is the standard library's
``functools.cached_property`` (the same semantics for that one property), and
``urlretrieve`` / ``variations`` import the real function on their first call.  The
stand-ins are taken out of ``sys.modules`` right after, so code that imports the real
modules later (the LLM client, the dashboard) gets them.  A module that is already
imported is used as it is.  Upstream, the fix is to import these where they are used
(``whoosh.compat`` need not re-export urlretrieve; ``functools.cached_property`` has
existed since Python 3.8); then this module can go.
"""
from __future__ import annotations

import functools
import importlib
import sys
import threading
from types import ModuleType

_LOCK = threading.Lock()  # the dashboard's threads may search for the first time at once
# what our index code uses; everything Whoosh imports later is already loaded by then
MODULES = ("whoosh.index", "whoosh.fields", "whoosh.analysis", "whoosh.query",
           "whoosh.scoring")


def _forwarder(module: str, name: str):
    """A function that imports ``module.name`` on its first call and calls it."""
    def call(*args, **kwargs):
        return getattr(importlib.import_module(module), name)(*args, **kwargs)
    call.__name__ = name
    return call


def _stand_ins() -> dict[str, ModuleType]:
    made = {}
    for module, name, value in (
            ("cached_property", "cached_property", functools.cached_property),
            ("urllib.request", "urlretrieve", None),
            ("whoosh.lang.morph_en", "variations", None)):
        if module in sys.modules:
            continue  # already paid for: use the real one
        stand_in = ModuleType(module, f"stand-in from {__name__}")
        setattr(stand_in, name, value or _forwarder(module, name))
        made[module] = stand_in
    return made


def imported() -> None:
    """Import Whoosh's modules (once) without the unused heavy imports."""
    if MODULES[-1] in sys.modules:  # the last one imported: all done
        return
    with _LOCK:
        if MODULES[-1] in sys.modules:
            return
        stand_ins = _stand_ins()
        sys.modules.update(stand_ins)
        try:
            for module in MODULES:
                importlib.import_module(module)
        finally:
            for name, stand_in in stand_ins.items():
                if sys.modules.get(name) is stand_in:
                    del sys.modules[name]
