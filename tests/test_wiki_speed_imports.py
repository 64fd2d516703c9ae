"""What a warm `wiki query` process imports (no timings): none of the modules the search
never uses, and Whoosh, after the shim's lazy stand-ins, still reaches every one of them
when it needs them (a rebuild, random file names, html escaping, queues, dates, fuzzy
terms)."""
from __future__ import annotations

import subprocess
import sys

import pytest

from helpers import CLI, git
from test_wiki_support import fixture_files, put_files

QUESTION = "sqlite database is locked"
# imported by the standard library or Whoosh at module level, used by no query
NEVER = {"pathlib", "typing", "tempfile", "random", "html", "queue", "calendar", "shutil",
         "datetime", "whoosh.lang.dmetaphone", "whoosh.util.times", "whoosh.automata.fsa",
         "whoosh.searching", "whoosh.query.qcore", "whoosh.filedb.compound", "copy",
         "weakref", "fnmatch", "urllib.parse", "click"}


@pytest.fixture
def wiki_repo(registry):
    put_files(registry, fixture_files())
    return registry


def warm_query_imports(repo) -> set[str]:
    proc = subprocess.run([sys.executable, "-X", "importtime", CLI, "wiki", "query", QUESTION],
                          cwd=repo, capture_output=True, text=True)
    assert proc.returncode == 0 and "claude-1751000016" in proc.stdout
    return {line.split("|")[-1].strip() for line in proc.stderr.splitlines()
            if line.startswith("import time:")}


def test_a_warm_query_imports_nothing_it_does_not_use(wiki_repo, repo, run):
    assert run("wiki", "query", QUESTION).returncode == 0  # builds the index
    quick = warm_query_imports(repo)  # wiki/segfiles.py reads the index
    assert "agent_registry.wiki.segfiles" in quick and "whoosh.reading" not in quick
    assert not NEVER & quick, NEVER & quick
    git(repo, "config", "agent-registry.readFreshness", "30")  # the whole path: Whoosh's
    whole = warm_query_imports(repo)
    assert "whoosh.reading" in whole and not NEVER & whole, NEVER & whole


def test_whoosh_reaches_the_real_modules_behind_the_stand_ins(wiki_repo, repo, run):
    assert run("wiki", "query", QUESTION).returncode == 0  # builds the index
    script = (
        "import sys; from agent_registry import Registry; from agent_registry.wiki import api\n"
        "registry = Registry.open(sys.argv[1])\n"
        "first = api.search(registry, 'sqlite')['results'][0]['session_id']\n"
        "assert not {'random', 'tempfile', 'queue', 'html', 'calendar'} & set(sys.modules)\n"
        "import whoosh.compat, whoosh.util, whoosh.util.times, whoosh.filedb.filestore\n"
        "assert whoosh.compat.htmlescape('<a>') == '&lt;a&gt;'\n"
        "assert whoosh.compat.queue.Queue().empty()\n"
        "assert len(whoosh.util.random_name(8)) == 8\n"
        "assert whoosh.util.times.adatetime(2024, 2, 29).day == 29\n"
        "import datetime, whoosh.fields, whoosh.codec.base\n"
        "day = datetime.datetime(2024, 2, 29)\n"
        "assert whoosh.fields.long_to_datetime(whoosh.fields.datetime_to_long(day)) == day\n"
        "assert whoosh.fields.datetime.date is datetime.date\n"
        "assert whoosh.codec.base.lev.levenshtein_automaton\n"
        "from whoosh.reading import distance; assert distance('lock', 'locks') == 1\n"
        "from whoosh.codec.base import CompoundStorage; assert CompoundStorage.assemble\n"
        "from whoosh.filedb.structfile import copy; assert copy([1]) == [1]\n"
        "assert whoosh.fields.fnmatch.translate('a*')\n"
        "from whoosh.analysis.morph import double_metaphone; assert double_metaphone('Smith')\n"
        "import random, tempfile; assert random.random() < 1 and tempfile.gettempdir()\n"
        "assert api.rebuild(registry)['built']\n"  # a writer: random names, temp files
        "print(first, api.search(registry, 'sqlite')['results'][0]['session_id'])\n")
    proc = subprocess.run([sys.executable, "-c", script, str(repo)], capture_output=True,
                          text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["claude-1751000016"] * 2
