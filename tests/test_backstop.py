"""The backstop behind the shell gate (issue 33, item 1; issue 34, item 6): around a shell
or edit tool call the real `agent-registry harness hook <h> pre-tool-use` notes the files
another live session holds, the command really runs in a real repository, and
`post-tool-use` puts back what it changed and tells both sides; the gate refuses the forms
the parser now reads, fails closed on what it cannot follow, and refuses hostile input."""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from helpers import CLI, git
from test_guard import agents, hold, open_registry  # noqa: F401  (fixture)
from test_harness_hooks import NATIVE, base, hook, shell, verdict

# harnesses with before- and after-tool events (OpenCode's through its plugin)
BACKSTOP = ("claude", "codex", "gemini", "opencode")
HOLDERS_WORK = "auth = 2  # kimi-1's uncommitted work\n"
# a command the gate cannot see into (an interpreter), which writes nothing: the
# backstop notes the held files around it (a command of programs that write no file,
# such as ls or true, is not noted)
UNSEEN = "python3 -c pass"
POST = {"claude": "PostToolUse", "codex": "PostToolUse", "gemini": "AfterTool",
        "opencode": None}  # OpenCode's plugin names no event


@pytest.fixture
def held(repo, run, agents):
    """*repo* where kimi-1, a live session working in it, holds src/auth.py (with
    uncommitted work in it) and src/gen/ (a folder), and the agent's own session is
    registered by its harness's session-start hook."""
    hold(repo, "kimi-1", ["src/auth.py", "src/gen/"], agents(), working_on="auth refactor")
    (repo / "src" / "auth.py").write_text(HOLDERS_WORK)
    for harness in BACKSTOP:
        started = hook(repo, harness, "session-start",
                       {**base(harness, repo, "SessionStart"), "source": "startup"})
        assert started.returncode == 0, started.stderr
    return repo


def call(harness: str, repo: Path, command: str, call_id: str = "call-1") -> dict:
    """The harness's shell tool event for *command* (Gemini has no call id: the tool
    and its input name the call; OpenCode's plugin sends its callID)."""
    event = shell(harness, repo, command)
    if harness == "opencode":
        event["callID"] = call_id
    elif harness != "gemini":
        event["tool_use_id"] = call_id
    return event


def around(harness: str, repo: Path, command: str, *, event: str | None = None,
           cwd: Path | None = None) -> str | None:
    """Run *command* as the harness's shell tool does: the gate, the command itself in
    a real shell, the after-tool hook; what the after-tool answer tells the agent."""
    before = call(harness, repo, command)
    if cwd is not None:
        before["cwd"] = str(cwd)
    gate = hook(repo, harness, "pre-tool-use", before, cwd=cwd)
    assert verdict(harness, gate) is None
    if harness == "opencode":  # the plugin runs the after-tool hook when the gate says so
        assert json.loads(gate.stdout) == {"deny": False, "after": True}
    subprocess.run(["bash", "-c", command], cwd=cwd or repo, capture_output=True)
    after = {**before, "hook_event_name": event or POST[harness],
             "tool_response": {"stdout": "", "exit_code": 0}} if POST[harness] else before
    proc = hook(repo, harness, "post-tool-use", after, cwd=cwd)
    assert proc.returncode == 0, proc.stderr
    return told(harness, proc)


def told(harness: str, proc: subprocess.CompletedProcess) -> str | None:
    """What an after-tool answer hands the model, read in the harness's own format."""
    if not proc.stdout.strip():
        return None
    answer = json.loads(proc.stdout)
    if harness == "opencode":  # the plugin appends it to the tool's output
        return answer.get("context")
    if harness == "gemini":
        out = answer["hookSpecificOutput"]
        assert out["hookEventName"] == "AfterTool"
        return out["additionalContext"]
    if "decision" in answer:
        assert answer["decision"] == "block"
        return answer["reason"]
    return answer["hookSpecificOutput"]["additionalContext"]


def inbox(repo: Path, sid: str) -> list[dict]:
    proc = subprocess.run([CLI, "--json", "inbox", sid], cwd=repo, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)["messages"]


def noted_blobs(repo: Path) -> dict[str, str | None]:
    """{path: its blob} of the one note waiting in *repo*, read as the after-tool hook
    reads it (harness/after.py)."""
    from agent_registry.harness.after import noted_blobs, noted_paths, read_note
    [note] = (repo / ".git" / "agent-registry" / "backstop").iterdir()
    _, lines = read_note(note.read_bytes())
    paths, _ = noted_paths(lines[1], lines[3])
    return dict(zip(paths, noted_blobs(lines[2], len(paths))[0]))


def blob(repo: Path, text: str, name: str) -> str:
    """The blob id an answer names for *name* (``git show BLOB``), read back."""
    line = next(line for line in text.splitlines() if name in line)
    oid = line.split("git show ")[1].split(".")[0].split(")")[0].split()[0]
    return git(repo, "show", oid)


# -- what the parser cannot read: put back, the agent told, the holder told -----------

UNREADABLE_WRITES = [
    "python3 -c \"open('src/auth.py', 'a').write('mine\\n')\"",
    "printf 'echo mine > src/auth.py\\n' > /tmp/agent-script.sh; sh /tmp/agent-script.sh",
    "python3 -c \"import os; os.remove('src/auth.py'); open('src/auth.py', 'w').write('mine')\"",
]


@pytest.mark.parametrize("harness", BACKSTOP)
@pytest.mark.parametrize("command", UNREADABLE_WRITES)
def test_a_held_file_changed_by_any_command_is_put_back_and_both_are_told(held, harness,
                                                                           command):
    text = around(harness, held, command)
    assert (held / "src" / "auth.py").read_text() == HOLDERS_WORK  # the holder's work is back
    assert text and "src/auth.py" in text and "kimi-1" in text and "auth refactor" in text
    assert f"agent-registry send --to kimi-1 --from {harness}-{NATIVE} 'TEXT'" in text
    assert "mine" in blob(held, text, "your version is kept")  # the agent's version, kept
    [message] = [m for m in inbox(held, "kimi-1") if m.get("subject") == "backstop"]
    assert f"{harness}-{NATIVE}" in message["body"] and "src/auth.py" in message["body"]
    assert not list((held / ".git" / "agent-registry" / "backstop").iterdir())  # note taken


SAME_SIZE_SAME_TIMES = (  # rewrites src/auth.py in place, same size, its times set back
    "python3 -c \"import os; st = os.stat('src/auth.py'); f = open('src/auth.py', 'r+'); "
    "f.write('mine'); f.close(); os.utime('src/auth.py', ns=(st.st_atime_ns, st.st_mtime_ns))\"")


