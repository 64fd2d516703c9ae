"""The arbiter the sharded layout rests on (docs/design.md, "Past one ref"), checked on
the git installed here with real clones racing through a real bare remote: a
`git push --atomic` of several shard refs, each a fast-forward without `+`, is accepted
whole or refused whole, and of two pushes that share a ref at most one is accepted.  So
two claims whose locks share a shard (branch/shards.py) can never both be confirmed."""
from __future__ import annotations

import random
import subprocess
import threading

from helpers import git

from agent_registry.branch import shards as S

EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
SHARDS, CLONES, ROUNDS = 4, 8, 4


def commit(clone, parent: str, message: str) -> str:
    return git(clone, "commit-tree", EMPTY_TREE, "-p", parent, "-m", message).strip()


def test_atomic_pushes_of_shard_refs_win_whole_or_not_at_all(tmp_path):
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    seed = tmp_path / "seed"
    git(tmp_path, "init", "-q", str(seed))
    refs = S.shard_refs("agent-registry", SHARDS)
    roots = [git(seed, "commit-tree", EMPTY_TREE, "-m", f"shard {i}").strip() for i in range(SHARDS)]
    git(seed, "push", "-q", "--atomic", str(remote), *[f"{c}:{r}" for c, r in zip(roots, refs)])
    clones = []
    for i in range(CLONES):
        clone = tmp_path / f"c{i}"
        git(tmp_path, "clone", "-q", "--bare", str(remote), str(clone))
        clones.append(clone)
    rng = random.Random(11)
    for rnd in range(ROUNDS):
        tips = dict(zip(refs, git(remote, "rev-parse", *refs).split()))
        for clone in clones:  # every clone starts the round from the same tips
            git(clone, "fetch", "-q", "origin", *[f"+{r}:{r}" for r in refs])
        wanted = {i: rng.sample(refs, rng.choice((1, 2, 2, 3))) for i in range(CLONES)}
        made = {i: {r: commit(clones[i], tips[r], f"round {rnd} clone {i}") for r in wanted[i]}
                for i in range(CLONES)}
        accepted: dict[int, int] = {}
        barrier = threading.Barrier(CLONES)

        def push(i: int) -> None:
            specs = [f"{new}:{ref}" for ref, new in made[i].items()]
            barrier.wait()
            accepted[i] = subprocess.run(["git", "push", "-q", "--atomic", "origin", *specs],
                                         cwd=clones[i], capture_output=True).returncode

        threads = [threading.Thread(target=push, args=(i,)) for i in range(CLONES)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        now = dict(zip(refs, git(remote, "rev-parse", *refs).split()))
        winners = [i for i, code in accepted.items() if code == 0]
        assert winners, f"round {rnd}: nobody won"
        for i in range(CLONES):
            landed = [now[r] == new for r, new in made[i].items()]
            assert all(landed) if i in winners else not any(landed), (rnd, i, landed)
        for a in winners:  # two pushes sharing a ref never both win
            for b in winners:
                assert a == b or not set(wanted[a]) & set(wanted[b]), (rnd, a, b)
        for ref in refs:  # a ref no winner wrote did not move
            if not any(ref in wanted[i] for i in winners):
                assert now[ref] == tips[ref], (rnd, ref)
