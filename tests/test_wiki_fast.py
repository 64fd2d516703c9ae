"""What makes `wiki query` fast, checked for behaviour (no timings): the click-free path of
the console script answers exactly as the click command does and leaves anything unusual
to click; the Whoosh shim keeps the unused heavy modules out and the real ones available
afterwards; the distilled fields are searched before the diaries; segments are separate
files."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from agent_registry.wiki import search
from agent_registry.wiki.index import WikiIndex
from helpers import CLI, git
from test_wiki_support import fixture_files, put_files

QUESTION = "sqlite database is locked"


@pytest.fixture
def wiki_repo(registry):
    put_files(registry, fixture_files())
    return registry


def click_cli(repo: Path, *args: str) -> subprocess.CompletedProcess:
    """The click command tree itself, bypassing the console script's fast paths."""
    return subprocess.run([sys.executable, "-c", "import sys; from agent_registry.cli.main import "
                           "main; sys.argv[0] = 'agent-registry'; sys.exit(main())", *args],
                          cwd=repo, capture_output=True, text=True)


def test_the_fast_path_answers_as_the_click_command_does(wiki_repo, repo, run):
    run("wiki", "query", QUESTION)  # build the index: both answers below find it up to date
    for args in (["wiki", "query", QUESTION], ["--json", "wiki", "query", QUESTION],
                 ["wiki", "query", "--limit", "2", QUESTION, "--json"],
                 ["-C", "src", "wiki", "query", "--limit=1", QUESTION],
                 ["wiki", "query", "quantum chromodynamics"], ["-q", "wiki", "query", QUESTION]):
        fast, slow = run(*args), click_cli(repo, *args)
        assert (fast.returncode, fast.stdout, fast.stderr) == \
            (slow.returncode, slow.stdout, slow.stderr), args
    assert json.loads(run("--json", "wiki", "query", QUESTION).stdout)["results"]


def test_unusual_command_lines_are_left_to_click(wiki_repo, run):
    assert "Has this been done before?" in run("wiki", "query", "--help").stdout
    for args in (["wiki", "query", "a", "b"],
                 ["wiki", "query", "--limit", "0", "x"], ["wiki", "query", "--bogus", "x"]):
        proc = run(*args)
        assert proc.returncode == 2 and "(see --help)" in proc.stderr, (args, proc.stderr)
    blank = run("--json", "wiki", "query", "   ")  # no words: the latest entries (issue 15)
    assert blank.returncode == 0 and json.loads(blank.stdout)["ranker"] == "latest"


def test_the_console_script_query_never_imports_click_or_the_unused_modules(wiki_repo, repo):
    run_query = subprocess.run([sys.executable, "-X", "importtime", CLI, "wiki", "query",
                                QUESTION], cwd=repo, capture_output=True, text=True)
    assert run_query.returncode == 0 and "claude-1751000016" in run_query.stdout
    imported = {line.split("|")[-1].strip() for line in run_query.stderr.splitlines()
                if line.startswith("import time:")}
    unused = {"click", "asyncio", "urllib.request", "http.client", "ssl", "cached_property",
              "whoosh.lang.morph_en", "whoosh.qparser", "dataclasses",
              "agent_registry.wiki.importer", "agent_registry.wiki.ops", "agent_registry.cli.main"}
    assert "whoosh.reading" in imported and not unused & imported, unused & imported


def test_the_shim_leaves_the_real_modules_to_whoever_imports_them_later(wiki_repo, repo):
    script = (
        "import sys; from agent_registry import Registry; from agent_registry.wiki import search; "
        "print(search(Registry.open(sys.argv[1]), 'sqlite')['results'][0]['session_id']); "
        "assert not {'asyncio', 'urllib.request', 'cached_property'} & set(sys.modules); "
        "import urllib.request, cached_property; "
        "assert urllib.request.urlopen and cached_property.threaded_cached_property; "
        "from whoosh.compat import urlretrieve; assert urlretrieve.__name__ == 'urlretrieve'; "
        "from whoosh.query.terms import variations; print(sorted(variations('locked'))[:2])")
    proc = subprocess.run([sys.executable, "-c", script, str(repo)], capture_output=True,
                          text=True)
    assert proc.returncode == 0, proc.stderr
    first, forms = proc.stdout.splitlines()
    assert first == "claude-1751000016" and "lock" in forms  # the real morph_en answered


def entry(sid: str, router: str, body: str) -> str:
    return (f"---\nid: x\nsession_id: {sid}\nprovider: Claude\nrouter: {router}\n"
            f"what: something else\n---\n\n{body}\n")


def test_diaries_are_searched_only_when_the_distilled_fields_give_too_few_hits(wiki_repo):
    put_files(wiki_repo, {"wiki/diary-only.md": entry("diary-only", "unrelated work",
                                                      "the zanzibar parser crashed"),
                          **{f"wiki/routed-{i}.md": entry(f"routed-{i}", "zanzibar parser",
                                                          "nothing to see") for i in range(3)}})
    few = search(wiki_repo, "zanzibar parser")["results"]
    assert {r["session_id"] for r in few} == {"diary-only", "routed-0", "routed-1", "routed-2"}
    assert "body" in next(r for r in few if r["session_id"] == "diary-only")["why"]
    put_files(wiki_repo, {f"wiki/routed-{i}.md": entry(f"routed-{i}", "zanzibar parser",
                                                       "nothing to see") for i in range(3, 12)})
    many = search(wiki_repo, "zanzibar parser")["results"]
    assert len(many) == 10 and all(r["session_id"].startswith("routed-") for r in many)
    assert all("body" not in r["why"] for r in many)


def test_segments_are_separate_files_not_one_compound_file(wiki_repo):
    index = WikiIndex(wiki_repo)
    search(wiki_repo, QUESTION)
    put_files(wiki_repo, {"wiki/extra-1.md": fixture_files()["wiki/kimi-1751000033.md"]})
    search(wiki_repo, "two-factor")  # an update writes a segment too
    files = [f.name for f in Path(index.root).rglob("*") if f.is_file()]
    assert any(name.endswith(".trm") for name in files)
    assert not [name for name in files if name.endswith(".seg")], files


def test_an_index_of_the_previous_version_is_rebuilt_into_separate_files(wiki_repo, repo):
    from agent_registry.wiki.index import META_KEY, VERSION
    ix = WikiIndex(wiki_repo).open()
    writer = ix.writer(compound=True)  # as version 2 wrote them: one compound segment
    writer.update_document(key=META_KEY, commit=git(repo, "rev-parse", "agent-registry").strip(), version=VERSION - 1)
    writer.commit()
    answer = search(wiki_repo, QUESTION)
    assert answer["index"]["reason"] == \
        "the previous index was incomplete, unreadable or of an older version"
    assert answer["results"][0]["session_id"] == "claude-1751000016"
    files = [f.name for f in Path(WikiIndex(wiki_repo).root).rglob("*") if f.is_file()]
    assert not [name for name in files if name.endswith(".seg")], files