@pytest.mark.parametrize("old", [True, False], ids=["written-long-ago", "written-this-second"])
def test_a_same_size_rewrite_that_keeps_the_times_is_caught(held, old):
    """The check trusts a held file's stat as git's index does (after.as_noted): a
    rewrite of the same size whose mtime is set back still changes its ctime, and one in
    the second the note was taken is read whatever its stat says."""
    auth = held / "src" / "auth.py"
    if old:
        os.utime(auth, (1_600_000_000, 1_600_000_000))
    text = around("claude", held, SAME_SIZE_SAME_TIMES)
    assert auth.read_text() == HOLDERS_WORK
    assert text and "src/auth.py" in text and "kimi-1" in text


@pytest.mark.parametrize("form", ["keys", "line"])
def test_a_file_changed_in_the_second_of_its_note_is_read_not_trusted(tmp_path, form):
    """git's racy-timestamp rule: a rewrite within one tick of the clock keeps size,
    mtime, inode and ctime, so a stat that matches is trusted only for a file last
    changed before the second the note was taken (after.untrusted); one not trusted is
    read and hashed (after.as_noted).  The same for the stats as a note's line holds
    them (after.stats_line, read back by after.noted_paths), with every file there (the
    check of them all at once) or one gone."""
    import time

    from agent_registry.harness.after import (as_noted, blob_id, noted_paths, state_of,
                                              stats_line, untrusted)
    from agent_registry.store.jsontext import dumps
    Path(tmp_path / "f.py").write_text("x = 1\n")
    top, paths = str(tmp_path), ["f.py", "gone.py"]
    noted = [state_of(str(tmp_path / name))[2] for name in paths]
    assert noted[1] is None  # nothing there: never trusted by its stat

    def read_back(keys: list) -> object:
        if form == "keys":
            return keys
        return noted_paths(dumps(paths[:len(keys)]).encode(), stats_line(keys))[1]
    assert untrusted(top, paths[:1], read_back(noted[:1]), time.time()) == [0]
    assert untrusted(top, paths[:1], read_back(noted[:1]), time.time() + 2) == []
    noted = read_back(noted)
    # the note's blob is other content with this very stat: what a same-tick rewrite leaves
    assert untrusted(top, paths, noted, time.time()) == [0, 1]  # same second: read
    assert not as_noted(str(tmp_path / "f.py"), blob_id(b"x = 2\n", "sha1"), "100644", "sha1")
    assert untrusted(top, paths, noted, time.time() + 2) == [1]  # later: the stat is trusted
    assert as_noted(str(tmp_path / "f.py"), blob_id(b"x = 1\n", "sha1"), "100644", "sha1")


