"""The wiki: `end` (one operation), diaries, entry ids, `wiki show/query/rebuild`, and the
Whoosh index cache (incremental, interrupted, fresh clone)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agent_registry.wiki import get_entry, search
from agent_registry.wiki.entry import entry_id
from agent_registry.wiki.index import WikiIndex
from agent_registry.wiki.ops import end_session
from helpers import CLI, git, registry_ops, registry_refs
from test_wiki_support import fixture_files, put_files


def tip(repo) -> str:
    return git(repo, "rev-parse", "agent-registry").strip()


# a fresh interpreter (nothing imported yet) with the registry of the repo in sys.argv[1]
FRESH_PRELUDE = ("import sys; from agent_registry import Registry; "
                 "registry = Registry.open(sys.argv[1]); ")


def in_fresh_python(repo: Path, script: str) -> list[str]:
    """The words *script* prints, run after FRESH_PRELUDE in a new process."""
    proc = subprocess.run([sys.executable, "-c", FRESH_PRELUDE + script, str(repo)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.split()


def commit_on_branch(repo: Path, path: str, when: float) -> None:
    """A user's commit on the current branch, dated *when* (the tests' clock)."""
    (repo / path).parent.mkdir(parents=True, exist_ok=True)
    (repo / path).write_text("changed\n")
    env = {**os.environ, "GIT_COMMITTER_DATE": f"@{int(when)} +0000",
           "GIT_AUTHOR_DATE": f"@{int(when)} +0000"}
    for args in (["add", path], ["commit", "-q", "-m", f"edit {path}"]):
        subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True)


# -- end ------------------------------------------------------------------------------

def test_end_writes_entry_finishes_and_releases_in_one_commit(registry, repo, clock):
    registry.register("kimi-1", provider="Kimi", ai_version="2.7", working_on="oauth refresh",
                      space=["docs/notes.md"])
    registry.claim("kimi-1", ["src/auth.py"])
    registry.claim("kimi-1", ["src/oauth/"])
    registry.release("kimi-1", ["src/oauth/"])
    registry.context_log("kimi-1", "serialized the token refresh")
    clock.advance(60)
    commit_on_branch(repo, "src/tokens.py", clock.now)
    clock.advance(60)
    before = tip(repo)

    result = end_session(registry, "kimi-1", router="OAuth refresh race fixed",
                         what="Serialized refresh", how="a lock around refresh()")

    # the entry, the finish and the session's end: one commit of the main branch, after
    # its lock was released in the lock shard recording it
    assert git(repo, "rev-list", "--count", f"{before}..agent-registry").strip() == "1"
    assert git(repo, "log", "-1", "--format=%s", "agent-registry").startswith(
        f"end kimi-1: wiki entry {entry_id('kimi-1')}, releasing 1 lock(s)")
    assert [op["paths"] for op, _ in registry_ops(repo, "release") if op["at"] == clock.now] == \
        [["src/auth.py"]]
    assert result["released"] == ["src/auth.py"]
    entry = get_entry(registry, "kimi-1")
    assert entry["id"] == entry_id("kimi-1") and entry["provider"] == "Kimi"
    assert entry["model"] == "2.7" and entry["status"] == "Finished"
    assert (entry["router"], entry["what"], entry["how"]) == (
        "OAuth refresh race fixed", "Serialized refresh", "a lock around refresh()")
    assert entry["solved"] == "not documented"
    assert set(entry["files_touched"]) == {"src/auth.py", "src/oauth/", "docs/notes.md",
                                           "src/tokens.py"}
    assert entry["undocumented"] == ["solved", "bugs", "tools"]
    assert entry["pending_ingest"] is True
    assert "serialized the token refresh" in entry["body"]
    assert entry["body"].startswith("# Diary of kimi-1")
    session = registry.session("kimi-1")
    assert session.status == "Finished" and session.locks == []
    assert "not documented: solved, bugs, tools" in session.issues
    assert registry.check(["src/auth.py"])[0]["state"] == "free"
    raw = git(repo, "show", "agent-registry:wiki/kimi-1.md")
    assert raw.startswith("---\nid: ") and "\n---\n" in raw


def test_end_cli_takes_the_italian_flags_and_show_finds_it_by_id_or_sid(run, repo):
    assert run("register", "claude-7", "--provider", "Claude", "--working-on", "csv").returncode == 0
    proc = run("--json", "end", "claude-7", "--router", "CSV export fixed for Excel",
               "--cosa", "BOM and separator", "--come", "utf-8-sig", "--risolto",
               "garbled accents", "--bug", "missing BOM, wrong separator",
               "--skill-tool", "pytest,Grep")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["entry"]["undocumented"] == [] and result["entry"]["pending_ingest"] is False
    wanted = entry_id("claude-7")
    for ident in ("claude-7", wanted, wanted[:6]):
        shown = run("--json", "wiki", "show", ident)
        assert shown.returncode == 0, shown.stderr
        entry = json.loads(shown.stdout)
        assert entry["id"] == wanted and entry["session_id"] == "claude-7"
        assert entry["what"] == "BOM and separator" and entry["how"] == "utf-8-sig"
        assert entry["solved"] == "garbled accents"
        assert entry["bugs"] == ["missing BOM", "wrong separator"]
        assert entry["tools"] == ["pytest", "Grep"]
    text = run("wiki", "show", "claude-7").stdout
    assert "CSV export fixed for Excel" in text and "No diary was logged" in text
    missing = run("wiki", "show", "nobody-1")
    assert missing.returncode == 1 and "no wiki entry nobody-1" in missing.stderr
    # a digit that is not an ASCII digit (int() refuses it) is an id like any other
    odd = run("wiki", "show", "\u00b3")
    assert odd.returncode == 1 and "no wiki entry \u00b3" in odd.stderr, odd.stderr


def test_end_refuses_bad_input_and_changes_nothing(run, repo):
    run("register", "kimi-2", "--provider", "Kimi")
    before = registry_refs(repo)
    long_router = run("end", "kimi-2", "--router", "x" * 301)
    assert long_router.returncode == 2 and len(long_router.stderr.strip().splitlines()) == 1
    bad_id = run("end", "../etc")
    assert bad_id.returncode == 2
    unknown = run("end", "ghost-1")
    assert unknown.returncode == 1 and "unknown session ghost-1" in unknown.stderr
    assert registry_refs(repo) == before
    assert git(repo, "ls-tree", "-r", "--name-only", "agent-registry", "wiki/") == ""


def test_end_twice_keeps_the_first_entry(run, repo):
    run("register", "kimi-3", "--provider", "Kimi")
    assert run("end", "kimi-3", "--what", "first").returncode == 0
    before = registry_refs(repo)
    again = run("--json", "end", "kimi-3")
    assert again.returncode == 0 and json.loads(again.stdout)["already"] is True
    changed = run("end", "kimi-3", "--what", "second")
    assert changed.returncode == 1 and "already has wiki entry" in changed.stderr
    assert registry_refs(repo) == before
    assert "what: \"first\"" in git(repo, "show", "agent-registry:wiki/kimi-3.md")


def test_end_after_finish_still_writes_the_entry(registry):
    registry.register("gem-1", provider="Gemini")
    registry.finish("gem-1")
    result = end_session(registry, "gem-1", what="late entry")
    assert result["released"] == [] and not result["already"]
    assert get_entry(registry, "gem-1")["what"] == "late entry"
    assert registry.session("gem-1").status == "Finished"


# -- the diary --------------------------------------------------------------------------

def test_sixteen_processes_appending_to_one_diary_keep_every_line(run, repo):
    assert run("register", "kimi-9", "--provider", "Kimi", "--working-on", "race").returncode == 0
    procs = [subprocess.Popen([CLI, "context", "log", "kimi-9", f"line number {i}"], cwd=repo,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for i in range(16)]
    codes = [p.wait(timeout=120) for p in procs]
    assert codes == [0] * 16, [p.stderr.read() for p in procs]
    shown = run("context", "show", "kimi-9")  # the diary as its readers read it
    assert shown.returncode == 0, shown.stderr
    diary = shown.stdout
    lines = [l for l in diary.splitlines() if "line number" in l]
    assert len(lines) == 16 and {int(l.rsplit(" ", 1)[1]) for l in lines} == set(range(16))
    assert diary.startswith("# Diary of kimi-9")


# -- query, index -----------------------------------------------------------------------

@pytest.fixture
def wiki_repo(registry):
    put_files(registry, fixture_files())
    return registry


LLM_OFF = ("no LLM configured (set AGENT_REGISTRY_LLM_BASE_URL, AGENT_REGISTRY_LLM_MODEL "
           "and AGENT_REGISTRY_LLM_API_KEY, or KIMI_API_KEY)")


def test_query_cli_names_the_ranker_and_says_when_nothing_matches(wiki_repo, run):
    found = run("wiki", "query", "sqlite database is locked")
    assert found.returncode == 0, found.stderr
    lines = found.stdout.splitlines()
    assert lines[0] == f"ranker: whoosh (LLM off: {LLM_OFF})"
    assert lines[1].startswith(entry_id("claude-1751000016") + "  claude-1751000016")
    as_json = json.loads(run("wiki", "query", "sqlite database is locked", "--json",
                             "--limit", "3").stdout)
    assert as_json["ranker"] == "whoosh" and len(as_json["results"]) <= 3
    first = as_json["results"][0]
    assert {"id", "session_id", "router", "what", "score", "why"} <= set(first)
    assert first["session_id"] == "claude-1751000016" and "locked" in first["why"]
    nothing = run("wiki", "query", "quantum chromodynamics lattice")
    assert nothing.returncode == 0
    assert nothing.stdout.splitlines() == [f"ranker: whoosh (LLM off: {LLM_OFF})",
                                           "not found in past sessions"]
    assert json.loads(run("--json", "wiki", "query", "  ").stdout)["ranker"] == "latest"


def test_query_syntax_characters_are_plain_words(wiki_repo):
    answer = search(wiki_repo, 'router: "database is locked" (sqlite) AND')
    assert answer["results"][0]["session_id"] == "claude-1751000016"


def test_index_is_updated_by_tree_diff_not_rebuilt(wiki_repo):
    assert search(wiki_repo, "sqlite")["index"] == {
        "built": True, "reason": "no index yet", "updated": 0, "waited": False, "entries": 33}
    current = (wiki_repo.repo.state_dir / "wiki-index" / "CURRENT").read_text()
    fixture = fixture_files()
    changed = fixture["wiki/claude-1751000016.md"].replace("SQLite", "Zanzibar")
    put_files(wiki_repo, {"wiki/claude-1751000016.md": changed,
                          "wiki/kimi-1751000015.md": None,
                          "wiki/new-1.md": fixture["wiki/codex-1751000018.md"].replace(
                              "Kubernetes", "Quetzalcoatl"),
                          "contexts/unrelated.md": "not a wiki file\n"})
    answer = search(wiki_repo, "zanzibar")
    assert answer["index"] == {"built": False, "updated": 3, "waited": False, "entries": 33}
    assert [r["session_id"] for r in answer["results"]] == ["claude-1751000016"]
    assert (wiki_repo.repo.state_dir / "wiki-index" / "CURRENT").read_text() == current
    assert search(wiki_repo, "stripe webhook signature")["results"][0]["session_id"] != \
        "kimi-1751000015"
    assert search(wiki_repo, "quetzalcoatl")["results"][0]["session_id"] == "new-1"
    assert search(wiki_repo, "quetzalcoatl")["index"] == {  # up to date: no work
        "built": False, "updated": 0, "waited": False, "entries": 33}


def _index_dir(registry) -> Path:
    root = registry.repo.state_dir / "wiki-index"
    return root / (root / "CURRENT").read_text().strip()


def test_an_update_interrupted_half_way_is_detected_and_rebuilt(wiki_repo):
    search(wiki_repo, "sqlite")
    put_files(wiki_repo, {"wiki/zz-1.md": fixture_files()["wiki/gemini-1751000019.md"]})
    # what a killed updater leaves: its marker, and the branch ahead of the index
    (_index_dir(wiki_repo) / "UPDATING").write_text("12345\n")
    answer = search(wiki_repo, "daylight saving cron twice")
    assert answer["index"]["reason"] == \
        "the previous index was incomplete, unreadable or of an older version"
    assert {r["session_id"] for r in answer["results"][:2]} == {"gemini-1751000019", "zz-1"}
    assert not (_index_dir(wiki_repo) / "UPDATING").exists()


def test_a_corrupt_index_is_rebuilt(wiki_repo):
    search(wiki_repo, "sqlite")
    for item in _index_dir(wiki_repo).iterdir():
        item.write_bytes(b"garbage")
    answer = search(wiki_repo, "sqlite database is locked")
    assert answer["index"]["built"]
    assert answer["results"][0]["session_id"] == "claude-1751000016"


def test_an_updater_killed_mid_update_leaves_a_working_index(wiki_repo, repo):
    search(wiki_repo, "sqlite")
    put_files(wiki_repo, {f"wiki/bulk-{i}.md": f'---\nrouter: "bulk {i}"\n---\n\n'
                          + "filler words of a long diary " * 100 for i in range(200)})
    script = FRESH_PRELUDE + ("from agent_registry.wiki.index import WikiIndex; "
                              "WikiIndex(registry).open()")
    proc = subprocess.Popen([sys.executable, "-c", script, str(repo)])
    marker = _index_dir(wiki_repo) / "UPDATING"
    while not marker.exists():  # the updater is between its marker and its commit
        assert proc.poll() is None, "the updater finished before it could be killed"
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    answer = search(wiki_repo, "sqlite database is locked")
    assert answer["index"]["reason"] == \
        "the previous index was incomplete, unreadable or of an older version"
    assert answer["results"][0]["session_id"] == "claude-1751000016"
    with WikiIndex(wiki_repo).open().searcher() as searcher:
        assert searcher.doc_count() == 33 + 200 + 1  # every entry and the meta document


def test_wiki_rebuild_and_a_fresh_clone_query_at_once(wiki_repo, run, repo, tmp_path):
    rebuilt = run("--json", "wiki", "rebuild")
    assert rebuilt.returncode == 0 and json.loads(rebuilt.stdout)["entries"] == 33
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(repo), str(clone))  # no local agent-registry branch
    answer = run("--json", "wiki", "query", "celery emails lost on worker restart", cwd=clone)
    assert answer.returncode == 0, answer.stderr
    assert json.loads(answer.stdout)["results"][0]["session_id"] == "kimi-1751000029"
    shown = run("--json", "wiki", "show", entry_id("kimi-1751000029"), cwd=clone)
    assert json.loads(shown.stdout)["session_id"] == "kimi-1751000029"


def test_an_unreadable_entry_is_left_out_of_the_index_and_reported_by_show(wiki_repo, run):
    put_files(wiki_repo, {"wiki/broken-1.md": "no frontmatter here\n"})
    assert search(wiki_repo, "sqlite")["results"][0]["session_id"] == "claude-1751000016"
    shown = run("wiki", "show", "broken-1")
    assert shown.returncode == 1 and "wiki/broken-1.md is unreadable" in shown.stderr


def test_a_process_that_never_imported_the_wiki_can_replay_its_operations(repo):
    # `sync` replays pending operations by name; the wiki's live in a lazily loaded module,
    # which sync's table loads (the core names nothing above it)
    assert in_fresh_python(repo, (
        "from agent_registry.sync.replay import load_operation; "
        "assert 'agent_registry.wiki' not in sys.modules; "
        "names = ('end', 'wiki-ingest', 'import-home', 'no-such-op'); "
        "[load_operation({'op': n}) for n in names]; "
        "print(all(registry.knows({'op': n}) for n in names[:3]), "
        "registry.knows({'op': 'no-such-op'}))")) == ["True", "False"]


def test_git_pushes_lists_the_commits_a_remote_branch_has_since_registration(registry, repo,
                                                                            clock, tmp_path):
    git(tmp_path, "init", "-q", "--bare", "backup.git")
    git(repo, "remote", "add", "backup", str(tmp_path / "backup.git"))
    registry.register("kimi-5", provider="Kimi")
    clock.advance(10)
    commit_on_branch(repo, "src/pushed.py", clock.now)
    git(repo, "push", "-q", "backup", "main")
    clock.advance(10)
    commit_on_branch(repo, "src/local.py", clock.now)
    entry = end_session(registry, "kimi-5")["entry"]
    pushed = git(repo, "rev-parse", "--short", "backup/main").strip()
    assert get_entry(registry, "kimi-5")["git_pushes"] == [f"backup/main {pushed} edit src/pushed.py"]
    assert {"src/pushed.py", "src/local.py"} <= set(entry["files_touched"])


def test_a_query_without_an_llm_never_imports_langchain(wiki_repo, repo):
    assert in_fresh_python(repo, (
        "from agent_registry.wiki import search; "
        "print(search(registry, 'sqlite')['ranker'], "
        "any(m.startswith(('langchain', 'openai')) for m in sys.modules))")) == ["whoosh", "False"]


def test_a_branch_rewritten_under_the_index_is_followed(wiki_repo, repo):
    search(wiki_repo, "sqlite")
    # the branch is replaced by an unrelated history and the indexed commit is pruned
    git(repo, "update-ref", "-d", "refs/heads/agent-registry")
    git(repo, "reflog", "expire", "--expire=now", "--all")
    git(repo, "gc", "-q", "--prune=now")
    put_files(wiki_repo, {"wiki/solo-1.md": fixture_files()["wiki/kimi-1751000033.md"]})
    answer = search(wiki_repo, "totp two-factor")
    assert answer["index"]["reason"].startswith("cannot diff from the indexed commit")
    assert [r["session_id"] for r in answer["results"]] == ["solo-1"]


def test_concurrent_queries_share_one_index_update(wiki_repo, repo):
    search(wiki_repo, "sqlite")
    put_files(wiki_repo, {f"wiki/extra-{i}.md": fixture_files()["wiki/gemini-1751000028.md"]
                          for i in range(20)})
    script = (FRESH_PRELUDE + "from agent_registry.wiki import search; "
              "a = search(registry, 'sqlite database is locked'); "
              "print(a['results'][0]['session_id'], a['index']['updated'] or 'none')")
    procs = [subprocess.Popen([sys.executable, "-c", script, str(repo)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(4)]
    outputs = [p.communicate(timeout=120) for p in procs]
    assert [o.split()[0] for o, _ in outputs] == ["claude-1751000016"] * 4, outputs
    # exactly one process did the update; the others found the index up to date
    assert sorted(o.split()[1] for o, _ in outputs) == ["20"] + ["none"] * 3
    with WikiIndex(wiki_repo).open().searcher() as searcher:
        assert searcher.doc_count() == 33 + 20 + 1
