"""What a warm `wiki query` no longer pays for (no timings): hashlib (OpenSSL's _hashlib)
is imported only where a name is hashed, Whoosh looks its terms up with CPython's own
MD5 and unpickles with _pickle (not pickle.py), decimal waits for a Decimal field, and the registry's config comes from the files, without a `git config` process,
when no config file mentions agent-registry."""
from __future__ import annotations

import hashlib
import os
import subprocess
import sys

from helpers import CLI, git
from test_wiki_support import fixture_files, put_files

READ_CONFIG = ("import sys; from agent_registry.store.git import read_config; "
               "print(sorted(read_config(sys.argv[1]).items()))")


def test_a_warm_query_imports_no_hashlib_pickle_or_decimal(registry, repo, run):
    put_files(registry, fixture_files())
    assert run("wiki", "query", "sqlite database is locked").returncode == 0  # builds
    for path in ("quick", "whole"):  # wiki/segfiles.py reads the index, then Whoosh
        if path == "whole":
            git(repo, "config", "agent-registry.readFreshness", "30")
        proc = subprocess.run([sys.executable, "-X", "importtime", CLI, "wiki", "query",
                               "sqlite database is locked"], cwd=repo, capture_output=True,
                              text=True)
        assert proc.returncode == 0 and "claude-1751000016" in proc.stdout
        imported = {line.split("|")[-1].strip() for line in proc.stderr.splitlines()
                    if line.startswith("import time:")}
        assert ("whoosh.filedb.filetables" in imported) == (path == "whole")
        assert "_pickle" in imported
        assert not {"hashlib", "_hashlib", "pickle", "decimal"} & imported


def test_names_are_the_same_sha1_as_before():
    from agent_registry.branch.paths import record_name
    from agent_registry.branch.shards import session_shard
    from agent_registry.branch.view import done_path
    from agent_registry.wiki.entry import entry_id
    sid = "claude-1751000016"
    digest = hashlib.sha1(sid.encode())
    assert entry_id(sid) == digest.hexdigest()[:len(entry_id(sid))]
    assert done_path(sid).split("/")[-2] == digest.hexdigest()[:2]
    assert session_shard(sid, 7) == int.from_bytes(hashlib.sha1(b"s:" + sid.encode())
                                                   .digest()[:4], "big") % 7
    target = hashlib.sha1(b"src/auth.py").hexdigest()
    assert record_name("src/auth.py") == f"locks/{target[:2]}/{target}.json"


def test_whoosh_term_tables_hash_with_the_same_md5(registry):
    from agent_registry.wiki.index import load_whoosh
    load_whoosh()
    from whoosh.filedb.filetables import md5_hash
    assert md5_hash(b"sqlite") == int(hashlib.md5(b"sqlite").hexdigest(), 16) & 0xFFFFFFFF


def _read_config(git_dir, path_env: str) -> str:
    proc = subprocess.run([sys.executable, "-c", READ_CONFIG, str(git_dir)],
                          env={**os.environ, "PATH": path_env}, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def test_config_without_a_git_process_when_no_file_mentions_us(repo, tmp_path):
    no_git = tmp_path / "no-git"
    no_git.mkdir()  # git cannot be started: the files must answer
    assert _read_config(repo / ".git", str(no_git)) == "[]"
    git(repo, "remote", "add", "origin", "https://example.com/x.git")
    git(repo, "worktree", "add", "-q", str(tmp_path / "wt"))
    worktree_git_dir = git(tmp_path / "wt", "rev-parse", "--absolute-git-dir").strip()
    assert _read_config(worktree_git_dir, str(no_git)) == "[('remote.origin.url', '(set)')]"


def test_config_from_git_when_a_file_mentions_us_or_includes(repo, tmp_path):
    path = os.environ["PATH"]
    git(repo, "config", "agent-registry.branch", "reg")
    assert _read_config(repo / ".git", path) == "[('agent-registry.branch', 'reg')]"
    git(repo, "config", "--unset", "agent-registry.branch")
    included = tmp_path / "included.cfg"
    included.write_text('[agent-registry]\n\tremote = none\n[remote "origin"]\n\turl = u\n')
    git(repo, "config", "include.path", str(included))
    assert _read_config(repo / ".git", path) == \
        "[('agent-registry.remote', 'none'), ('remote.origin.url', 'u')]"
