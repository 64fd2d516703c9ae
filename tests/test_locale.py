"""A person whose shell speaks another language: git translates its messages (German
here, a real locale made with `localedef` from Debian's `locales` data), and what the
registry reads in them (which failure a push met, whether the remote takes atomic
pushes, a ref another process holds) must not depend on it.  The registry's git
processes run in the C locale (store/layout.py ``clean_env``); real git, real remotes,
the real CLI in the person's environment."""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
from pathlib import Path

import pytest

from helpers import CLI, git
from test_sync_atomic import no_atomic
from test_sync_leases import made_before_its_remote, remote_parts

GERMAN = "de_DE.UTF-8"


@pytest.fixture
def german(tmp_path) -> dict[str, str]:
    """The environment of a person whose locale is German (its data made under
    *tmp_path*: LOCPATH), checked to make git speak German."""
    source = Path("/usr/share/i18n/locales/de_DE")
    if not shutil.which("localedef") or not source.exists():
        pytest.skip("no locale data to make de_DE.UTF-8 from (Debian's `locales`; "
                    ".ci/run installs it)")
    where = tmp_path / "locales"
    where.mkdir()
    subprocess.run(["localedef", "-i", "de_DE", "-f", "UTF-8", str(where / GERMAN)],
                   check=True, capture_output=True)
    env = {"LOCPATH": str(where), "LC_ALL": GERMAN, "LANGUAGE": "de"}
    said = subprocess.run(["git", "rev-parse", "--verify", "no-such-ref"], cwd=tmp_path,
                          capture_output=True, text=True, env={**os.environ, **env})
    if "fatal:" in said.stderr:  # English: this git has no German messages
        pytest.skip(f"git speaks no German here: {said.stderr.strip()}")
    return env


def test_a_remote_without_atomic_pushes_is_named_in_any_language(tmp_path, german):
    run, bare = made_before_its_remote(tmp_path)
    no_atomic(bare)
    proc = run("lock", "acquire", "src/auth.py", "--session", "repo-1", env=german)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "origin does not accept atomic pushes" in proc.stderr, proc.stderr
    assert remote_parts(bare) == []


def test_which_failure_a_push_met_is_read_in_any_language(tmp_path, german):
    run, bare = made_before_its_remote(tmp_path)
    assert run("lock", "acquire", "src/a.py", "--session", "repo-1").returncode == 0
    for url, kind in ((str(tmp_path / "nowhere.git"), "not-found"),
                      (f"git://127.0.0.1:{closed_port()}/remote.git", "unreachable")):
        git(run.cwd, "remote", "set-url", "origin", url)
        proc = run("--json", "lock", "heartbeat", "--session", "repo-1", env=german)
        assert proc.returncode == 0 and "not pushed" in proc.stderr, proc.stderr
        answer = json.loads(proc.stdout)
        assert answer["remote_error"]["kind"] == kind, answer


def closed_port() -> int:
    """A port on 127.0.0.1 nothing listens on (bound, then closed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("language", ["C", "German"])
def test_a_repository_this_git_cannot_read_is_named_with_gits_reason(tmp_path, language,
                                                                      request):
    """A repository with an extension this git does not know (as a reftable one is to a
    git before 2.45) is not "not a git repository" without a word: git's reason, which
    it gives on two lines, is the one line's end, in any language."""
    env = request.getfixturevalue("german") if language == "German" else {}
    repo = tmp_path / "repo"
    git(tmp_path, "init", "-q", str(repo))
    git(repo, "config", "core.repositoryformatversion", "1")
    git(repo, "config", "extensions.frobnicate", "true")
    proc = subprocess.run([CLI, "status"], cwd=repo, capture_output=True, text=True,
                          env={**os.environ, **env}, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip() == (f"agent-registry: not a git repository: {repo} (unknown "
                                   "repository extension found: frobnicate)"), proc.stderr
