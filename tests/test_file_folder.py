"""A file lock and a folder lock on one name meet (issue 34): ``src/gen`` (a file) and
``src/gen/`` (a folder) were both granted, to two sessions.  One name is a file or a
folder, never both, so a folder lock covers the file of its own name: the claim is
refused in both orders, and every reader that decides "held" (``lock check``, the
pre-commit guard, the harness gate) says so.  In the layout ``init`` makes, a one-level
folder lock is recorded in every lock shard and the file lock in one: two processes
claiming the two forms at once, exactly one wins.  Real CLI processes, real hooks."""
from __future__ import annotations

import json

import pytest

from agent_registry.branch.shards import lock_shards
from helpers import git
from test_guard import agents, commit, edit, head, hold, open_registry  # noqa: F401 (fixture)
from test_harness_hooks import hook, verdict
from test_races import race, register_many


@pytest.mark.parametrize("name", ["gen", "src/gen"])
@pytest.mark.parametrize("first", ["file", "folder"])
def test_a_file_lock_and_a_folder_lock_on_one_name_meet(guarded, run, agents, name, first):
    held, other = (name, name + "/") if first == "file" else (name + "/", name)
    hold(guarded, "kimi-1", [held], agents())
    assert run("register", "codex-2", "--provider", "Codex").returncode == 0
    lost = run("lock", "acquire", other, "--session", "codex-2")
    assert lost.returncode == 1, lost.stderr
    assert f"{other} is locked by kimi-1 (via {held})" in lost.stderr
    check = run("--json", "lock", "check", other, "--session", "codex-2")
    assert check.returncode == 1
    found = json.loads(check.stdout)["paths"][0]
    assert (found["path"], found["state"], found["target"], found["owner"]) == \
        (other, "locked", held, "kimi-1")
    if first == "folder":  # the file itself is written: the guard and the gate refuse it
        before = head(guarded)
        edit(guarded, name, "generated\n")
        proc = commit(guarded, "-m", "the file of the folder's name")
        assert proc.returncode == 1 and "kimi-1" in proc.stderr and head(guarded) == before
        gate = hook(guarded, "claude", "pre-tool-use", {
            "session_id": "c0dex-2", "transcript_path": "/tmp/t.jsonl", "cwd": str(guarded),
            "hook_event_name": "PreToolUse", "tool_name": "Write",
            "tool_input": {"file_path": str(guarded / name), "content": "x"}})
        reason = verdict("claude", gate)
        assert reason and "kimi-1" in reason, gate.stdout
    locks = json.loads(run("--json", "lock", "list").stdout)
    assert [(lock["path"], lock["owner"]) for lock in locks["locks"]] == [(held, "kimi-1")]


def test_a_file_and_a_folder_of_one_name_claimed_at_once_have_one_winner(guarded, tmp_path):
    """Two processes, one claiming the file, the other the folder, released together:
    exactly one wins each round, whichever shards each form is recorded in (a one-level
    folder in every shard, its file in one; two levels: the same shard)."""
    register_many(guarded, "racer", 2)
    names = ["gen0", "gen1", "src/gen2", "src/gen3"]
    assert len(lock_shards("gen0/", 16)) == 16 and len(lock_shards("gen0", 16)) == 1
    assert lock_shards("src/gen2/", 16) == lock_shards("src/gen2", 16)
    for n, name in enumerate(names):
        forms = (name, name + "/") if n % 2 == 0 else (name + "/", name)
        results = race(guarded, [["lock", "acquire", form, "--session", f"racer-{i}"]
                                 for i, form in enumerate(forms)], tmp_path / f"round-{n}")
        codes = sorted(proc.returncode for proc in results)
        assert codes == [0, 1], [(p.args, p.returncode, p.stderr) for p in results]
    with open_registry(guarded) as registry:
        held = {lock["path"].rstrip("/"): lock["owner"] for lock in registry.locks()}
    assert sorted(held) == sorted(names)
    assert git(guarded, "status", "--porcelain") == ""
