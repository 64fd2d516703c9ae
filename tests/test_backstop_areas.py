"""The backstop's held folders (harness/held.py): what a folder lock covers is what git
tracks or would track below it (tracked files, untracked ones git does not ignore), as
`git ls-files` lists them, at most 2,000 looked at a call.  The real hooks around a real
command in a real repository, as in tests/test_backstop.py: what git ignores neither
spends the cap nor is moved aside, a folder cut short by the cap is said and proves no
file created, and a name that is not UTF-8 turns nothing off."""
from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from test_backstop import HOLDERS_WORK, UNREADABLE_WRITES, call, held, told  # noqa: F401 (held: fixture)
from test_guard import agents  # noqa: F401  (fixture)
from test_harness_hooks import hook, verdict

CAP = 2000  # harness/held.py MAX_FILES


def around(repo: Path, command: str, call_id: str = "call-1") -> tuple[str, str | None]:
    """Claude Code's shell tool running *command*: its gate and note, the command in a
    real shell, the after-tool check; (what the pre hook said on stderr, what the check
    told the agent)."""
    before = call("claude", repo, command, call_id)
    gate = hook(repo, "claude", "pre-tool-use", before)
    assert verdict("claude", gate) is None
    subprocess.run(["bash", "-c", command], cwd=repo, capture_output=True)
    after = {**before, "hook_event_name": "PostToolUse",
             "tool_response": {"stdout": "", "exit_code": 0}}
    proc = hook(repo, "claude", "post-tool-use", after)
    assert proc.returncode == 0, proc.stderr
    return gate.stderr, told("claude", proc)


def files(folder: Path, count: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(count):
        (folder / f"f{i:04d}").write_text(f"file {i}\n")


def test_what_git_ignores_in_a_held_folder_does_not_spend_the_cap(held):
    """An ignored node_modules/ of more than 2,000 files sorts before the holder's work in
    src/gen/: the note looks at what git would track, so the holder's file is noted and
    a write to it put back, and no cap is hit."""
    (held / ".gitignore").write_text("node_modules/\n")
    files(held / "src" / "gen" / "node_modules" / "pkg", CAP + 100)
    work = held / "src" / "gen" / "web" / "app.js"
    work.parent.mkdir()
    work.write_text("export const app = 2;  // kimi-1's work\n")
    said, text = around(held, "python3 -c \"open('src/gen/web/app.js', 'w').write('mine')\"")
    assert work.read_text() == "export const app = 2;  // kimi-1's work\n"
    assert text and "changed src/gen/web/app.js" in text
    assert "backstop" not in said  # no cap hit, nothing turned off


def test_a_held_folder_over_the_cap_is_said_and_proves_no_file_created(held):
    """More than 2,000 files in a held folder: the note says so on stderr, in one line,
    and a file the note did not look at is not taken for one the call created (a deleted
    file moved the check's listing by one: the next was removed)."""
    gen = held / "src" / "gen"
    files(gen, CAP + 1)
    said, text = around(held, "python3 -c \"import os; os.remove('src/gen/f0000')\"")
    assert (gen / "f0000").read_text() == "file 0\n"  # put back: it was noted
    assert all((gen / f"f{i:04d}").exists() for i in range(CAP + 1))  # none removed
    assert text and "deleted src/gen/f0000" in text and "created" not in text
    [line] = [line for line in said.splitlines() if "backstop" in line]
    assert "held src/gen/: more than 2,000 files" in line and "not moved aside" in line


def test_a_name_that_is_not_utf8_in_a_held_folder_turns_nothing_off(held):
    """A file name of bytes that are not UTF-8 in a held folder is no registry path: it
    is held by the folder's holders, and the other held files stay guarded."""
    gen = os.path.join(os.fsencode(held), b"src", b"gen")
    os.makedirs(gen)
    odd = os.path.join(gen, b"caf\xe9.txt")
    with open(odd, "wb") as f:
        f.write(b"kimi-1's file\n")
    said, text = around(held, UNREADABLE_WRITES[0])
    assert "backstop off" not in said
    assert (held / "src" / "auth.py").read_text() == HOLDERS_WORK
    said, text = around(held, "python3 -c \"open(b'src/gen/caf\\xe9.txt', 'wb').write(b'x')\"",
                        "call-2")
    with open(odd, "rb") as f:
        assert f.read() == b"kimi-1's file\n"
    assert text and "changed src/gen/caf\\xe9.txt" in text  # the bytes shown escaped


def test_what_git_ignores_a_command_writes_in_a_held_folder_is_left_alone(held,
                                                                          monkeypatch):
    """A test run's bytecode (ignored) in a held folder is no one's work: not moved aside,
    the agent not told.  Nor is it once the call stops git ignoring it: a file older than
    the note is not the call's."""
    monkeypatch.delenv("PYTHONPYCACHEPREFIX", raising=False)  # the .pyc beside its module
    (held / ".gitignore").write_text("__pycache__/\n")
    (held / "src" / "gen").mkdir()
    (held / "src" / "gen" / "mod.py").write_text("value = 1\n")
    said, text = around(held, "python3 -c \"import sys; sys.path.insert(0, 'src/gen'); "
                              "import mod\"")
    assert text is None and "backstop" not in said
    [pyc] = (held / "src" / "gen" / "__pycache__").iterdir()
    time.sleep(1.1)  # past the second it was written in (git's racy rule)
    said, text = around(held, "python3 -c \"open('.gitignore', 'w').write('')\"", "call-2")
    assert pyc.exists() and text is None


def test_a_held_folder_git_cannot_list_leaves_the_files_held_by_name_noted(held):
    """When git cannot list a held folder (here: a damaged index), the note says so in one
    line and still keeps the files held by name: a write to one is put back."""
    (held / ".git" / "index").write_bytes(b"not an index")
    said, text = around(held, UNREADABLE_WRITES[0])
    assert "src/gen/" in said and "files held by name" in said, said
    assert "src/auth.py" in text and "kimi-1" in text
    assert (held / "src" / "auth.py").read_text() == HOLDERS_WORK
