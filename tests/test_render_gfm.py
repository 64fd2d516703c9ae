"""registry.md as a person sees it on the forge (issue 9, section 7): rendered by the real
GFM renderer (cmark-gfm, the C library GitHub's renderer is built on, with GitHub's
extensions and raw HTML let through as GitHub does before sanitizing), every cell shows its
text literally, stale sessions and locks are marked as the CLI judges them, the page says
when it was generated and what "stale" means, and its tables stay narrow."""
from __future__ import annotations

import json
import shutil
import subprocess
from html.parser import HTMLParser

import pytest

from agent_registry.branch.records import iso
from helpers import git
from test_core_api import BRANCH, edit_session, reg

CMARK = shutil.which("cmark-gfm")
pytestmark = pytest.mark.skipif(CMARK is None, reason="cmark-gfm is not installed (apt install cmark-gfm)")

STALE = "⚠ stale"
# Elements only markup can produce: none may come from a value on the branch.
MARKUP = {"a", "img", "em", "strong", "del", "code", "script", "b", "i", "iframe", "style"}

HOSTILE_PATHS = ["src/__init__.py", "src/*util*.py", "a|b.py", "x<script>.py",
                 "docs/[notes](http:/x).md", "www.example.com/~user/_a_.md"]
HOSTILE_WORK = ["[link](http://x)", "![img](https://e.com/i.png)",
                "see https://example.com and www.example.com", "**bold** _it_ ~~gone~~ #1",
                "`code` and ``two`` back\\ticks", "<b>html</b> <script>alert(1)</script> &amp;",
                "mail kimi@example.com :smile: <!-- c -->", "a | pipe \\| and \\\\ | end"]


class Page(HTMLParser):
    """The rendered HTML as tables of cells (text with <br> read as a line break, and the
    elements inside each cell), plus every element and paragraph of the page."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.tables: list[list[list[tuple[str, set[str]]]]] = []
        self.paragraphs: list[str] = []
        self.elements: list[tuple[str, dict]] = []
        self._cell: list | None = None
        self._para: list[str] | None = None
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        self.elements.append((tag, dict(attrs)))
        if tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self._cell = ["", set()]
        elif tag == "p":
            self._para = []
        elif tag == "br" and self._cell is not None:
            self._cell[0] += "\n"
        elif self._cell is not None:
            self._cell[1].add(tag)

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self.tables[-1][-1].append((self._cell[0], self._cell[1]))
            self._cell = None
        elif tag == "p" and self._para is not None:
            self.paragraphs.append("".join(self._para))
            self._para = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell[0] += data
        if self._para is not None:
            self._para.append(data)

    def table(self, header: str) -> list[list[str]]:
        """The text rows of the table whose first header is *header*, header row first;
        each cell also must hold no element markup could make."""
        found = next(t for t in self.tables if t[0][0][0] == header)
        for row in found:
            for text, inside in row:
                assert not inside & MARKUP, f"cell {text!r} holds {inside & MARKUP}"
        return [[text for text, _ in row] for row in found]


def render(markdown: str) -> Page:
    """*markdown* as GitHub renders a file: the YAML frontmatter apart (GitHub shows it
    as a table of its own), the rest through cmark-gfm with GitHub's extensions."""
    assert markdown.startswith("---\n")
    body = markdown.split("\n---\n", 1)[1]
    html = subprocess.run([CMARK, "--unsafe", "-e", "table", "-e", "autolink", "-e",
                           "strikethrough", "-e", "tagfilter"], input=body, text=True,
                          capture_output=True, check=True).stdout
    return Page(html)


def registry_md(repo) -> str:
    return git(repo, "show", f"{BRANCH}:registry.md")


def frontmatter(markdown: str) -> dict:
    front = markdown.split("---\n")[1]
    return {k: json.loads(v) for k, v in (line.split(": ", 1) for line in front.splitlines())}


def by_first_cell(rows: list[list[str]]) -> dict[str, list[str]]:
    return {row[0]: row for row in rows[1:]}


def render_on_main(registry, sid: str) -> None:
    """In lock shards a claim writes its shard, and the main branch's registry.md lists
    it as of the page's last render: every write of the main branch renders it (with
    every shard's locks), a shard's write only once the page is a minute old
    (test_the_main_branch_page_lists_every_lock_of_every_shard).  A main-branch write
    now (*sid*'s todo list updated) renders the page at this instant."""
    registry.update(sid, todo_present=["read the page"])


