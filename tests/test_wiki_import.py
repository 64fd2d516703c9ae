"""import-home: a predecessor home generated here (Italian field names, Rome local times,
flow-style YAML lists) is committed to the branch, mapped, once."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_registry.branch.view import done_path, live_path
from helpers import git

KIMI, CLAUDE = "kimi-1626451200", "claude-1720000000"


@pytest.fixture
def home(tmp_path) -> Path:
    root = tmp_path / "agent-registry-home"
    for folder in ("sessions", "wiki", "contexts", "locks"):
        (root / folder).mkdir(parents=True)
    (root / "sessions" / f"{KIMI}.yaml").write_text(
        f"session_id: {KIMI}\nprovider: Kimi\nai_version: '2.7'\n"
        "working_on: Refactoring modulo auth\nstatus: Finished\nproject: /home/u/proj\n"
        "git_branch: main\npid: 4242\ncmdline: kimi\nstarted_at: '2025-07-16 14:30:00'\n"
        "last_update: '2025-07-16 16:00:00'\ntodo_past: [analisi, test]\ntodo_present: []\n"
        "space: [src/auth.py]\ndo_not_touch: [src/oauth.py]\nissues: ''\n"
        "handoff: .handoff-kimi/HANDOFF-007.md\n")
    (root / "sessions" / f"{CLAUDE}.yaml").write_text(
        f"session_id: {CLAUDE}\nprovider: Claude\nai_version: opus\nworking_on: dashboard\n"
        "status: OnWorking\nstarted_at: '2025-07-17 09:00:00'\n")
    (root / "sessions" / "bad name.yaml").write_text("session_id: x\n")
    (root / "wiki" / f"{KIMI}.md").write_text(
        f"---\nid: 3\nsession_id: {KIMI}\nprovider: Kimi\nai_version: '2.7'\n"
        "data: '2025-07-16 16:00:00'\n"
        "router: 'Refactoring modulo auth: estratto token manager OAuth'\n"
        "cosa_fatto: Estratto il token manager in src/oauth.py\n"
        "come_fatto: Analisi dipendenze, estrazione classe, test di regressione\n"
        "problema_risolto: non documentato\nfile_toccati: [src/auth.py, src/oauth.py]\n"
        "bug_trovati: [scadenza token non gestita in refresh, header Authorization duplicato]\n"
        "skill_tool: [agent-registry, Grep, Bash]\nhandoff: ''\ngit_push: []\nstatus: Finished\n"
        "pending_ingest: true\n---\n\n## Context\n\n- 14:31 letto auth.py\n- 15:10 estratto OAuthTokenManager\n")
    (root / "contexts" / f"{KIMI}-context.md").write_text(
        f"# Context {KIMI}\n\n- 14:31 letto auth.py\n- 15:10 estratto OAuthTokenManager\n")
    (root / "wiki.db").write_bytes(b"SQLite format 3\0")  # the old index: not imported
    return root


def test_import_home_maps_fields_and_is_idempotent(run, repo, home):
    proc = run("--json", "import-home", str(home))
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["summary"] == {"session": {"imported": 2, "unchanged": 0, "kept": 0},
                                 "wiki": {"imported": 1, "unchanged": 0, "kept": 0},
                                 "context": {"imported": 1, "unchanged": 0, "kept": 0}}
    assert [s["reason"] for s in result["skipped"]] == ["invalid session id 'bad name'"]

    entry = json.loads(run("--json", "wiki", "show", KIMI).stdout)
    assert entry["what"] == "Estratto il token manager in src/oauth.py"
    assert entry["how"].startswith("Analisi dipendenze")
    assert entry["solved"] == "not documented"
    assert entry["files_touched"] == ["src/auth.py", "src/oauth.py"]
    assert entry["bugs"] == ["scadenza token non gestita in refresh", "header Authorization duplicato"]
    assert entry["tools"] == ["agent-registry", "Grep", "Bash"]
    assert entry["model"] == "2.7" and entry["legacy_id"] == 3
    assert entry["date"] == "2025-07-16T14:00:00Z"  # Rome summer time is UTC+2
    assert entry["pending_ingest"] is True and entry["undocumented"] == ["solved"]
    assert "estratto OAuthTokenManager" in entry["body"]

    kimi = git(repo, "show", f"agent-registry:{done_path(KIMI)}")
    assert 'registered_at: "2025-07-16T12:30:00Z"' in kimi
    assert 'heartbeat_at: "2025-07-16T14:00:00Z"' in kimi and "- \"src/oauth.py\"" in kimi
    assert 'status: "OnWorking"' in git(repo, "show", f"agent-registry:{live_path(CLAUDE)}")
    assert "15:10 estratto" in git(repo, "show", f"agent-registry:contexts/{KIMI}.md")

    found = json.loads(run("--json", "wiki", "query", "token manager oauth").stdout)
    assert found["results"][0]["session_id"] == KIMI

    before = git(repo, "rev-parse", "agent-registry")
    again = run("import-home", str(home))
    assert again.returncode == 0
    assert "sessions: 0 imported, 2 already present" in again.stdout
    assert "wiki entries: 0 imported, 1 already present" in again.stdout
    assert git(repo, "rev-parse", "agent-registry") == before


def test_import_home_keeps_what_the_branch_already_has(run, repo, home):
    assert run("register", KIMI, "--provider", "Kimi", "--working-on", "newer").returncode == 0
    result = json.loads(run("--json", "import-home", str(home)).stdout)
    assert result["summary"]["session"] == {"imported": 1, "unchanged": 0, "kept": 1}
    assert "newer" in git(repo, "show", f"agent-registry:{live_path(KIMI)}")


def test_import_home_defaults_to_the_home_folder(run, repo, home, tmp_path):
    fake_home = tmp_path / "user"
    fake_home.mkdir()
    home.rename(fake_home / ".agent-registry")
    proc = run("import-home", env={"HOME": str(fake_home)})
    assert proc.returncode == 0, proc.stderr
    assert f"from {fake_home / '.agent-registry'}:" in proc.stdout


def test_import_home_refuses_a_folder_that_is_not_a_home(run, repo, tmp_path):
    before = git(repo, "rev-parse", "--verify", "-q", "agent-registry", check=False)
    missing = run("import-home", str(tmp_path / "nope"))
    assert missing.returncode == 2 and "no predecessor home" in missing.stderr
    (tmp_path / "empty").mkdir()
    empty = run("import-home", str(tmp_path / "empty"))
    assert empty.returncode == 2 and "not an agent-registry home" in empty.stderr
    assert git(repo, "rev-parse", "--verify", "-q", "agent-registry", check=False) == before
