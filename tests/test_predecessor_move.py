"""Moving over from the predecessor tool (issue 15): its home folder as its scripts write it
(nested todo/notify maps, Rome local times, Italian notes, numeric wiki ids), its LLM
variables, and the habits its users bring (an empty wiki query lists the latest entries)."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import urllib.error
import urllib.request
from datetime import datetime, timezone
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from agent_registry.branch.view import done_path, live_path
from agent_registry.wiki.entry import entry_id
from helpers import git, registry_refs
from test_wiki_index_build import run_on_terminal
from test_wiki_support import FakeOpenAI

KIMI, CLAUDE = "kimi-1", "claude-2"

# What the predecessor's registry_manager.py writes (yaml.safe_dump, block style), after
# `register kimi-1 ... --todo-present "step one,step two" --notify-started ...`,
# `update --todo-past analisi --todo-future deploy`, `context log` and
# `end kimi-1 --router ... --cosa ... --bug bug1,bug2`.
KIMI_SESSION = """\
session_id: kimi-1
provider: Kimi
ai_version: '2.7'
started_at: 2026-12-01 06:05
working_on: Refactoring auth
todo:
  past:
  - analisi
  present:
  - step one
  - step two
  future:
  - deploy
space:
- src/a.py
do_not_touch: []
status: Finished
issues: 'wiki: campi non documentati: come_fatto, problema_risolto, skill_tool_mcp'
handoff: ''
pid: 14117
cmdline: registry_manager.py register kimi-1 Kimi 2.7 Refactoring auth
project: tmp
git_branch: ''
notify:
  started: Kimi parte
"""
CLAUDE_SESSION = """\
session_id: claude-2
provider: Claude
ai_version: opus
started_at: 2026-07-16 23:30
working_on: dashboard
todo:
  past: []
  present:
  - ui
  future: []
space: []
do_not_touch: []
status: OnWorking
issues: ''
handoff: ''
pid: 14581
project: tmp
git_branch: ''
"""
KIMI_WIKI = """\
---
id: 3
session_id: kimi-1
provider: Kimi
modello: '2.7'
data: '2026-12-01'
router: auth refactor token
cosa_fatto: estratto token manager
come_fatto: non documentato
problema_risolto: non documentato
file_toccati:
- src/a.py
git_push: []
handoff: []
bug_trovati:
- bug1
- bug2
skill_tool_mcp:
- non documentato
---

# Context sessione kimi-1

