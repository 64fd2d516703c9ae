"""The in-place editors and copiers the gate reads (harness/shelledits.py): rsync, gawk's
``-i inplace``, ``ruby -i``, ``ed``, ``perl -i`` in all its clusters; the text editors
(harness/shelleditors.py): vi, vim, nvim, ex, emacs; tar's long options by a start; and
the same handed names by xargs or find -exec, which the gate cannot see (fail closed:
never a read)."""
from __future__ import annotations

import pytest

from agent_registry.harness.shellwrites import read_writes
from test_harness_hooks import held, hook, shell, verdict  # noqa: F401  (fixture)
from test_guard import agents  # noqa: F401  (fixture)


@pytest.fixture
def tree(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "auth.py").write_text("auth = 1\n")
    return tmp_path


@pytest.mark.parametrize("command, targets", [
    ("rsync a.txt src/auth.py", ["src/auth.py"]),
    ("rsync -av lib/ src", ["src"]),  # the contents of lib/: anything in src
    ("rsync -a --delete lib/ src/", ["src"]),
    ("rsync -a lib src/", ["src/lib"]),
    ("rsync -aR lib/x src/", ["src"]),
    ("rsync a b src", ["src/a", "src/b"]),
    ("rsync --exclude '*.o' -e 'ssh -p 2' host:x/ src/", ["src"]),
    ("rsync --remove-source-files src/auth.py host:/backup/", ["src/auth.py"]),
    ("rsync --log-file=src/auth.py a host:b", ["src/auth.py"]),
    ("rsync -b --backup-dir=old a src/auth.py", ["src/auth.py", "src/old"]),
    ("rsync -avn a src/auth.py", []), ("rsync a host:b", []), ("rsync src/", []),
    ("awk -i inplace '{print}' src/auth.py", ["src/auth.py"]),
    ("gawk -i inplace -v INPLACE_SUFFIX=.bak 1 src/auth.py x=1", ["src/auth.py"]),
    ("awk -iinplace.awk 1 src/auth.py", ["src/auth.py"]),
    ("gawk --include=inplace -f prog.awk src/auth.py", ["src/auth.py"]),
    ("gawk --incl inplace -e 1 -- src/auth.py", ["src/auth.py"]),
    ("gawk '@include \"inplace\"; {print}' src/auth.py", ["src/auth.py"]),
    ("gawk -p 1 x", ["awkprof.out"]), ("gawk --dump-variables=src/auth.py 1 x", ["src/auth.py"]),
    ("awk '{print}' src/auth.py", []), ("awk -F: -v i=1 '{print $1}' src/auth.py", []),
    ("ruby -i -pe 'sub(/1/, \"2\")' src/auth.py", ["src/auth.py"]),
    ("ruby -pi.bak -e 'x' src/auth.py", ["src/auth.py"]),
    ("ruby -0pi -e 1 src/auth.py", ["src/auth.py"]),
    ("ruby -W:no-deprecated -r json -pi -e 1 src/auth.py", ["src/auth.py"]),
    ("ruby --enable frozen-string-literal -i fix.rb src/auth.py", ["src/auth.py"]),
    ("ruby -C src -pi -e 1 auth.py", ["src/auth.py"]),
    ("ruby -e 'puts 1' src/auth.py", []), ("ruby fix.rb -i src/auth.py", []),
    ("ed src/auth.py", ["src/auth.py"]), ("ed -s src/auth.py <<< $'1d\\nw\\nq'", ["src/auth.py"]),
    ("red -p '*' src/auth.py", ["src/auth.py"]), ("ed '!ls'", []), ("ed", []),
    ("perl -lpi -e 's/1/2/' src/auth.py", ["src/auth.py"]),
    ("perl -l0pi -e 1 src/auth.py", ["src/auth.py"]),
    ("perl -0777 -pi -e 1 src/auth.py", ["src/auth.py"]),
    ("perl -0x1Fpi -e 1 src/auth.py", ["src/auth.py"]),
    ("perl -Fi -ane print src/auth.py", []), ("perl -lne print src/auth.py", []),
    # vi, vim, nvim, ex: every file each edits, whatever runs its commands (its input too)
    ("ex src/auth.py", ["src/auth.py"]), ("ex -s src/auth.py <<< wq", ["src/auth.py"]),
    ("vim -c wq src/auth.py", ["src/auth.py"]), ("vim -es src/auth.py", ["src/auth.py"]),
    ("vi -e src/auth.py", ["src/auth.py"]), ("vim +wq src/auth.py", ["src/auth.py"]),
    ("nvim --headless -c 'wq' src/auth.py", ["src/auth.py"]),
    ("vim src/auth.py", ["src/auth.py"]), ("vim -R -- src/auth.py", ["src/auth.py"]),
    ("vim -u NONE -i NONE -Nes -c '%s/1/2/' -c x src/auth.py", ["src/auth.py"]),
    ("vim -S fix.vim -s keys.txt -csomething a", ["a"]),
    ("vimdiff a b", ["a", "b"]), ("vim.tiny -o2 a", ["a"]),
    ("vim -W out.keys -V9vim.log --startuptime t.log a", ["out.keys", "vim.log", "t.log", "a"]),
    ("nvim -l fix.lua src/auth.py", []), ("vim --version", []), ("vim -", []),
    # emacs: every file it visits, which -f save-buffer or --eval writes
    ("emacs --batch src/auth.py -f save-buffer", ["src/auth.py"]),
    ("emacs -Q --batch --eval '(find-file \"x\")' +3 src/auth.py", ["src/auth.py"]),
    ("emacs -batch -l fix.el --visit=src/auth.py", ["src/auth.py"]),
    ("emacs --chd src --bat auth.py -f save-buffer", ["src/auth.py"]),
    ("emacs --batch --eval '(message 1)'", []),
])
def test_the_files_editors_and_copiers_write_are_named(tree, command, targets):
    assert read_writes(command, str(tree)) == [str(tree / t) for t in targets]