def test_a_note_keeps_the_blob_of_a_held_file_whose_stat_is_unchanged(held):
    """A note reuses the last note's blob for a held file whose stat is the one that note
    found (after.same_stat, git's racy rule), reading and hashing no file: the pre hook
    at 1,000 held files does not hash them all at every call.  Seen from outside: the
    second note names the same blob and imports no git module, which a hash and its blob
    write would need."""
    import sys
    import time

    from test_import_budget import LAUNCHER
    time.sleep(1.1)  # past the second src/auth.py was written in: its stat is trusted
    assert around("claude", held, UNSEEN) is None  # the first note reads and hashes it
    event = json.dumps(call("claude", held, UNSEEN, "call-2"))
    proc = subprocess.run([sys.executable, "-X", "importtime", "-c", LAUNCHER, "harness",
                           "hook", "claude", "pre-tool-use"], cwd=held, input=event,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and verdict("claude", proc) is None, proc.stderr[-2000:]
    names = {line.split("|")[2].strip() for line in proc.stderr.splitlines()
             if line.startswith("import time:") and "|" in line}
    assert "agent_registry.harness.backstop" in names  # a note was taken
    assert "agent_registry.store.git" not in names
    assert noted_blobs(held) == {"src/auth.py": git(held, "hash-object", "src/auth.py").strip()}


def test_a_note_of_held_files_imports_no_path_rules_nor_git_module(repo, run, agents):
    """Issue 35's hook target with files held: what each held target names is kept with
    it (harness/heldcache.py), and an unchanged file keeps its blob, so the note of held
    files (no folder or glob) needs neither the path rules (branch/paths.py) nor the git
    module: a shell call's pre hook at 10 held stays near the gate's cost."""
    import time
    assert run("init").returncode == 0
    hold(repo, "kimi-1", ["src/auth.py", "src/mine.py"], agents())
    started = hook(repo, "claude", "session-start",
                   {**base("claude", repo, "SessionStart"), "source": "startup"})
    assert started.returncode == 0, started.stderr
    time.sleep(1.1)  # past the files' second: their stat is trusted
    assert around("claude", repo, UNSEEN) is None  # what is held read, the files hashed
    names = imports_of_pre_hook(repo, "claude", UNSEEN)
    assert "agent_registry.harness.backstop" in names
    heavy = sorted(names & {"agent_registry.store.git", "agent_registry.branch.paths",
                            "agent_registry.harness.held"})
    assert heavy == [], f"the note of held files imported {heavy}"
    assert set(noted_blobs(repo)) == {"src/auth.py", "src/mine.py"}


def test_a_held_file_rewritten_between_calls_is_noted_anew_not_put_back(held):
    """The holder's own rewrite between two tool calls of the agent (same size, its
    times set back: only ctime moves) is read by the next note, not taken for the last
    note's blob: the agent's next command, which writes nothing, leaves it as it is."""
    import time
    auth = held / "src" / "auth.py"
    time.sleep(1.1)
    assert around("claude", held, UNSEEN) is None
    subprocess.run(["bash", "-c", SAME_SIZE_SAME_TIMES], cwd=held, check=True)
    assert around("claude", held, UNSEEN) is None
    assert auth.read_text().startswith("mine")


def test_a_held_name_its_holder_creates_between_calls_is_noted_not_moved_aside(
        repo, run, agents):
    """A held file not created yet is noted as absent, and a note whose files all are as
    the last one found them copies its lines (backstop._States): one the holder creates
    between two calls is not "as found" (absent then), so the next note reads it and the
    agent's command, which writes nothing, leaves the holder's new file where it is."""
    import time
    assert run("init").returncode == 0
    hold(repo, "kimi-1", ["src/auth.py", "src/new.py"], agents())
    started = hook(repo, "claude", "session-start",
                   {**base("claude", repo, "SessionStart"), "source": "startup"})
    assert started.returncode == 0, started.stderr
    time.sleep(1.1)  # past src/auth.py's second: its stat is trusted
    assert around("claude", repo, UNSEEN) is None  # src/new.py noted as absent
    assert around("claude", repo, UNSEEN) is None  # the last note's lines, copied
    (repo / "src" / "new.py").write_text("the holder's new file\n")
    assert around("claude", repo, UNSEEN) is None
    assert (repo / "src" / "new.py").read_text() == "the holder's new file\n"


def test_a_note_of_unchanged_files_is_the_last_one_linked_and_told_by_its_own_age(held):
    """When every held file is as the last note found it, the note is the remembered
    states' file under the call's name (a hard link: nothing written), its time set to
    now: of two calls noted together from states remembered long ago, the first one's
    after-tool hook does not take the second's note for a leftover (one older than
    after.LEFTOVER, checked and removed), so the second call's change is put back and
    told by its own answer."""
    import time
    time.sleep(1.1)  # past src/auth.py's second: its stat is trusted
    assert around("claude", held, UNSEEN) is None  # the states remembered
    kept = held / ".git" / "agent-registry" / "backstop-cache" / f"states-claude-{NATIVE}"
    long_ago = time.time() - 7200
    os.utime(kept, (long_ago, long_ago))
    command = "python3 -c \"open('src/auth.py', 'a').write('mine')\""
    first, second = call("claude", held, UNSEEN, "call-1"), call("claude", held, command,
                                                                 "call-2")
    for event in (first, second):
        assert verdict("claude", hook(held, "claude", "pre-tool-use", event)) is None
    note = held / ".git" / "agent-registry" / "backstop" / f"claude-{NATIVE}-call-2.note"
    assert os.stat(note).st_ino == os.stat(kept).st_ino  # linked, not written
    done = hook(held, "claude", "post-tool-use", {**first, "hook_event_name": "PostToolUse"})
    assert done.returncode == 0 and told("claude", done) is None, done.stderr
    subprocess.run(["bash", "-c", command], cwd=held, check=True)
    proc = hook(held, "claude", "post-tool-use", {**second, "hook_event_name": "PostToolUse"})
    assert "kimi-1" in (told("claude", proc) or "")
    assert (held / "src" / "auth.py").read_text() == HOLDERS_WORK


def test_a_call_noted_again_while_its_note_is_there_leaves_one_note(held):
    """A call taken again while its earlier note is still there (Gemini's call is named
    by the tool and its input; one whose after-tool hook never ran): the note is the
    remembered states linked again under that name, and nothing else is left in the
    notes' folder (a link renamed over the same file is kept by the kernel, not moved)."""
    import time
    time.sleep(1.1)  # past src/auth.py's second: its stat is trusted
    assert around("gemini", held, UNSEEN) is None  # the states remembered
    folder = held / ".git" / "agent-registry" / "backstop"
    for _ in range(2):
        gate = hook(held, "gemini", "pre-tool-use", call("gemini", held, UNSEEN))
        assert verdict("gemini", gate) is None
    assert len(os.listdir(folder)) == 1, os.listdir(folder)


def test_a_note_keeps_what_it_said_when_the_next_note_remembers_anew(held):
    """The remembered states are replaced whole when a held file changed (a new file
    renamed over them): a note linked to them earlier, of a call still running beside
    the next one, still names the blob it was taken with."""
    import time
    time.sleep(1.1)
    assert around("claude", held, UNSEEN) is None
    first = call("claude", held, UNSEEN, "call-1")
    assert verdict("claude", hook(held, "claude", "pre-tool-use", first)) is None
    before = noted_blobs(held)["src/auth.py"]
    note = held / ".git" / "agent-registry" / "backstop" / f"claude-{NATIVE}-call-1.note"
    (held / "src" / "auth.py").write_text(HOLDERS_WORK + "# more of the holder's work\n")
    second = call("claude", held, UNSEEN, "call-2")
    assert verdict("claude", hook(held, "claude", "pre-tool-use", second)) is None
    from agent_registry.harness.after import noted_blobs as blobs_of, noted_paths, read_note
    _, lines = read_note(note.read_bytes())
    paths, _ = noted_paths(lines[1], lines[3])
    assert dict(zip(paths, blobs_of(lines[2], len(paths))[0]))["src/auth.py"] == before


@pytest.mark.parametrize("stamped", [False, True])
def test_a_blob_pruned_since_the_last_note_is_written_again_by_the_next(held, stamped):
    """A blob the last note wrote and a ``git gc`` pruned since is not reused: the next
    note writes it again, so the restore still has the holder's bytes.  With forty more
    blobs (more than RESTAMP) a note keeps the stamps of their object folders instead of
    looking each up (harness/storedblobs.py); the prune unlinks the blob, which
    changes its folder, so the next note looks that blob up all the same."""
    import time
    for i in range(40 if stamped else 0):  # in the held folder
        (held / "src" / "gen").mkdir(exist_ok=True)
        (held / "src" / "gen" / f"m{i}.py").write_text(f"module = {i}  # kimi-1's work\n")
    time.sleep(1.1)
    assert around("claude", held, UNSEEN) is None  # writes the blobs: folders too new
    if stamped:
        time.sleep(2.5)  # the folders settled two seconds before the next note
        assert around("claude", held, UNSEEN) is None  # looks each up, stamps the folders
    oid = git(held, "hash-object", "src/auth.py").strip()
    os.remove(held / ".git" / "objects" / oid[:2] / oid[2:])
    text = around("claude", held, UNREADABLE_WRITES[0])
    assert (held / "src" / "auth.py").read_text() == HOLDERS_WORK
    assert text and "src/auth.py" in text and "could not" not in text


def test_a_held_file_whose_blob_is_gone_is_named_and_the_others_are_put_back(held):
    """When the blob a note names for one held file is gone by the after-tool check (a
    prune while the command ran), that file cannot be put back: it is named with the
    missing object and the repair, and every other held file the call changed is still
    put back, the agent and the holder told of both."""
    (held / "src" / "gen").mkdir(exist_ok=True)
    (held / "src" / "gen" / "m.py").write_text("module = 1  # kimi-1's work\n")
    oid = git(held, "hash-object", "src/auth.py").strip()
    gone = held / ".git" / "objects" / oid[:2] / oid[2:]
    text = around("claude", held, f"python3 -c \"import os; os.remove('{gone}'); "
                                  "open('src/auth.py', 'w').write('mine'); "
                                  "open('src/gen/m.py', 'w').write('mine')\"")
    assert (held / "src" / "gen" / "m.py").read_text() == "module = 1  # kimi-1's work\n"
    assert (held / "src" / "auth.py").read_text() == "mine"
    auth = next(line for line in text.splitlines() if "src/auth.py" in line)
    assert "could not be put back" in auth and oid in auth and "git fsck" in auth
    gen = next(line for line in text.splitlines() if "src/gen/m.py" in line)
    assert "put back as its holder had it" in gen
    [message] = [m for m in inbox(held, "kimi-1") if m.get("subject") == "backstop"]
    assert "src/auth.py" in message["body"] and "src/gen/m.py" in message["body"]


def test_a_held_file_that_cannot_be_written_back_leaves_the_others_put_back(held):
    """A held folder replaced by a file: the held file in it cannot be written back,
    which is said, and the other held file the call changed is still put back."""
    (held / "src" / "gen").mkdir(exist_ok=True)
    (held / "src" / "gen" / "m.py").write_text("module = 1  # kimi-1's work\n")
    text = around("claude", held, "python3 -c \"import shutil; shutil.rmtree('src/gen'); "
                                  "open('src/gen', 'w').write('x'); "
                                  "open('src/auth.py', 'w').write('mine')\"")
    assert (held / "src" / "auth.py").read_text() == HOLDERS_WORK
    gen = next(line for line in text.splitlines() if "src/gen/m.py" in line)
    assert "could not be put back (writing it failed" in gen
    assert "put back as its holder had it" in next(
        line for line in text.splitlines() if "src/auth.py" in line)


@pytest.mark.parametrize("harness", BACKSTOP)
def test_a_command_of_programs_that_write_no_file_is_not_noted(held, harness):
    """``ls``, ``git status``, ``grep … | head``: nothing they run can write a file, so no
    note is taken (a pre-tool hook at 1,000 held files reads none of them), no check
    runs after, and OpenCode's plugin is not asked to run one.  A change made while
    such a command runs (here the holder's own edit) is the holder's, as between calls,
    and is left as it is."""
    notes = held / ".git" / "agent-registry" / "backstop"
    for command in ("ls -la src", "git status --short", "grep -rn auth src | head -3",
                    "cd src && cat auth.py > /dev/null"):
        event = call(harness, held, command)
        gate = hook(held, harness, "pre-tool-use", event)
        assert verdict(harness, gate) is None, command
        if harness == "opencode":
            assert json.loads(gate.stdout) == {"deny": False}, command
        assert not notes.exists() or not list(notes.iterdir()), command
    (held / "src" / "auth.py").write_text(HOLDERS_WORK + "# the holder's next line\n")
    if harness != "opencode":
        after = {**event, "hook_event_name": POST[harness],
                 "tool_response": {"stdout": "", "exit_code": 0}}
        proc = hook(held, harness, "post-tool-use", after)
        assert proc.returncode == 0 and told(harness, proc) is None, proc.stderr
    assert (held / "src" / "auth.py").read_text().endswith("# the holder's next line\n")
    assert around(harness, held, UNSEEN) is None  # an interpreter: noted, checked
    if harness == "claude":  # nothing of the backstop is imported for it
        assert "agent_registry.harness.backstop" not in imports_of_pre_hook(
            held, "claude", "ls -la src")


@pytest.mark.parametrize("link", ["outside", "loop"])
def test_a_held_folder_replaced_by_a_link_is_not_written_through(held, tmp_path, link):
    """A held folder the command replaced by a symbolic link (out of the tree, or to
    itself): nothing is written through it, which is said, and the other held file the
    call changed is still put back."""
    (held / "src" / "gen").mkdir(exist_ok=True)
    (held / "src" / "gen" / "m.py").write_text("module = 1  # kimi-1's work\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    target = str(outside) if link == "outside" else "gen"
    text = around("claude", held, "python3 -c \"import os, shutil; shutil.rmtree('src/gen'); "
                                  f"os.symlink('{target}', 'src/gen'); "
                                  "open('src/auth.py', 'w').write('mine')\"")
    assert (held / "src" / "auth.py").read_text() == HOLDERS_WORK
    assert not list(outside.iterdir())  # nothing written out of the tree
    gen = next(line for line in text.splitlines() if "src/gen/m.py" in line)
    assert "could not be put back" in gen


def test_a_fifo_in_a_held_folder_is_not_read(held):
    """What git stores nothing of (a FIFO, whose reading waits for a writer) is noted as
    no file: the hooks answer, and a held file beside it is still put back."""
    (held / "src" / "gen").mkdir(exist_ok=True)
    os.mkfifo(held / "src" / "gen" / "pipe")
    assert around("claude", held, UNSEEN) is None
    around("claude", held, UNREADABLE_WRITES[0])
    assert (held / "src" / "auth.py").read_text() == HOLDERS_WORK


@pytest.mark.parametrize("harness", BACKSTOP)
def test_a_held_file_deleted_is_restored_and_one_created_is_moved_aside(held, harness):
    text = around(harness, held, "python3 -c \"import os; os.remove('src/auth.py')\"")
    assert (held / "src" / "auth.py").read_text() == HOLDERS_WORK
    assert "deleted src/auth.py" in text
    text = around(harness, held, "python3 -c \"import os; os.makedirs('src/gen'); "
                                 "open('src/gen/new.py', 'w').write('made')\"")
    assert not (held / "src" / "gen" / "new.py").exists()
    assert "created src/gen/new.py" in text and "moved aside" in text
    assert blob(held, text, "your version is kept") == "made"


def test_a_held_file_replaced_by_a_link_is_put_back_as_a_file(held):
    text = around("claude", held, "python3 -c \"import os; os.remove('src/auth.py'); "
                                   "os.symlink('/etc/hostname', 'src/auth.py')\"")
    auth = held / "src" / "auth.py"
    assert not auth.is_symlink() and auth.read_text() == HOLDERS_WORK
    assert blob(held, text, "your version is kept") == "/etc/hostname"  # the link's target


def test_an_edit_tool_that_reaches_a_held_file_past_the_gate_is_put_back(held):
    """The gate judges names; a hard link made earlier is another name of the held file.
    The same after-check runs after the edit tool and undoes what reached the file."""
    os.link(held / "src" / "auth.py", held / "alias.py")
    event = {**base("claude", held, "PreToolUse"), "tool_name": "Write", "tool_use_id": "w1",
             "tool_input": {"file_path": str(held / "alias.py"), "content": "mine\n"}}
    assert verdict("claude", hook(held, "claude", "pre-tool-use", event)) is None
    with open(held / "alias.py", "w") as f:  # what Write does: the same inode, new bytes
        f.write("mine\n")
    proc = hook(held, "claude", "post-tool-use", {**event, "hook_event_name": "PostToolUse"})
    text = told("claude", proc)
    assert "src/auth.py" in text and "kimi-1" in text
    assert (held / "src" / "auth.py").read_text() == HOLDERS_WORK


def test_a_command_that_leaves_the_repository_is_checked_where_it_started(held, tmp_path):
    """Claude Code's cwd follows a `cd`: the after-tool event may come from elsewhere; the
    note is in the project's repository, where the command started."""
    command = f"cd {tmp_path} && python3 -c \"open('{held}/src/auth.py', 'a').write('x')\""
    before = call("claude", held, command)
    assert verdict("claude", hook(held, "claude", "pre-tool-use", before)) is None
    subprocess.run(["bash", "-c", command], cwd=held, capture_output=True)
    after = {**before, "hook_event_name": "PostToolUse", "cwd": str(tmp_path)}
    proc = hook(held, "claude", "post-tool-use", after, cwd=tmp_path,
                env={"CLAUDE_PROJECT_DIR": str(held)})
    assert "kimi-1" in told("claude", proc)
    assert (held / "src" / "auth.py").read_text() == HOLDERS_WORK


# -- calls that overlap, and calls whose after-tool event never comes ----------------

WRITES_AUTH = "python3 -c \"open('src/auth.py', 'w').write('the agent was here\\n')\""


def pre(repo: Path, command: str, call_id: str) -> dict:
    event = call("claude", repo, command, call_id)
    assert verdict("claude", hook(repo, "claude", "pre-tool-use", event)) is None
    return event


def post(repo: Path, event: dict) -> str | None:
    proc = hook(repo, "claude", "post-tool-use", {**event, "hook_event_name": "PostToolUse"})
    assert proc.returncode == 0, proc.stderr
    return told("claude", proc)


def aged(repo: Path, call_id: str, seconds: float) -> None:
    """The note of *call_id* as if taken *seconds* ago (its age is its file's time)."""
    import time
    note = repo / ".git" / "agent-registry" / "backstop" / f"claude-{NATIVE}-{call_id}.note"
    os.utime(note, (time.time() - seconds,) * 2)


def test_a_call_noted_while_another_had_written_puts_back_the_holders_version(held):
    """Two tool calls at once (parallel calls, a subagent): the second is noted while the
    first's command has written a held file.  The first's check puts the holder's version
    back; the second's then finds the file as that check left it, not as its own note
    says: it is neither told it changed the file nor puts the first command's bytes back."""
    first = pre(held, WRITES_AUTH, "call-1")
    subprocess.run(["bash", "-c", WRITES_AUTH], cwd=held, check=True)
    second = pre(held, UNSEEN, "call-2")
    assert "kimi-1" in post(held, first)
    assert post(held, second) is None
    assert (held / "src" / "auth.py").read_text() == HOLDERS_WORK


def test_a_call_noted_while_another_had_written_that_writes_too_gets_the_holders_back(held):
    first = pre(held, WRITES_AUTH, "call-1")
    subprocess.run(["bash", "-c", WRITES_AUTH], cwd=held, check=True)
    second = pre(held, UNSEEN, "call-2")
    assert "kimi-1" in post(held, first)
    (held / "src" / "auth.py").write_text("the second call's bytes\n")
    assert "kimi-1" in post(held, second)
    assert (held / "src" / "auth.py").read_text() == HOLDERS_WORK


def test_a_call_that_never_ended_is_told_not_put_back_over_the_holders_later_work(held):
    """A call denied at the harness's prompt (or interrupted) gets no after-tool event.
    Its note, once after.LEFTOVER old, is told to the agent by its session's next call,
    and nothing is put back: the holder's work since stays."""
    pre(held, UNSEEN, "call-a")
    later = "auth = 3  # ten more minutes of kimi-1's work\n"
    (held / "src" / "auth.py").write_text(later)
    aged(held, "call-a", 700)
    text = post(held, pre(held, UNSEEN, "call-b"))
    assert "src/auth.py" in text and "kimi-1" in text and "nothing was put back" in text
    assert (held / "src" / "auth.py").read_text() == later
    assert blob(held, text, "git show") == HOLDERS_WORK
    assert post(held, pre(held, UNSEEN, "call-c")) is None  # told once


def test_a_call_that_never_ended_says_nothing_of_a_file_no_longer_held(held, run):
    pre(held, UNSEEN, "call-a")
    run("lock", "release", "src/auth.py", "--session", "kimi-1")
    (held / "src" / "auth.py").write_text("free to write now\n")
    aged(held, "call-a", 700)
    assert post(held, pre(held, UNSEEN, "call-b")) is None
    assert (held / "src" / "auth.py").read_text() == "free to write now\n"


def test_a_damaged_note_of_a_call_that_never_ended_is_said(held):
    pre(held, UNSEEN, "call-a")
    note = held / ".git" / "agent-registry" / "backstop" / f"claude-{NATIVE}-call-a.note"
    note.write_bytes(b"damaged")
    aged(held, "call-a", 700)
    assert "could not be read" in post(held, pre(held, UNSEEN, "call-b"))


def test_a_long_call_told_as_a_leftover_is_still_checked_when_it_ends(held):
    """A command that runs past after.LEFTOVER: another call's check tells its note (it
    cannot know the call still runs) and keeps it; the call's own after-tool event then
    checks it in full."""
    long = pre(held, WRITES_AUTH, "call-long")
    aged(held, "call-long", 700)
    assert post(held, pre(held, UNSEEN, "call-short")) is None  # nothing changed yet
    subprocess.run(["bash", "-c", WRITES_AUTH], cwd=held, check=True)
    assert "kimi-1" in post(held, long)
    assert (held / "src" / "auth.py").read_text() == HOLDERS_WORK
    assert not list((held / ".git" / "agent-registry" / "backstop").glob("*.note*"))


def test_a_file_put_back_keeps_its_permission_bits(held):
    auth = held / "src" / "auth.py"
    auth.chmod(0o600)
    assert "kimi-1" in around("claude", held, WRITES_AUTH)
    assert auth.read_text() == HOLDERS_WORK and auth.stat().st_mode & 0o777 == 0o600


def test_a_held_file_too_large_to_keep_is_noted_by_its_stat_and_a_change_told(held):
    """A held file over after.MAX_KEPT bytes is never read (a 64 GB one would end the
    hook in a MemoryError, and a refusal of every command): a call that leaves it alone
    says nothing, one that changes it is told it could not be put back, and the other
    held files are still put back."""
    from agent_registry.harness.after import MAX_KEPT
    (held / "src" / "gen").mkdir(exist_ok=True)
    big = held / "src" / "gen" / "big.bin"
    with open(big, "wb") as f:
        f.truncate(MAX_KEPT + 1)  # sparse: no disk, nor memory if read
    assert around("claude", held, UNSEEN) is None
    text = around("claude", held, "python3 -c \"open('src/gen/big.bin', 'ab').write(b'x'); "
                                   "open('src/auth.py', 'a').write('x')\"")
    assert "src/gen/big.bin" in text and "over 64 MiB" in text
    assert (held / "src" / "auth.py").read_text() == HOLDERS_WORK
    assert big.stat().st_size == MAX_KEPT + 2


def test_after_tool_hooks_of_many_calls_at_once_all_answer(held):
    """Parallel calls of one session: each after-tool hook looks at the notes' folder
    while the others take their notes from it; none may fail on a note taken meanwhile."""
    from concurrent.futures import ThreadPoolExecutor
    for round_ in range(3):
        events = [pre(held, UNSEEN, f"r{round_}-{i}") for i in range(8)]
        for event in events:
            aged(held, event["tool_use_id"], 700)  # each a leftover to the others
        with ThreadPoolExecutor(8) as pool:
            procs = list(pool.map(lambda e: hook(held, "claude", "post-tool-use", {
                **e, "hook_event_name": "PostToolUse"}), events))
        assert all(p.returncode == 0 for p in procs), [p.stderr for p in procs]
    assert not list((held / ".git" / "agent-registry" / "backstop").glob("*.note"))


def test_a_failed_command_is_checked_too(held):
    text = around("claude", held, "python3 -c \"open('src/auth.py', 'w').write('x')\"; exit 3",
                  event="PostToolUseFailure")
    assert "kimi-1" in text and (held / "src" / "auth.py").read_text() == HOLDERS_WORK


def test_what_is_held_is_read_again_when_the_registry_moves(held):
    """The held targets are remembered between notes (harness/heldcache.py) only while
    every registry ref is where it was: a claim made since is seen at the next call."""
    assert around("claude", held, UNSEEN) is None  # read, and remembered
    assert around("claude", held, "python3 -c \"open('src/auth.py', 'a').write('x')\"")
    assert (held / "src" / "auth.py").read_text() == HOLDERS_WORK  # remembered: still held
    with open_registry(held) as registry:
        registry.claim("kimi-1", ["README.md"])
    text = around("claude", held, "python3 -c \"open('README.md', 'a').write('mine')\"")
    assert text and "README.md" in text and (held / "README.md").read_text() == "project\n"


def test_refs_untouched_since_the_last_note_are_not_read_again_until_a_claim(held):
    """The held targets are kept with the stamp of what the refs were read from
    (harness/heldcache.py: their folders, packed-refs, the config files): while none of
    them changed since, past git's racy second, the next note reads neither the refs nor
    the config (store/gitconfig.py not imported); a claim, a ref renamed into its
    shard's folder, moves that folder's times and is seen at the next call."""
    import time
    time.sleep(2.1)  # past the second (and its margin) the registry's refs were written in
    assert around("claude", held, UNSEEN) is None  # read, and kept with the refs' stamp
    names = imports_of_pre_hook(held, "claude", UNSEEN)
    assert "agent_registry.harness.backstop" in names  # a note was taken
    assert "agent_registry.store.gitconfig" not in names
    with open_registry(held) as registry:
        registry.claim("kimi-1", ["README.md"])
    text = around("claude", held, "python3 -c \"open('README.md', 'a').write('mine')\"")
    assert text and "README.md" in text and (held / "README.md").read_text() == "project\n"


def test_a_registry_branch_in_a_folder_is_read_again_when_it_moves(repo, run, agents):
    """A registry branch named team/reg is refs/heads/team/reg (and reg-shards/...): the
    held targets are kept under those refs (harness/heldcache.py), so a claim made since
    the last note is seen at the next call, also where packed-refs is there, as in any
    clone (the cache listed refs/heads/ itself only, found no ref of the branch, and kept
    the answer under packed-refs alone: the claim went unseen for 30 s)."""
    assert run("init", "--branch", "team/reg").returncode == 0
    git(repo, "pack-refs", "--all")
    hold(repo, "kimi-1", ["src/auth.py"], agents())
    (repo / "src" / "auth.py").write_text(HOLDERS_WORK)
    started = hook(repo, "claude", "session-start",
                   {**base("claude", repo, "SessionStart"), "source": "startup"})
    assert started.returncode == 0, started.stderr
    assert around("claude", repo, UNSEEN) is None  # read, and remembered
    with open_registry(repo) as registry:
        registry.claim("kimi-1", ["README.md"])
    text = around("claude", repo, "python3 -c \"open('README.md', 'a').write('mine')\"")
    assert text and "README.md" in text and (repo / "README.md").read_text() == "project\n"


def test_a_lock_that_may_count_again_with_no_ref_moving_is_not_remembered_free(repo, run):
    """A holder whose heartbeat is dated beyond the clock-skew margin ahead is stale once
    this clone has watched it for its TTL, and held again once the clock comes within
    the margin of it, with no ref moving: an answer read while it was stale is not
    remembered (harness/held.py may_count_again), so the next call notes it held and
    puts its file back."""
    import time
    from agent_registry.branch.staleness import CLOCK_SKEW
    ahead = CLOCK_SKEW + 5
    started = hook(repo, "claude", "session-start",
                   {**base("claude", repo, "SessionStart"), "source": "startup"})
    assert started.returncode == 0, started.stderr
    with open_registry(repo, clock=lambda: time.time() + ahead) as registry:
        registry.register("kimi-1", provider="Kimi", working_on="readme")
        registry.claim("kimi-1", ["README.md"], ttl=1)
    (repo / "README.md").write_text("kimi-1's work\n")
    first = time.time()
    assert run("lock", "check", "README.md").returncode != 0  # held: first seen now
    time.sleep(1.5)
    assert "stale" in run("lock", "check", "README.md").stdout
    assert around("claude", repo, UNSEEN) is None  # nothing held now
    time.sleep(max(0.0, first + ahead - CLOCK_SKEW + 0.5 - time.time()))
    assert run("lock", "check", "README.md").returncode != 0  # held again
    text = around("claude", repo, "python3 -c \"open('README.md', 'w').write('clobbered')\"")
    assert text and "README.md" in text
    assert (repo / "README.md").read_text() == "kimi-1's work\n"


def test_a_held_cache_that_lost_a_files_name_is_worked_out_again(held):
    """The cache of held targets (harness/heldcache.py) names the file each target is;
    one that lost that name for the held file (a damaged or older cache) is not trusted:
    trusting it noted the held file as a folder, never compared, and the change stayed."""
    from agent_registry.harness.heldcache import Kept
    assert around("claude", held, UNSEEN) is None  # read, and remembered
    cache, sid = Kept(str(held / ".git"), "held", 30), f"claude-{NATIVE}"
    under, at, count, body = cache.read(sid)  # who holds what, the files named, the areas
    cache.write(sid, under, at, count, body.replace(b'["src/auth.py"]', b"[]"))
    text = around("claude", held, "python3 -c \"open('src/auth.py', 'a').write('x')\"")
    assert text and "kimi-1" in text
    assert (held / "src" / "auth.py").read_text() == HOLDERS_WORK


def test_nothing_held_nothing_noted_nothing_said(repo, run):
    assert run("init").returncode == 0
    assert around("claude", repo, "python3 -c \"open('src/auth.py', 'a').write('x')\"") is None
    assert (repo / "src" / "auth.py").read_text().endswith("x")
    assert not (repo / ".git" / "agent-registry" / "backstop").exists()


def imports_of_pre_hook(repo: Path, harness: str, command: str) -> set[str]:
    """The modules the pre-tool-use hook of *harness* imports for the shell *command*."""
    import sys

    from test_import_budget import LAUNCHER
    proc = subprocess.run([sys.executable, "-X", "importtime", "-c", LAUNCHER, "harness",
                           "hook", harness, "pre-tool-use"], cwd=repo,
                          input=json.dumps(call(harness, repo, command)),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and verdict(harness, proc) is None, proc.stderr[-2000:]
    return {line.split("|")[2].strip() for line in proc.stderr.splitlines()
            if line.startswith("import time:") and "|" in line}


@pytest.mark.parametrize("harness", ["claude", "cursor"])
def test_with_nothing_held_the_pre_hook_imports_no_git_module_nor_path_rules(repo, run,
                                                                             harness):
    """Issue 35's hook target: the gate of a command that writes nothing, and the note
    when nothing is held (what is held remembered: harness/heldcache.py), find the
    repository and the registry's refs from their files: no git module (zlib, the object
    writers), no path rules (branch/paths.py), no importlib; ~2.5 ms of a 13 ms hook."""
    assert run("init").returncode == 0
    run("register", "kimi-1", "--provider", "Kimi")
    started = hook(repo, "claude", "session-start",
                   {**base("claude", repo, "SessionStart"), "source": "startup"})
    assert started.returncode == 0, started.stderr
    imports_of_pre_hook(repo, harness, UNSEEN)  # what is held is read once, and kept
    names = imports_of_pre_hook(repo, harness, UNSEEN)
    assert "agent_registry.harness.hook" in names
    if harness == "claude":
        assert "agent_registry.harness.heldcache" in names  # the note looked
    heavy = sorted(names & {"agent_registry.store.git", "zlib", "agent_registry.branch.paths",
                            "importlib", "agent_registry.harness.held"})
    assert heavy == [], f"harness hook {harness} pre-tool-use imported {heavy}"


def test_own_files_and_free_files_are_left_alone(held, run):
    assert run("lock", "acquire", "--session", f"claude-{NATIVE}", "README.md").returncode == 0
    text = around("claude", held, "python3 -c \"open('README.md', 'a').write('mine')\"")
    assert text is None and (held / "README.md").read_text().endswith("mine")


def test_in_a_separate_worktree_a_change_is_reported_not_undone(held, tmp_path):
    other = tmp_path / "wt"
    git(held, "worktree", "add", "-q", str(other))
    text = around("claude", held, "python3 -c \"open('src/auth.py', 'w').write('mine')\"",
                  cwd=other)
    assert (other / "src" / "auth.py").read_text() == "mine"  # left as the agent made it
    assert (held / "src" / "auth.py").read_text() == HOLDERS_WORK  # the holder's untouched
    assert "another working tree" in text and "kimi-1" in text and "refused" in text
    [message] = [m for m in inbox(held, "kimi-1") if m.get("subject") == "backstop"]
    assert "not your working tree" in message["body"]


# -- the forms the parser reads now: refused before they run ----------------------------

READ_WRITES = [
    "git restore .", "git checkout .", "git checkout -- .", "git checkout HEAD src/auth.py",
    "git checkout HEAD -- src/auth.py", "git stash", "git stash pop", "git reset --hard",
    "cd src && git restore .", "ln -sf /etc/hostname src/auth.py", "perl -pi -e s/1/2/ src/auth.py",
    "f=src/auth.py; echo x > $f", "echo x > $'src/auth.py'", "touch src/{auth,other}.py",
    "echo x > >(tee src/auth.py)", "echo $(echo x > src/auth.py)", "echo `touch src/auth.py`",
    "bash -o pipefail -c 'echo x > src/auth.py'", "pushd src && echo x > auth.py",
    "diff <(cat README.md) <(cat README.md) > src/auth.py",
    "cat <(ls); echo x > src/auth.py", "pushd src; echo x > auth.py", "git restore -- .",
    "x=`echo x > src/auth.py`", "echo x > src/{auth,other}.py",
    "bash -eo pipefail -c 'echo x > src/auth.py'", "bash -euxo pipefail -c 'touch src/auth.py'",
    "echo x > $'src/\\141uth.py'", "echo x > $'src/auth.py\\0tail'",
]


def test_the_forms_the_parser_reads_are_refused_before_they_run(held):
    # one holder for every form: its setup costs more than a form's hook (~0.15 s)
    let_through = []
    for command in READ_WRITES:
        reason = verdict("claude", hook(held, "claude", "pre-tool-use",
                                        call("claude", held, command)))
        if not (reason and "src/auth.py" in reason and "kimi-1" in reason):
            let_through.append(command)
    assert let_through == []


def test_a_patch_is_refused_by_the_files_it_names(held):
    diff = git(held, "diff")  # the holder's own change, as a patch
    (held / "fix.diff").write_text(diff)
    for command in ("git apply fix.diff", "git am fix.diff", "patch -p1 < fix.diff",
                    "git apply < fix.diff"):
        reason = verdict("claude", hook(held, "claude", "pre-tool-use",
                                        call("claude", held, command)))
        assert reason and "kimi-1" in reason, command
    assert verdict("claude", hook(held, "claude", "pre-tool-use",
                                  call("claude", held, "git apply --check fix.diff"))) is None


@pytest.mark.parametrize("command", [
    "echo x > $TARGET", "ls | xargs rm -f", "find src -name '*.py' -exec sed -i s/a/b/ {} +",
    "cat fix.diff | patch -p1", "echo 'unclosed > src/auth.py",
])
def test_a_write_it_cannot_follow_is_refused_while_anything_is_held(held, repo, command):
    reason = verdict("claude", hook(held, "claude", "pre-tool-use", call("claude", held, command)))
    assert reason and "cannot name" in reason and "kimi-1" in reason, command


def test_a_write_it_cannot_follow_goes_on_when_nothing_is_held(repo, run):
    assert run("init").returncode == 0
    assert verdict("claude", hook(repo, "claude", "pre-tool-use",
                                  call("claude", repo, "ls | xargs rm -f"))) is None


@pytest.mark.parametrize("harness", BACKSTOP)
def test_a_command_it_cannot_see_into_is_refused_while_the_registry_is_unreadable(
        held, harness):
    """Who holds what cannot be read (the registry branch names a commit that is not
    there), so the backstop cannot note the held files around an interpreter: the call
    is refused as a write the gate cannot check is, even after an earlier note was
    remembered, unless the person lets it through; a command of programs that write no
    file goes on."""
    assert around(harness, held, UNSEEN) is None  # noted once while readable
    ref = held / ".git" / "refs" / "heads" / "agent-registry"
    ref.write_text("1" * 40 + "\n")
    reason = verdict(harness, hook(held, harness, "pre-tool-use", call(harness, held, UNSEEN)))
    assert reason and "cannot tell whether this command writes a locked file" in reason
    assert "AGENT_REGISTRY_ALLOW=1" in reason and "\n" not in reason
    allowed = hook(held, harness, "pre-tool-use", call(harness, held, UNSEEN),
                   env={"AGENT_REGISTRY_ALLOW": "1"})
    assert verdict(harness, allowed) is None and "a command run unchecked" in allowed.stderr
    assert verdict(harness, hook(held, harness, "pre-tool-use",
                                 call(harness, held, "ls -la src"))) is None


def test_a_write_into_a_sibling_worktrees_held_file_is_refused(held, tmp_path):
    other = tmp_path / "wt"
    git(held, "worktree", "add", "-q", str(other))
    event = {**call("claude", held, f"echo x > {held}/src/auth.py"), "cwd": str(other)}
    reason = verdict("claude", hook(held, "claude", "pre-tool-use", event, cwd=other))
    assert reason and "kimi-1" in reason


def test_codex_patch_headers_may_be_indented(held):
    event = {**base("codex", held, "PreToolUse"), "tool_name": "apply_patch", "tool_input": {
        "command": "*** Begin Patch\n  *** Update File: src/auth.py\n@@\n-a\n+b\n*** End Patch\n"}}
    assert "kimi-1" in verdict("codex", hook(held, "codex", "pre-tool-use", event))


# -- hostile input: refused in the harness's blocking form, never a traceback or an allow --

def hostile(repo: Path) -> list[str]:
    good = {"session_id": NATIVE, "cwd": str(repo), "hook_event_name": "PreToolUse"}
    bash = {**good, "tool_name": "Bash"}
    shapes = [
        {**bash, "tool_input": "echo x > src/auth.py"},
        {**bash, "tool_input": ["echo x > src/auth.py"]},
        {**bash, "tool_input": None},
        {**bash, "tool_input": {"command": ["echo x > src/auth.py"]}},
        {**bash, "tool_input": {"command": {"run": "echo x > src/auth.py"}}},
        {**bash, "tool_input": {"command": 42}},
        {**good, "tool_name": "Write", "tool_input": {"file_path": ["src/auth.py"]}},
        {**good, "tool_name": "Write", "tool_input": {"file_path": 7}},
        {**good, "tool_name": ["Write"], "tool_input": {"file_path": "src/auth.py"}},
        {**bash, "session_id": {"id": 1}, "tool_input": {"command": "ls"}},
        {**bash, "session_id": True, "tool_input": {"command": "ls"}},
        {**bash, "cwd": ["/"], "tool_input": {"command": "ls"}},
        {**bash, "tool_input": {"command": "echo x > " + "a" * 300_000}},
        {**bash, "tool_input": {"command": "echo " + "$(" * 50 + ")" * 50 + " > src/auth.py"}},
    ]
    texts = [json.dumps(s) for s in shapes]
    return texts + ["", "[]", '"Bash"', "42", "null", "{", "\ufeff{}", "[" * 100_000 + "]" * 100_000,
                    json.dumps({"session_id": NATIVE})[:-1] + ', "tool_name": "Bash", "tool_input": '
                    '{"command": "echo x > src/auth.py"}, "x": NaN}',
                    "x" * (17 * 1024 * 1024)]


def test_hostile_hook_input_is_refused_in_one_line(held):
    for payload in hostile(held):
        proc = hook(held, "claude", "pre-tool-use", payload)
        shown = payload[:80]
        assert "Traceback" not in proc.stderr, shown
        if proc.returncode == 0:  # an answer: it must be the deny (a hostile write refused)
            assert proc.stdout.strip() and verdict("claude", proc), shown
            continue
        assert proc.returncode == 2 and proc.stdout == "", shown
        assert len(proc.stderr.strip().splitlines()) == 1, shown
    assert (held / "src" / "auth.py").read_text() == HOLDERS_WORK


def test_hostile_input_to_the_after_tool_hook_never_crashes(held):
    for payload in hostile(held):
        proc = hook(held, "claude", "post-tool-use", payload)
        assert "Traceback" not in proc.stderr and proc.returncode in (0, 1), payload[:80]


# -- install: the after-tool hooks are written ------------------------------------------

@pytest.mark.parametrize("harness, file, events", [
    ("claude", ".claude/settings.json", ["PostToolUse", "PostToolUseFailure"]),
    ("codex", ".codex/hooks.json", ["PostToolUse"]),
    ("gemini", ".gemini/settings.json", ["AfterTool"]),
])
def test_install_writes_the_after_tool_hook(repo, run, harness, file, events):
    assert run("init").returncode == 0
    assert run("harness", "install", harness, check_untouched=False).returncode == 0
    hooks = json.loads((repo / file).read_text())["hooks"]
    gate = hooks["BeforeTool" if harness == "gemini" else "PreToolUse"][0]["matcher"]
    for event in events:
        [group] = hooks[event]
        assert group["matcher"] == gate
        assert f"harness hook {harness} post-tool-use" in group["hooks"][0]["command"]
        assert os.path.isabs(group["hooks"][0]["command"].split()[0].strip("'"))


def test_a_note_that_cannot_be_read_back_is_said_not_taken_as_unchanged(held):
    """A damaged note (cut short, overwritten) names nothing to compare: the agent is
    told that the call's changes to held files were not checked, not left to think
    nothing happened."""
    text = changed_after_its_note_was(held, lambda note: note[:20])  # cut short
    assert text and "could not be read" in text and "agent-registry status" in text


def changed_after_its_note_was(held: Path, damage) -> str | None:
    """What the after-tool hook tells of a call whose note *damage* (its bytes -> the
    bytes left) changed, the call having changed the held src/auth.py."""
    before = call("claude", held, UNSEEN)
    assert verdict("claude", hook(held, "claude", "pre-tool-use", before)) is None
    [note] = (held / ".git" / "agent-registry" / "backstop").iterdir()
    note.write_bytes(damage(note.read_bytes()))
    (held / "src" / "auth.py").write_text("mine\n")
    proc = hook(held, "claude", "post-tool-use",
                {**before, "hook_event_name": "PostToolUse",
                 "tool_response": {"stdout": "", "exit_code": 0}})
    assert proc.returncode == 0, proc.stderr
    return told("claude", proc)


@pytest.mark.parametrize("stats, put_back", [("json", True), ("marshal", True),
                                             ("damaged", False)])
def test_a_notes_stats_line_is_read_in_either_form_and_never_trusted_damaged(held, stats,
                                                                               put_back):
    """The stats line (after.stats_line: one record each, in hex, one JSON string) of a
    note an earlier version wrote (a JSON list of lists, or the hex of their marshal
    form) is still read, and a held file changed since is put back; one that cannot be
    read is said, not taken as unchanged."""
    import marshal

    from agent_registry.harness.after import read_stats
    from agent_registry.store.jsontext import dumps, loads

    def rewritten(note: bytes) -> bytes:
        lines = note.split(b"\n")
        keys = read_stats(lines[4], len(loads(lines[2])))
        if stats == "json":
            lines[4] = dumps([list(k) if k else k for k in keys]).encode()
        elif stats == "marshal":
            lines[4] = b'"' + marshal.dumps(keys).hex().encode() + b'"'
        else:
            lines[4] = b'"' + lines[4][1:-1][::-1] + b'"'
        return b"\n".join(lines)
    text = changed_after_its_note_was(held, rewritten)
    if put_back:
        assert text and "kimi-1" in text
        assert (held / "src" / "auth.py").read_text() == HOLDERS_WORK
    else:
        assert text and "could not be read" in text