def test_every_cell_shows_its_text_literally(run, repo):
    sids = [f"kimi-{i}" for i in range(len(HOSTILE_WORK))]
    for sid, work in zip(sids, HOSTILE_WORK):
        assert run("register", sid, "--provider", "Kimi*", "--ai-version", "_2_",
                   "--working-on", work).returncode == 0
    assert run("register", "kimi@example.com", "--provider", "[Kimi](http://x)").returncode == 0
    claimed = run("lock", "acquire", *HOSTILE_PATHS, "--session", "kimi@example.com")
    assert claimed.returncode == 0, claimed.stderr
    # a line break can only come from a hand edit of the session file
    edit_session(repo, "kimi-0", working_on="first line\nsecond | line")
    assert run("lock", "heartbeat", "--session", "kimi-0").returncode == 0
    assert run("finish", "kimi-1").returncode == 0

    markdown = registry_md(repo)
    page = render(markdown)
    sessions = by_first_cell(page.table("Session"))
    expected = dict(zip(sids, ["first line\nsecond | line", *HOSTILE_WORK[1:]]))
    del expected["kimi-1"]
    for sid, work in expected.items():
        assert sessions[sid][1] == "Kimi* _2_"
        assert sessions[sid][3] == work
    assert sessions["kimi@example.com"][1] == "[Kimi](http://x)"
    locks = by_first_cell(page.table("Path"))
    assert sorted(locks) == sorted(HOSTILE_PATHS)
    assert {row[1] for row in locks.values()} == {"kimi@example.com"}
    ended = [t for t in page.tables if t[0][0][0] == "Session"][1]
    assert [text for text, _ in ended[1]][:3] == ["kimi-1", "Kimi*", HOSTILE_WORK[1]]
    # nothing but the template's own link to README.md is a link, an image or a script
    assert [attrs for tag, attrs in page.elements if tag == "a"] == [{"href": "README.md"}]
    assert not {tag for tag, _ in page.elements} & {"img", "script", "iframe", "style"}
    subject = git(repo, "log", "-1", "--format=%s", BRANCH).strip()
    generated = frontmatter(markdown)["generated_at"]
    assert f"Generated at {generated} (UTC), by the commit: {subject}" in page.paragraphs


def test_stale_sessions_and_locks_are_marked_as_the_cli_judges_them(registry, repo, clock):
    reg(registry, "gone", pid=None)
    registry.claim("gone", ["src/gone.py"])
    reg(registry, "long", pid=None)
    registry.claim("long", ["src/long.py"], ttl=5000)
    registry.claim("long", ["src/short.py"])
    clock.advance(2000)
    reg(registry, "fresh", pid=None)
    registry.claim("fresh", ["src/fresh.py"])
    render_on_main(registry, "fresh")

    markdown = registry_md(repo)
    page = render(markdown)
    heartbeats = {sid: row[4] for sid, row in by_first_cell(page.table("Session")).items()}
    assert heartbeats == {"gone": f"33m ago, {STALE}", "long": "33m ago", "fresh": "0s ago"}
    states = {path: row[-1] for path, row in by_first_cell(page.table("Path")).items()}
    judged = {l["path"]: STALE if l["stale_reason"] else "held" for l in registry.locks()}
    assert states == judged == {"src/gone.py": STALE, "src/long.py": "held",
                                "src/short.py": STALE, "src/fresh.py": "held"}
    # the page says when it was made and what stale means
    assert frontmatter(markdown) | {"last_operation": None} == {
        "generated_at": iso(clock()), "live_sessions": 3, "stale_sessions": 1, "held_locks": 4,
        "ttl": 600, "clock_skew_margin": 30, "last_operation": None, "lock_shards": 16}
    text = " ".join(" ".join(p.split()) for p in page.paragraphs)
    assert f"Generated at {iso(clock())} (UTC)" in text
    assert f"Marked {STALE}:" in text
    assert "the TTL (600 s, or the lock's own --ttl) plus 30 s allowed for clock skew" in text
    assert "judges by heartbeats and status only" in text


def test_tables_stay_narrow_and_long_lists_are_capped(registry, repo):
    work = "refactor the token refresh path so that " * 8
    sid = "claude-code-1764553401-a1b2c3d4"
    reg(registry, sid, provider="Claude Code", ai_version="claude-sonnet-4-5-20250929",
        working_on=work)
    deep = "services/billing/internal/adapters/payment_providers/stripe/webhooks/handlers"
    registry.claim(sid, [f"{deep}/event_{i:02}_handler_implementation.py" for i in range(25)])
    registry.finish(reg(registry, "ended-1", working_on=work).id)

    page = render(registry_md(repo))
    for t in (t for t in page.tables if t[0][0][0] == "Session"):
        for row in t:
            width = sum(len(text) for text, _ in row)
            assert width <= 150, f"{width} characters: {row}"
    # the lock table also says what each holder works on and since when (issue 32: the
    # forge page lists every lock with its holder's work), each cell clipped to its width
    for row in page.table("Path"):
        assert len(row[0]) <= 80 and len(row[2]) <= 60, row
        width = sum(len(text) for text in row)
        assert width <= 80 + len(sid) + 60 + 20, f"{width} characters: {row}"
    sessions = by_first_cell(page.table("Session"))
    assert sessions[sid][3] == work[:59] + "…"
    assert sessions[sid][5] == "25"
    locks = page.table("Path")
    assert len(locks) - 1 == 20 and all(row[0].endswith("_implementation.py") for row in locks[1:])
    # working_on is said in the sessions table, the ended one, and on each lock row of
    # the main branch's page (issue 32), clipped the same way everywhere
    cells = [text for t in page.tables for row in t for text, _ in row]
    assert sum(work[:59] in text for text in cells) == 2 + 20
    assert {row[2] for row in locks[1:]} == {work[:59] + "…"}
    assert "… and 5 more (see agent-registry lock list)" in page.paragraphs