@pytest.mark.parametrize("command", [
    "xargs sed --in s/1/2/", "git ls-files | xargs sed --in-place=.bak s/1/2/",
    "find . -name '*.py' | xargs sed --in-place s/1/2/", "xargs sed -Ei s/1/2/",
    "xargs perl -lpi -e 1", "xargs awk -i inplace 1", "find . -exec gawk -i inplace 1 {} +",
    "find . -name '*.rb' | xargs ruby -i -pe 1", "ls | xargs ed", "xargs rsync -a lib/",
    "find . -exec rsync {} /tmp/x \\;", "git ls-files | xargs tar --remove-files -cf x.tar",
    "git ls-files | xargs tar --remove-f -cf x.tar", "xargs vim", "ls | xargs vim -c wq",
    "find . -name '*.py' -exec ex -s {} +", "xargs nvim --headless -c wq",
    "xargs emacs --batch -f save-buffer", "vim -t main", "vim -q errors.txt",
])
def test_names_handed_to_them_are_not_followed_and_never_a_read(tree, command):
    found = read_writes(command, str(tree))
    assert found.unfollowed and not found.reads_only, command


def test_handed_names_they_only_read_are_no_write(tree):
    for command in ("xargs sed -n p", "xargs perl -ne print", "xargs awk 1", "xargs ruby -e 1",
                    "xargs tar -cf x.tar"):
        assert read_writes(command, str(tree)).unfollowed == [], command


@pytest.mark.parametrize("harness", ["claude", "gemini", "cursor"])
def test_the_gate_refuses_them_naming_the_holder(held, harness):
    """Through the real hook process: each named write of the held file is refused
    naming kimi-1 (Cursor has no backstop: the gate is all there is), and each form
    handed names it cannot see is refused as one it cannot name."""
    (held / "lib").mkdir()
    for command in ("rsync a.txt src/auth.py", "rsync -a lib/ src/",
                    "awk -i inplace '{print}' src/auth.py",
                    "ruby -pi.bak -e 'x' src/auth.py", "ed -s src/auth.py <<< $'w\\nq'",
                    "perl -lpi -e 's/1/2/' src/auth.py", "vim -c wq src/auth.py",
                    "ex -s src/auth.py <<< wq", "nvim --headless -c 'wq' src/auth.py",
                    "emacs --batch src/auth.py -f save-buffer",
                    "tar --remove-f -cf x.tar src/auth.py", "tar --extr -f a.tar"):
        reason = verdict(harness, hook(held, harness, "pre-tool-use",
                                       shell(harness, held, command)))
        assert reason and "src/auth.py" in reason and "kimi-1" in reason, command
    for command in ("git ls-files | xargs sed --in s/1/2/", "xargs awk -i inplace 1 < list",
                    "find . -name '*.py' | xargs ruby -i -pe 1",
                    "git ls-files | xargs vim -c wq", "find . -exec ex -s {} +",
                    "tar --re -cf x.tar src/auth.py"):
        reason = verdict(harness, hook(held, harness, "pre-tool-use",
                                       shell(harness, held, command)))
        assert reason and "cannot name" in reason and "kimi-1" in reason, command
    for command in ("rsync -a lib/ build/", "awk '{print}' src/auth.py", "ed notes.txt",
                    "vim -es notes.txt", "tar --extr -f a.tar --dir=build"):
        assert verdict(harness, hook(held, harness, "pre-tool-use",
                                     shell(harness, held, command))) is None, command
