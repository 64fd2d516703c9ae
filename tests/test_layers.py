"""The package's rooms and the way their doors open (issue 10, docs/design.md "Rooms").

Every module is given a layer; a module may import (at the top, inside a function, or by
naming a module in a string that importlib loads) only modules of its own layer or of a
lower one, and no set of modules may import each other in a circle.  Imports are read
with ``ast`` from the source, so a lazy import inside a function counts like any other.

KNOWN lists what is still wrong; each entry is a door to close.  The test fails when a
new violation appears and also when a listed one is gone (so the list only shrinks).
"""
from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "agent_registry"

STORE, BRANCH, CORE, SERVICES, FACES = range(5)
LAYER_NAMES = ["store", "branch", "core", "services", "faces"]

# a room is a package; a module's layer is its room's
ROOMS: dict[str, int] = {
    "errors": STORE, "store": STORE,
    "branch": BRANCH, "wiki.entry": BRANCH,
    "core": CORE,
    "sync": SERVICES, "watch": SERVICES, "wiki": SERVICES, "forecast": SERVICES,
    "__init__": FACES, "__main__": FACES, "guard": FACES, "cli": FACES, "enforce": FACES,
    "harness": FACES, "mcp": FACES, "dashboard": FACES, "wiki.cli": FACES,
    "doctor": FACES,
    "wiki.fastpath": FACES,
}


def layer(name: str) -> int:
    """The layer of the longest room that holds module *name*."""
    parts = name.split(".")
    while parts:
        if ".".join(parts) in ROOMS:
            return ROOMS[".".join(parts)]
        parts.pop()
    raise KeyError(name)

# (importer, imported): doors still opening the wrong way, or circles, to close (none left:
# the remote committer is handed to the core by sync, the operations register themselves)
KNOWN: set[tuple[str, str]] = set()


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def resolve(name: str, known: dict[str, Path]) -> str | None:
    """The longest known module *name* (a dotted name inside the package) names."""
    parts = name.split(".")
    while parts:
        candidate = ".".join(parts)
        if candidate in known:
            return candidate
        parts.pop()
    return None


def imports_of(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    tree = ast.parse(path.read_text(), str(path))
    package = name.split(".") if path.name == "__init__.py" and name != "__init__" else \
        name.split(".")[:-1]
    if name == "__init__":
        package = []
    found: set[str] = set()

    def add(dotted: str) -> None:
        target = resolve(dotted, known)
        if target is not None and target != name:
            found.add(target)

    # an import under `if TYPE_CHECKING:` names a type for annotations; it opens no door
    typing_only = {id(inner) for node in ast.walk(tree) if isinstance(node, ast.If)
                   and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"
                   for stmt in node.body for inner in ast.walk(stmt)}
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("agent_registry."):
                    add(alias.name.removeprefix("agent_registry."))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)] if node.level > 1 else package
                base = list(base) + (node.module.split(".") if node.module else [])
            elif node.module and (node.module == "agent_registry"
                                  or node.module.startswith("agent_registry.")):
                base = node.module.split(".")[1:]
            else:
                continue
            for alias in node.names:
                submodule = ".".join(base + [alias.name])
                if submodule in known:
                    add(submodule)
                elif base:
                    add(".".join(base))
                else:
                    add("__init__")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            # a module named for importlib ("agent_registry.wiki.cli:wiki")
            text = node.value.split(":")[0]
            if text.startswith("agent_registry.") and " " not in text:
                add(text.removeprefix("agent_registry."))
    return found


def graph() -> dict[str, set[str]]:
    known = modules()
    return {name: imports_of(name, path, known) for name, path in known.items()}


