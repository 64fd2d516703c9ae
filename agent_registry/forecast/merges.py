"""What two tips changed since their merge base: one ``git merge-tree`` for every pair
not seen before, cached by the pair of tips.

``git merge-tree --write-tree --stdin -z --name-only --messages`` (git >= 2.38; ``--stdin``
since 2.39, one process per pair before) merges every new pair in one process without
touching any worktree, index or ref.  Per pair it gives the conflicted paths, the paths it
merged from both sides (its "Auto-merging" messages), and the merged tree; the paths each
side changed are where the merged tree differs from the *other* side's tree, read
in-process through ``cat-file --batch``.  A pair git cannot merge (unrelated histories)
stops the batch: its result is empty and the rest go on in a new batch.  Any other failure of git is an
error, never an empty result: a cached "nothing changed" would hide the overlap forever.

Before git 2.38 the fallback is changed-path overlap: ``git diff --name-only A...B`` both
ways (two processes per pair), paths changed on both sides counted as "both-changed", none
as "conflict".

The cache (``<git common dir>/agent-registry/overlap.json``, "pairs") maps "TIP-A TIP-B"
(sorted) to those four path lists: a commit's content never changes, so an entry is true
forever; a run keeps only the entries it used, so the file stays small.
"""
from __future__ import annotations

from ..errors import RegistryError
from ..store.git import TREE_MODE, Repo, git_version

MERGE_TREE = (2, 38)  # --write-tree
MERGE_STDIN = (2, 39)  # --stdin


def pair_key(a: str, b: str) -> str:
    return " ".join(sorted((a, b)))


def changes(repo: Repo, pairs: list[tuple[str, str]], cache: dict,
            version: tuple[int, ...] | None = None) -> tuple[dict, str]:
    """{pair_key: {"conflicts", "both", <tip>: [paths that tip changed], ...}} for
    *pairs*, from *cache* where it has them, and the method used for the rest
    ("merge-tree" or "changed-paths"); *cache* gets the new entries."""
    todo = list(dict.fromkeys(pair_key(a, b) for a, b in pairs if a != b))
    todo = [k for k in todo if k not in cache]
    method = "merge-tree"
    if todo:
        version = version or git_version()
        if version < MERGE_TREE:
            method = "changed-paths"
            for key in todo:
                cache[key] = _diffed(repo, *key.split())
        else:
            for key, merged in _merged(repo, todo, version >= MERGE_STDIN).items():
                cache[key] = _sides(repo, key, merged)
    return {pair_key(a, b): cache[pair_key(a, b)] for a, b in pairs if a != b}, method


def _merged(repo: Repo, keys: list[str], batch: bool) -> dict[str, dict]:
    out: dict[str, dict] = {}
    args = ["merge-tree", "--write-tree", "-z", "--name-only", "--messages"]
    while len(out) < len(keys):
        rest = [k for k in keys if k not in out]
        if batch:
            proc = repo.git(*args, "--stdin", check=False,
                            input="".join(k + "\n" for k in rest).encode())
            results = _parse(proc.stdout, stdin=True)
        else:
            proc = repo.git(*args, *rest[0].split(), check=False)
            results = _parse(proc.stdout, stdin=False) if proc.returncode in (0, 1) else []
        out.update(zip(rest, results))
        if len(out) < len(keys):  # git stopped at the next pair
            if b"unrelated histories" not in proc.stderr:
                # git failed (a missing object, a shallow clone): that is not "no
                # overlap", and must not be cached as one
                lines = proc.stderr.decode(errors="replace").strip().splitlines()
                raise RegistryError(f"git merge-tree failed: {lines[-1] if lines else proc.returncode}")
            out[rest[len(results)]] = {"tree": None, "conflicts": [], "both": []}  # cannot be merged
    return out


def _parse(data: bytes, stdin: bool) -> list[dict]:
    """The merges in merge-tree's -z output: [status NUL] tree NUL, conflicted paths
    NUL ..., NUL, then messages (count NUL, paths NUL ..., type NUL, text NUL), NUL."""
    fields = data.decode("utf-8", errors="surrogateescape").split("\0")
    results, i = [], 0
    while i + 1 < len(fields) and fields[i]:
        i += 1 if stdin else 0  # the clean/conflicted status: the paths say it
        tree, conflicts, both = fields[i], [], []
        i += 1
        while i < len(fields) and fields[i]:
            conflicts.append(fields[i])
            i += 1
        i += 1
        while i < len(fields) and fields[i].isdigit():
            count = int(fields[i])
            paths, kind = fields[i + 1:i + 1 + count], fields[i + 1 + count]
            if kind == "Auto-merging":
                both += paths
            i += count + 3
        i += 1
        results.append({"tree": tree, "conflicts": sorted(set(conflicts)),
                        "both": sorted(set(both) - set(conflicts))})
        if not stdin:
            break
    return results


def _sides(repo: Repo, key: str, merged: dict) -> dict:
    """The cache entry of one merge: each tip's changed paths are where the merged tree
    differs from the other tip's tree."""
    a, b = key.split()
    entry = {"conflicts": merged["conflicts"], "both": merged["both"], a: [], b: []}
    if merged["tree"]:
        shared = set(merged["conflicts"]) | set(merged["both"])
        entry[a] = sorted(set(tree_diff(repo, tree_of(repo, b), merged["tree"])) | shared)
        entry[b] = sorted(set(tree_diff(repo, tree_of(repo, a), merged["tree"])) | shared)
    return entry


def _diffed(repo: Repo, a: str, b: str) -> dict:
    def names(left: str, right: str) -> list[str]:
        out = repo.git("diff", "--no-renames", "--name-only", "-z", f"{left}...{right}").stdout
        return sorted(p for p in out.decode("utf-8", "surrogateescape").split("\0") if p)
    mine, theirs = names(b, a), names(a, b)
    return {"conflicts": [], "both": sorted(set(mine) & set(theirs)), a: mine, b: theirs}


def tree_of(repo: Repo, commit: str) -> str:
    return repo.commit_info(commit)[0]


def tree_diff(repo: Repo, left: str | None, right: str | None, prefix: str = "") -> list[str]:
    """Paths whose entries differ between two trees, descending only into subtrees that
    differ (in-process: one cat-file read per differing tree)."""
    if left == right:
        return []
    old = repo.read_tree(left) if left else {}
    new = repo.read_tree(right) if right else {}
    out: list[str] = []
    for name in sorted(set(old) | set(new)):
        a, b = old.get(name), new.get(name)
        if a == b:
            continue
        path = prefix + name.decode("utf-8", "surrogateescape")
        a_tree = a[1].hex() if a and a[0] == TREE_MODE else None
        b_tree = b[1].hex() if b and b[0] == TREE_MODE else None
        if a_tree or b_tree:
            out += tree_diff(repo, a_tree, b_tree, path + "/")
        if (a and a[0] != TREE_MODE) or (b and b[0] != TREE_MODE):
            out.append(path)
    return out