def test_a_lock_with_its_own_short_ttl_is_marked_when_the_cli_calls_it_stale(registry, repo, clock):
    reg(registry, "quick", pid=None)
    registry.claim("quick", ["src/quick.py"], ttl=60)
    registry.claim("quick", ["src/normal.py"])
    reg(registry, "other", pid=None)
    clock.advance(120)  # past the short TTL and its skew margin, well within the default
    registry.claim("other", ["src/other.py"])

    page = render(registry_md(repo))
    states = {path: row[-1] for path, row in by_first_cell(page.table("Path")).items()}
    judged = {l["path"]: STALE if l["stale_reason"] else "held" for l in registry.locks()}
    assert states == judged == {"src/quick.py": STALE, "src/normal.py": "held",
                                "src/other.py": "held"}
    heartbeats = {sid: row[4] for sid, row in by_first_cell(page.table("Session")).items()}
    assert heartbeats["quick"] == "2m ago"  # the session itself still counts


def test_the_raw_page_escapes_only_what_gfm_would_read_as_markup(run, repo):
    sid = "x-1796160374-de95"
    assert run("register", sid, "--provider", "Kimi", "--working-on",
               "fix the token_refresh path in src/auth.py, v2.1 (see notes)").returncode == 0
    assert run("lock", "acquire", "src/my_module.py", "src/a-b/c.d.py",
               "--session", sid).returncode == 0
    # a write of the main branch renders the page with the shards' locks (render_on_main)
    assert run("update", sid, "--todo-present", "read the page").returncode == 0
    raw = registry_md(repo)
    for literal in (f"| {sid} |", "fix the token_refresh path in src/auth.py, v2.1 (see notes)",
                    "| src/my_module.py |", "| src/a-b/c.d.py |"):
        assert literal in raw
    page = render(raw)
    assert by_first_cell(page.table("Session"))[sid][3] == \
        "fix the token_refresh path in src/auth.py, v2.1 (see notes)"
    assert sorted(by_first_cell(page.table("Path"))) == ["src/a-b/c.d.py", "src/my_module.py"]


def test_the_front_matter_carries_no_markup_from_agent_text(run, repo):
    """A renderer that does not know front matter (cmark-gfm, a forge's fallback) reads
    its lines as Markdown: the last operation's subject is agent text there."""
    hostile = "<img src=x onerror=alert(1)> & <script>alert(2)</script>"
    assert run("register", "k-1", "--provider", "Kimi", "--working-on", hostile).returncode == 0
    markdown = registry_md(repo)
    html = subprocess.run([CMARK, "--unsafe", "-e", "table", "-e", "autolink"], input=markdown,
                          text=True, capture_output=True, check=True).stdout
    assert not {tag for tag, _ in Page(html).elements} & {"img", "script"}, html
    assert hostile in frontmatter(markdown)["last_operation"]  # still the whole text as YAML