def cycle_edges(edges: dict[str, set[str]]) -> set[tuple[str, str]]:
    """Every edge that lies on a circle (both ends in one strongly connected component)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    component: dict[str, int] = {}

    def visit(node: str) -> None:  # Tarjan
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in edges[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt not in component and nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            while True:
                member = stack.pop()
                component[member] = index[node]
                if member == node:
                    break

    for node in edges:
        if node not in index:
            visit(node)
    return {(a, b) for a, targets in edges.items() for b in targets
            if component[a] == component[b]}


def violations() -> dict[tuple[str, str], str]:
    edges = graph()
    found = {(a, b): f"{LAYER_NAMES[layer(a)]} imports {LAYER_NAMES[layer(b)]}"
             for a, targets in edges.items() for b in targets if layer(b) > layer(a)}
    for edge in cycle_edges(edges):
        found.setdefault(edge, "circle")
    return found


def test_every_module_has_a_layer():
    homeless = []
    for name in modules():
        try:
            layer(name)
        except KeyError:
            homeless.append(name)
    assert homeless == []


def test_doors_open_downward_and_nothing_imports_in_a_circle():
    found = violations()
    new = {f"{a} -> {b} ({why})" for (a, b), why in found.items() if (a, b) not in KNOWN}
    assert sorted(new) == [], "new upward import or circle"
    gone = {f"{a} -> {b}" for a, b in KNOWN if (a, b) not in found}
    assert sorted(gone) == [], "fixed: remove from KNOWN"


def test_the_reader_sees_lazy_and_string_imports():
    edges = graph()
    assert "branch.view" in edges["enforce.guard"]        # inside a function
    assert "wiki.cli" in edges["cli.main"]          # a string importlib loads
    assert "sync" in edges["__init__"]     # lazy, in a package __init__


def test_tests_import_helpers_not_conftest():
    tests = Path(__file__).resolve().parent
    offenders = [p.name for p in sorted(tests.glob("*.py"))
                 if any(isinstance(n, ast.ImportFrom) and n.module == "conftest"
                        for n in ast.walk(ast.parse(p.read_text())))]
    assert offenders == []


def test_test_support_leaves_the_operation_table_alone():
    from agent_registry.core.operations import OPERATIONS
    import test_wiki_support
    assert test_wiki_support.PUT_FILES not in OPERATIONS


# modules that start git themselves rather than through store.git, and why
RUNS_GIT_ITSELF = {
    # the pre-commit hook's `git diff --cached` must see the hook's own environment
    # (GIT_INDEX_FILE), runs beside the lock lookup, and the guard imports nothing more
    "enforce.guard",
    # the backstop's note lists a held folder (`git ls-files`) through store/spawn.py: a
    # note with nothing to hash imports no git module (tests/test_backstop.py)
    "harness.held",
}


def test_git_runs_only_in_the_store():
    starters = set()
    for name, path in modules().items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.List) and node.elts and isinstance(node.elts[0], ast.Constant) \
                    and node.elts[0].value == "git":
                starters.add(name)
    assert starters - {"store.git"} == RUNS_GIT_ITSELF


def test_a_long_module_says_why_at_its_top():
    long = {name: path for name, path in modules().items()
            if len(path.read_text().splitlines()) > 400}
    unexplained = [name for name, path in long.items() if "over 400 lines" not in " ".join(
        (ast.get_docstring(ast.parse(path.read_text())) or "").lower().split())]
    assert unexplained == []


def test_the_operation_table_is_explicit():
    """Every operation the core applies is registered by one module per family, with
    the shape its fields are checked against; none is a method reached by name."""
    import agent_registry.core.registry  # noqa: F401  (importing the core registers them)
    from agent_registry.core.operations import OPERATIONS
    from agent_registry.core.shapes import SHAPES
    from agent_registry.core.registry import Registry
    families = {"agent_registry.core.sessions", "agent_registry.core.locks",
                "agent_registry.core.diary"}
    core = {name for name, handler in OPERATIONS.items() if handler.__module__ in families}
    assert core == {"init", "register", "update", "finish", "handoff", "cleanup", "claim",
                    "release", "heartbeat", "force-release", "context-log", "refresh-page"}
    assert all(name in SHAPES for name in OPERATIONS)
    assert not [name for name in vars(Registry) if name.startswith("_op_")]