- **2026-12-01 06:05** — letto auth.py
"""


@pytest.fixture
def home(tmp_path) -> Path:
    root = tmp_path / "predecessor-home"
    for folder in ("sessions", "wiki", "contexts"):
        (root / folder).mkdir(parents=True)
    (root / "sessions" / f"{KIMI}.yaml").write_text(KIMI_SESSION)
    (root / "sessions" / f"{CLAUDE}.yaml").write_text(CLAUDE_SESSION)
    (root / "wiki" / f"{KIMI}.md").write_text(KIMI_WIKI)
    (root / "contexts" / f"{KIMI}-context.md").write_text(
        "# Context sessione kimi-1\n\n- **2026-12-01 06:05** — letto auth.py\n")
    return root


def shown(run, sid: str) -> dict:
    (session,) = json.loads(run("--json", "show", sid).stdout)["sessions"]
    return session


def rome_to_utc(text: str) -> str:
    moment = datetime.fromisoformat(text).replace(tzinfo=ZoneInfo("Europe/Rome"))
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


# -- import-home ------------------------------------------------------------------------

def test_nested_todo_and_notify_become_our_fields_not_python_repr(run, repo, home):
    assert run("import-home", str(home)).returncode == 0
    kimi_file = git(repo, "show", f"agent-registry:{done_path(KIMI)}")
    assert "{'" not in kimi_file and "['" not in kimi_file  # no Python repr on the branch
    kimi = shown(run, KIMI)
    assert kimi["todo_past"] == ["analisi"]
    assert kimi["todo_present"] == ["step one", "step two"]
    assert kimi["todo_future"] == ["deploy"]
    assert kimi["notify_started"] == "Kimi parte"
    assert "todo" not in kimi and "notify" not in kimi
    claude = shown(run, CLAUDE)
    assert claude["todo_present"] == ["ui"]
    assert 'status: "OnWorking"' in git(repo, "show", f"agent-registry:{live_path(CLAUDE)}")


def test_times_move_from_rome_to_utc_and_a_wiki_date_is_not_shifted(run, repo, home):
    assert run("import-home", str(home)).returncode == 0
    # winter (UTC+1) and summer (UTC+2) Rome times, the latter across midnight UTC
    kimi = shown(run, KIMI)
    assert kimi["registered_at"] == rome_to_utc("2026-12-01 06:05") == "2026-12-01T05:05:00Z"
    claude = shown(run, CLAUDE)
    assert claude["registered_at"] == "2026-07-16T21:30:00Z"
    entry = json.loads(run("--json", "wiki", "show", KIMI).stdout)
    assert entry["date"] == "2026-12-01"  # a date has no hour: it was 2026-11-30T23:00:00Z
    assert entry["handoff"] == ""  # the predecessor's [] is no handoff, not the text "[]"


def test_wiki_show_finds_the_predecessors_numeric_id(run, repo, home):
    assert run("import-home", str(home)).returncode == 0
    entry = json.loads(run("--json", "wiki", "show", "3").stdout)
    assert entry["session_id"] == KIMI and entry["legacy_id"] == 3
    missing = run("wiki", "show", "4")
    assert missing.returncode == 1 and "no wiki entry 4" in missing.stderr


def test_the_italian_undocumented_note_reads_in_english(run, repo, home):
    assert run("import-home", str(home)).returncode == 0
    kimi = shown(run, KIMI)
    assert kimi["issues"] == "wiki: not documented: how, solved, tools"


# -- wiki ingest updates the session's note ---------------------------------------------

@pytest.fixture
def llm():
    server = FakeOpenAI()
    yield server
    server.close()


def test_ingest_clears_the_not_documented_note_of_the_session(run, repo, home, llm):
    assert run("register", "s-1", "--provider", "Kimi", "--working-on", "x").returncode == 0
    assert run("update", "s-1", "--issues", "flaky ci").returncode == 0
    assert run("end", "s-1", "--what", "fixed ci", "--bugs", "", "--tools", "").returncode == 0
    before = shown(run, "s-1")["issues"]
    assert before == "flaky ci; wiki: not documented: router, how, solved"
    llm.script = [json.dumps({"router": "ci fix", "how": "retried", "solved": "flaky ci"})]
    done = run("wiki", "ingest", "s-1", env=llm.env())
    assert done.returncode == 0, done.stderr
    assert shown(run, "s-1")["issues"] == "flaky ci"
    # an imported (finished) session with the predecessor's note is brought in line too
    assert run("import-home", str(home)).returncode == 0
    llm.script = [json.dumps({"how": "by hand", "solved": "auth", "tools": ["grep"]})]
    assert run("wiki", "ingest", KIMI, env=llm.env()).returncode == 0
    assert shown(run, KIMI)["issues"] == ""


# -- the predecessor's LLM variables ----------------------------------------------------

def test_kimi_variables_configure_the_llm(run, repo, home, llm):
    from agent_registry.wiki.llm import MOONSHOT_URL, resolve
    cfg, _ = resolve({"KIMI_API_KEY": "sk-kimi"})
    assert (cfg.base_url, cfg.model, cfg.api_key) == (MOONSHOT_URL, "kimi-k2.5", "sk-kimi")
    assert cfg.temperature == 1.0  # kimi-k2 models refuse any other
    cfg, _ = resolve({"MOONSHOT_API_KEY": "sk-moon", "KIMI_MODEL": "moonshot-v1-8k"})
    assert (cfg.api_key, cfg.model, cfg.temperature) == ("sk-moon", "moonshot-v1-8k", 0.0)
    assert run("import-home", str(home)).returncode == 0
    llm.script = [json.dumps({"results": [{"id": entry_id(KIMI), "description": "auth work",
                                           "why": "same module"}]})]
    env = {"KIMI_API_KEY": "sk-kimi", "KIMI_BASE_URL": llm.base_url, "KIMI_MODEL": "kimi-x"}
    answer = json.loads(run("--json", "wiki", "query", "auth token", env=env).stdout)
    assert answer["ranker"] == "llm" and answer["model"] == "kimi-x"
    assert answer["results"][0]["why"] == "same module" and "llm_off" not in answer
    request = llm.requests[0]
    assert request["auth"] == "Bearer sk-kimi" and request["body"]["model"] == "kimi-x"


def test_wiki_query_says_why_the_llm_is_off(run, repo, home):
    assert run("import-home", str(home)).returncode == 0
    text = run("wiki", "query", "auth")
    assert text.returncode == 0
    assert text.stdout.splitlines()[0].startswith("ranker: whoosh (LLM off: no LLM configured")
    half = run("--json", "wiki", "query", "auth", env={"KIMI_BASE_URL": "http://127.0.0.1:9/v1"})
    off = json.loads(half.stdout)["llm_off"]
    assert off == ("the LLM is not fully configured: AGENT_REGISTRY_LLM_MODEL, "
                   "AGENT_REGISTRY_LLM_API_KEY not set")
    ingest = run("wiki", "ingest", KIMI)
    assert ingest.returncode == 1 and "no LLM configured" in ingest.stderr


# -- an empty query lists the latest entries --------------------------------------------

def end_with(run, sid: str, what: str) -> None:
    assert run("register", sid, "--provider", "Kimi", "--working-on", what).returncode == 0
    assert run("end", sid, "--what", what).returncode == 0


def test_an_empty_wiki_query_lists_the_latest_entries(run, repo):
    for number, what in enumerate(("first", "second", "third")):
        end_with(run, f"s-{number}", what)
    for args in (("wiki", "query"), ("wiki", "query", "")):
        proc = run("--json", *args)
        assert proc.returncode == 0, proc.stderr
        answer = json.loads(proc.stdout)
        assert answer["ranker"] == "latest"
        assert {r["session_id"] for r in answer["results"]} == {"s-0", "s-1", "s-2"}
    text = run("wiki", "query", "--limit", "2").stdout.splitlines()
    assert text[0] == "ranker: latest" and len([t for t in text if t.startswith(" ")]) == 2


def test_the_dashboard_wiki_search_lists_the_latest_entries_for_an_empty_query(run, repo):
    pytest.importorskip("uvicorn")
    from test_dashboard_support import served
    end_with(run, "s-1", "oauth tokens")
    with served(repo) as start:
        for query in ("?q=", ""):
            with urllib.request.urlopen(f"{start['url']}api/wiki{query}", timeout=60) as answer:
                body = json.loads(answer.read())
            assert body["ranker"] == "latest"
            assert [r["session_id"] for r in body["results"]] == ["s-1"]


# -- no silent waits: progress on a terminal, nothing otherwise --------------------------

def test_import_home_shows_progress_on_a_terminal_only(run, repo, home, tmp_path):
    code, stdout, shown = run_on_terminal(repo, "import-home", str(home))
    assert code == 0, shown
    assert f"importing {home} [" in shown and "4/4 files" in shown
    assert f"imported 4 files from {home} in" in shown and "sessions: 2 imported" in stdout
    again = tmp_path / "again"
    git(tmp_path, "clone", "-q", str(repo), str(again))
    code, stdout, shown = run_on_terminal(again, "--json", "import-home", str(home))
    assert (code, shown) == (0, "") and json.loads(stdout)["summary"]
    plain = run("import-home", str(home))  # stderr is a pipe: no bar
    assert plain.returncode == 0 and plain.stderr == ""


def test_ingest_pending_shows_progress_on_a_terminal(run, repo, home, llm, monkeypatch):
    assert run("import-home", str(home)).returncode == 0
    for name, value in llm.env().items():
        monkeypatch.setenv(name, value)
    llm.script = [json.dumps({"how": "by hand", "solved": "auth", "tools": []})]
    code, stdout, shown = run_on_terminal(repo, "wiki", "ingest-pending")
    assert code == 0, shown
    assert "ingesting pending wiki entries [" in shown and "1/1 entries" in shown
    assert "ingested 1 of 1 pending entries in" in shown
    assert stdout.startswith(f"ingested {KIMI}: how, solved, tools")


# -- init --remote URL ----------------------------------------------------------------------

def pushed_everything(repo: Path, remote: Path) -> bool:
    """Whether *remote* has every registry branch of *repo* at its tip: the main one and
    its 16 lock shards (and any clone ref)."""
    mine = registry_refs(repo)
    assert len(mine) >= 17, mine
    return registry_refs(remote) == mine


@pytest.fixture
def bare(tmp_path) -> Path:
    remote = tmp_path / "shared.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    return remote


def test_init_remote_url_adds_checks_and_pushes(run, repo, bare):
    proc = run("--json", "init", "--remote", str(bare))
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["remote"] == {"name": "origin", "url": str(bare), "added": True,
                                "public": False, "pushed": True}
    assert git(repo, "remote", "get-url", "origin").strip() == str(bare)
    assert git(repo, "config", "agent-registry.remote").strip() == "origin"
    assert pushed_everything(repo, bare)
    # a name git knows still works, and a second remote gets its own name
    assert run("init", "--remote", "origin").returncode == 0
    other = bare.parent / "other.git"
    git(bare.parent, "init", "-q", "--bare", str(other))
    taken = run("init", "--remote", str(other))
    assert taken.returncode == 2 and "remote 'origin' already points at" in taken.stderr
    named = run("init", "--remote", str(other), "--remote-name", "team")
    assert named.returncode == 0, named.stderr
    assert git(repo, "config", "agent-registry.remote").strip() == "team"
    assert git(other, "rev-parse", "agent-registry").strip()
    assert pushed_everything(repo, other)


def test_init_remote_url_that_does_not_answer_changes_nothing(run, repo, tmp_path):
    missing = run("init", "--remote", str(tmp_path / "nothing-here.git"))
    assert missing.returncode == 2 and "no remote named" in missing.stderr  # not a URL, no such name
    down = run("init", "--remote", "http://127.0.0.1:9/team.git")
    assert down.returncode == 1 and "is unreachable" in down.stderr
    assert git(repo, "remote") == "" and registry_refs(repo) == {}
    assert run("init", "--remote", "-oops://x").returncode == 2


def test_init_remote_url_that_never_answers_says_its_timeout_in_one_line(run, repo):
    """A server that accepts the connection and never says a word (issue 34): the
    check gives up after agent-registry.networkTimeout and says so in one line, exit 1,
    nothing changed (a traceback before)."""
    from test_sync_failclosed import SilentServer
    git(repo, "config", "agent-registry.networkTimeout", "2")
    server = SilentServer()
    try:
        url = f"git://127.0.0.1:{server.port}/team.git"
        proc = run("init", "--remote", url)
    finally:
        server.close()
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.strip().splitlines() == [
        f"agent-registry: {url} is unreachable: no answer within 2 s (git ls-remote); "
        "nothing changed"], proc.stderr
    assert git(repo, "remote") == "" and registry_refs(repo) == {}


class Served:
    """A bare repository served over plain (dumb) HTTP on 127.0.0.1 with no credentials:
    what a publicly readable forge answers to an anonymous ls-remote."""

    def __init__(self, folder: Path, status: int = 200) -> None:
        import functools
        import threading
        from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

        class Handler(SimpleHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                if status != 200:
                    self.send_error(status)
                    return
                super().do_GET()

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0),
                                         functools.partial(Handler, directory=str(folder)))
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/{name}"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def test_init_remote_warns_when_an_http_url_is_publicly_readable(run, repo, bare, tmp_path):
    git(tmp_path, "clone", "-q", "--bare", str(repo), str(tmp_path / "public.git"))
    git(tmp_path / "public.git", "update-server-info")
    server = Served(tmp_path)
    try:
        proc = run("init", "--remote", server.url("public.git"))
        # a read-only mirror: readable by anyone, and it takes no push
        assert proc.returncode == 3, proc.stderr
        assert "publicly readable" in proc.stderr and "anyone" in proc.stderr
        assert git(repo, "remote", "get-url", "origin").strip() == server.url("public.git")
    finally:
        server.close()
    closed = Served(tmp_path, status=401)
    try:
        from agent_registry.sync.setup import publicly_readable
        assert publicly_readable(closed.url("public.git")) is False
    finally:
        closed.close()


# -- context show ----------------------------------------------------------------------------

def test_context_show_reads_the_diary_back(run, repo):
    assert run("register", "s-1", "--provider", "Kimi", "--working-on", "auth").returncode == 0
    nothing = run("context", "show", "s-1")
    assert nothing.returncode == 1 and "has no diary yet" in nothing.stderr
    assert run("context", "log", "s-1", "read auth.py").returncode == 0
    assert run("context", "log", "s-1", "extracted the token manager").returncode == 0
    shown = run("context", "show", env={"AGENT_REGISTRY_SESSION": "s-1"})
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith("# Diary of s-1")
    lines = [line for line in shown.stdout.splitlines() if line.startswith("- 20")]
    assert [line.split(" ", 2)[2] for line in lines] == ["read auth.py", "extracted the token manager"]
    assert shown.stdout.rstrip().endswith("extracted the token manager")
    as_json = json.loads(run("--json", "context", "show", "s-1").stdout)
    assert as_json == {"session": "s-1", "path": "contexts/s-1.md", "diary": shown.stdout}
    unknown = run("context", "show", "nobody-1")
    assert unknown.returncode == 1 and \
        unknown.stderr == "agent-registry: unknown session nobody-1; live sessions: s-1\n"
    assert run("context", "show", "bad id").returncode == 2


def test_the_dashboard_sync_card_sets_up_a_remote_url(run, repo, bare):
    pytest.importorskip("uvicorn")
    from test_dashboard_support import served
    assert run("init").returncode == 0
    with served(repo) as start:
        def post(body: dict) -> tuple[int, dict]:
            request = urllib.request.Request(
                f"{start['url']}api/sync/remote", data=json.dumps(body).encode(), method="POST",
                headers={"Content-Type": "application/json",
                         "X-Agent-Registry-Token": start["token"]})
            try:
                with urllib.request.urlopen(request, timeout=60) as answer:
                    return answer.status, json.loads(answer.read())
            except urllib.error.HTTPError as error:
                return error.code, json.loads(error.read())

        code, body = post({"url": str(bare.parent / "missing.git")})
        assert code == 409 and "nothing changed" in body["error"]["message"]
        code, body = post({"url": str(bare), "name": "team"})
        assert code == 200, body
        assert body["remote"] == {"name": "team", "url": str(bare), "added": True,
                                  "public": False, "pushed": True}
        with urllib.request.urlopen(f"{start['url']}api/sync", timeout=60) as answer:
            state = json.loads(answer.read())
        assert state["enabled"] is True and state["remote"] == "team"
    assert pushed_everything(repo, bare)


def test_gc_shows_progress_on_a_terminal_only(run, repo, registry):
    for number in range(3):  # months-old history, by the registry's own (fixed) clock
        registry.register(f"old-{number}", provider="Kimi", working_on="x")
    for number in range(2):  # and today's, by the CLI's
        assert run("register", f"new-{number}", "--provider", "Kimi",
                   "--working-on", "y").returncode == 0
    code, stdout, shown = run_on_terminal(repo, "gc", "--keep-days", "1")
    assert code == 0, shown
    assert "gc: rewriting the commits since" in shown and "2/2 commits" in shown
    # init's two commits (the root, the layout: its lock shards hold one commit each, none
    # to squash) and the 3 registers
    assert "gc: squashed 5 commits, rewrote 2 in" in shown
    main, *others = stdout.splitlines()
    assert main == "squashed 5 commit(s), kept 2"
    assert others == [f"shard agent-registry-shards/{i:02d}: squashed 0 commit(s), kept 1"
                      for i in range(16)]
    assert run("register", "new-2", "--provider", "Kimi", "--working-on", "z").returncode == 0
    quiet = run("gc", "--keep-days", "0")
    assert quiet.returncode == 0 and quiet.stderr == ""


def test_the_sync_card_and_the_latest_wiki_entries_in_a_browser(run, repo, bare):
    pytest.importorskip("uvicorn")
    from test_dashboard_browser import CHROMIUM, CHROMIUM_ARGS, open_dashboard
    from test_dashboard_support import served
    from playwright.sync_api import expect, sync_playwright
    if not Path(CHROMIUM).exists():
        pytest.skip("needs Debian's chromium (.ci/run installs it)")
    end_with(run, "s-1", "oauth tokens")
    with served(repo) as info, sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=CHROMIUM, headless=True,
                                         args=CHROMIUM_ARGS)
        page = browser.new_page()
        open_dashboard(page, info)
        # nothing typed in the wiki search yet: the latest entries
        expect(page.locator("#wiki-ranker")).to_have_text("latest entries")
        expect(page.locator("#wiki-results summary")).to_contain_text("oauth tokens")
        expect(page.locator("#sync-now")).to_be_hidden()
        page.fill("#sync-url", str(bare))
        page.click("#sync-setup button")
        expect(page.locator("#confirm-title")).to_have_text(f"Share the registry through {bare}")
        page.click("#confirm-ok")
        expect(page.locator("#notice")).to_have_text(f"pushed agent-registry to origin ({bare})")
        expect(page.locator("#sync-setup")).to_be_hidden()
        expect(page.locator("#sync")).to_contain_text("origin")
        browser.close()
    assert pushed_everything(repo, bare)


def test_init_remote_with_a_relative_path_stores_it_absolute(run, repo, bare):
    relative = Path("..") / bare.name  # from the repository, as a person types it
    assert run("init", "--remote", str(relative)).returncode == 0
    assert git(repo, "remote", "get-url", "origin").strip() == str(bare)
    assert pushed_everything(repo, bare)


PREDECESSOR = Path(os.environ.get("AGENT_REGISTRY_PREDECESSOR_CODE",
                                  "/work/shared/predecessors/code"))


@pytest.mark.skipif(not (PREDECESSOR / "registry_manager.py").exists(),
                    reason="the predecessor's scripts are not here")
def test_a_home_the_predecessors_own_scripts_wrote(run, repo, tmp_path):
    pytest.importorskip("yaml")  # the predecessor's one dependency
    home = tmp_path / "real-home"
    env = {**os.environ, "AGENT_REGISTRY_HOME": str(home)}

    def old(*args: str) -> str:
        return subprocess.run([sys.executable, str(PREDECESSOR / "registry_manager.py"), *args],
                              env=env, cwd=tmp_path, capture_output=True, text=True,
                              check=True).stdout

    old("register", "kimi-9", "Kimi", "2.7", "auth work", "--todo-present", "one,two",
        "--notify-started", "starting")
    old("update", "kimi-9", "--todo-future", "later")
    old("context", "log", "kimi-9", "read auth.py")
    ended = old("end", "kimi-9", "--router", "auth token", "--cosa", "extracted the manager")
    number = re.search(r"wiki entry #(\d+)", ended)  # the predecessor's numeric id
    assert run("import-home", str(home)).returncode == 0
    session = shown(run, "kimi-9")
    assert session["todo_present"] == ["one", "two"] and session["todo_future"] == ["later"]
    assert session["notify_started"] == "starting"
    assert session["issues"] == "wiki: not documented: how, solved, bugs, tools"
    written = (home / "wiki" / "kimi-9.md").read_text()
    entry = json.loads(run("--json", "wiki", "show", number.group(1)).stdout)
    assert entry["session_id"] == "kimi-9"
    assert f"data: '{entry['date']}'" in written  # the predecessor's own date, unshifted
    assert "read auth.py" in run("context", "show", "kimi-9").stdout