def test_the_main_branch_page_lists_every_lock_of_every_shard(repo, clock):
    """The page a person browsing the registry branch on a forge reads (issue 32): in the
    layout `init` makes, registry.md of the main branch lists every held lock of every
    lock shard (holder, what it works on, since when, its state as the library judges
    it), as of its last render; a claim (a write on a shard) leaves a page younger than a
    minute as it is, and renders one that is a minute old or older again.  The fence for
    older tools is no session there."""
    from agent_registry import Registry
    from agent_registry.branch import shards as S
    with Registry.open(str(repo), clock=clock) as registry:
        registry.init()
        assert registry.repo.read_blob(f"{registry.tip()}:{S.LAYOUT}") is not None
        reg(registry, "gone", pid=None, working_on="old work")
        registry.claim("gone", ["src/gone/x.py"])
        clock.advance(2000)  # gone is stale from now on
        reg(registry, "kimi-1", pid=None, working_on="auth refactor")
        reg(registry, "codex-2", pid=None, working_on="api | v2")
        page_before = registry_md(repo)
        registry.claim("kimi-1", ["src/auth/token.py", "docs/guide/"])
        registry.claim("codex-2", ["lib/"])  # broad: recorded in every shard
        registry.claim("codex-2", ["tests/unit/"], shared=True)
        registry.claim("kimi-1", ["tests/unit/"], shared=True)
        targets = ["src/gone/x.py", "src/auth/token.py", "docs/guide/", "tests/unit/"]
        assert len({S.lock_shards(t, 16) for t in targets}) >= 3  # on several shards
        # the page is younger than a minute: the claims on the shards left it as it was
        assert registry_md(repo) == page_before
        listed = by_first_cell(render(page_before).table("Path"))
        assert list(listed) == ["src/gone/x.py"]

        clock.advance(61)
        registry.claim("kimi-1", ["src/auth/session.py"])  # a minute later: rendered again
        markdown = registry_md(repo)
        assert markdown != page_before
        assert frontmatter(markdown)["generated_at"] == iso(clock())
        judged = {(l["path"], l["owner"]): STALE if l["stale_reason"] else "held"
                  for l in registry.locks()}
        sessions = {s.id: s for s in registry.sessions()}
    page = render(markdown)
    rows = page.table("Path")
    assert rows[0] == ["Path", "Session", "Working on", "Held since", "State"]
    shown = {(row[0], row[1]): row for row in rows[1:]}
    assert {key: row[4] for key, row in shown.items()} == judged
    assert judged == {("src/gone/x.py", "gone"): STALE, ("src/auth/token.py", "kimi-1"): "held",
                      ("docs/guide/", "kimi-1"): "held", ("lib/", "codex-2"): "held",
                      ("tests/unit/", "codex-2"): "held", ("tests/unit/", "kimi-1"): "held",
                      ("src/auth/session.py", "kimi-1"): "held"}
    for (path, sid), row in shown.items():
        assert row[2] == sessions[sid].working_on, row  # what the holder works on
    assert shown[("src/gone/x.py", "gone")][3] == "34m ago"  # held since its claim
    assert shown[("src/auth/session.py", "kimi-1")][3] == "0s ago"
    assert shown[("lib/", "codex-2")][3] == "1m ago"
    front = frontmatter(markdown)
    assert (front["lock_shards"], front["held_locks"], front["live_sessions"]) == (16, 7, 3)
    listed_sessions = by_first_cell(page.table("Session"))
    assert sorted(listed_sessions) == ["codex-2", "gone", "kimi-1"]  # no fence
    assert S.FENCE_SESSION not in markdown
    assert "**" not in {row[0] for row in rows[1:]}


def test_every_pages_front_matter_carries_no_markup_from_agent_text(run, repo):
    """The same for every page the registry renders (issue 34): the main branch's, each
    lock shard's and each clone ref's registry.md.  A planted markdown image, link and
    autolinks (in what a session works on, and in a path it claims, which a shard's
    last operation names) render as text under cmark-gfm, front matter and all."""
    image = "![img](https://e.com/i.png) [l](http://x.io) www.e.com https://e.com/x a@b.co"
    assert run("register", "k-1", "--provider", "Kimi", "--working-on", image).returncode == 0
    claimed = run("lock", "acquire", "--session", "k-1", ":(literal)src/x/![a](http:/e.com/i.png)")
    assert claimed.returncode == 0, claimed.stderr
    assert run("lock", "heartbeat", "--session", "k-1").returncode == 0  # the clone ref's page
    refs = [ref for ref in git(repo, "for-each-ref", "--format=%(refname)",
                               "refs/heads/").split() if ref.startswith(f"refs/heads/{BRANCH}")]
    pages = {ref: git(repo, "show", f"{ref}:registry.md") for ref in refs}
    assert {ref.split("/")[2] for ref in refs} >= {BRANCH, f"{BRANCH}-shards", f"{BRANCH}-clones"}
    operations = set()
    for ref, markdown in pages.items():
        if not markdown.startswith("---\n"):
            continue  # the messages branch's page has no front matter
        html = subprocess.run([CMARK, "--unsafe", "-e", "table", "-e", "autolink"],
                              input=markdown, text=True, capture_output=True, check=True).stdout
        elements = Page(html).elements
        assert not {tag for tag, _ in elements} & {"img", "script"}, (ref, html)
        assert [a for tag, a in elements if tag == "a"] == [{"href": "README.md"}], (ref, html)
        operations.add(frontmatter(markdown)["last_operation"])  # still the text, as YAML
    assert f"register k-1 (Kimi): {image}" in operations
    assert "claim :(literal)src/x/![a](http:/e.com/i.png) by k-1" in operations
