"""harness/shellwrites.py: the files a shell command writes, read without running it."""
from __future__ import annotations

import pytest

from agent_registry.harness.shellwrites import tokenize, write_targets


@pytest.mark.parametrize("command, targets", [
    # redirections, with and without spaces, and with a file descriptor
    ("echo x > f", ["f"]),
    ("echo x>f", ["f"]),
    ("echo x>>f", ["f"]),
    ("printf '%s' x >| f", ["f"]),
    ("make 2>err.log", ["err.log"]),
    ("make 2> err.log >out.log", ["err.log", "out.log"]),
    ("make &>all.log", ["all.log"]),
    ("make &>> all.log", ["all.log"]),
    ("make >&build.log", ["build.log"]),
    ("make 2>&1 > out", ["out"]),
    ("make >&2", []),
    ("exec 3<> fifo.txt", ["fifo.txt"]),
    ("cat < in.txt", []),
    # quoted names stay whole
    ('echo x >> "my file.txt"', ["my file.txt"]),
    ("echo x > 'a b'", ["a b"]),
    (r"echo x > a\ b", ["a b"]),
    ('echo "a > b"', []),
    ("echo 'x' > src/'odd name'.py", ["src/odd name.py"]),
    # devices are not files of the repository
    ("make > /dev/null 2>/dev/stderr", []),
    ("echo x | tee /dev/stderr", []),
    # tee, sed -i, cp, mv, rm, touch, truncate, dd
    ("echo x | tee out", ["out"]),
    ("echo x | tee -a a b", ["a", "b"]),
    ("echo x | sudo tee -a /etc/hosts", ["/etc/hosts"]),
    ("sed -i 's/a/b/' src/auth.py", ["src/auth.py"]),
    ("sed -i.bak -e s/a/b/ -e s/c/d/ x y", ["x", "y"]),
    ("sed -ni 's/a/b/p' f", ["f"]),
    ("sed --in-place=.orig -f script.sed f", ["f"]),
    ("sed 's/a/b/' f > g", ["g"]),
    ("cp a b", ["b"]),
    ("cp -r a b dir", ["dir/a", "dir/b"]),
    ("cp a dir/", ["dir/a"]),
    ("cp -t dir a b", ["dir/a", "dir/b"]),
    ("cp --target-directory=dir a", ["dir/a"]),
    ("mv a b", ["a", "b"]),
    ("mv -f a b dir", ["a", "b", "dir/a", "dir/b"]),
    ("install -m 644 a /usr/local/bin/a", ["/usr/local/bin/a"]),
    ("rm -rf a b", ["a", "b"]),
    ("rm -- -odd", ["-odd"]),
    ("unlink f", ["f"]),
    ("touch -d now f g", ["f", "g"]),
    ("truncate -s 0 f", ["f"]),
    ("dd if=/dev/zero of=disk.img bs=1M", ["disk.img"]),
    ("ln -s a b", []),
    # git commands that change working-tree files
    ("git checkout -- a b", ["a", "b"]),
    ("git checkout HEAD~1 -- src/auth.py", ["src/auth.py"]),
    ("git checkout main", []),
    ("git restore src/auth.py", ["src/auth.py"]),
    ("git restore --source HEAD~1 --staged -W a", ["a"]),
    ("git restore -s main -- a", ["a"]),
    ("git rm -q a", ["a"]),
    ("git mv a b", ["a", "b"]),
    ("git status", []),
    # sequences, pipelines, subshells, cd, sh -c, eval, wrappers
    ("make; echo x > a && echo y >> b || touch c", ["a", "b", "c"]),
    ("cat f | sort | tee out", ["out"]),
    ("cd src && echo > f", ["src/f"]),
    ("cd src; cd ../docs; touch g", ["docs/g"]),
    ("cd /tmp && touch f", ["/tmp/f"]),
    ("cd && touch f", []),
    ("cd $DIR && touch f", []),
    ("(cd a; echo > f); echo > g", ["a/f", "g"]),
    ("bash -c 'echo x > g'", ["g"]),
    ('sh -c "rm -f src/auth.py"', ["src/auth.py"]),
    ("bash -lc 'cd src && sed -i s/a/b/ auth.py'", ["src/auth.py"]),
    ("cd src && bash -c 'touch f'", ["src/f"]),
    ("eval 'echo x > e'", ["e"]),
    ("FOO=1 BAR=2 touch f", ["f"]),
    ("env -i A=1 rm x", ["x"]),
    ("nohup timeout 5 tee log", ["log"]),
    ("if true; then echo x > f; fi", ["f"]),
    ("{ echo a; echo b; } > both", ["both"]),
    ("make \\\n  > out", ["out"]),
    ("echo x > f # > not-a-file", ["f"]),
    # here-documents: the body is not read as commands
    ("cat > f <<EOF\nhello > no\nrm -rf /\nEOF\n", ["f"]),
    ("cat <<'EOF' > f\n$x > no\nEOF\necho > after", ["f", "after"]),
    ("cat <<-EOF >f\n\tx > no\n\tEOF\ntouch g", ["f", "g"]),
    ("python - <<EOF\nopen('x', 'w')\nEOF", []),
    ("cat > f <<< 'x > no'", ["f"]),
    # what depends on the shell, or cannot be parsed, yields nothing
    ("echo $X > $F", []),
    ("echo x > \"$HOME/f\"", []),
    ("echo x > `name`", []),
    ("touch ~/f", []),
    ("echo $(date) > stamp", ["stamp"]),
    ("echo \"$(echo a > b)\" > c", ["c"]),
    ('echo "unclosed > f', []),
    ("echo 'unclosed > f", []),
    ("echo x >", []),
    ("python -c 'open(\"f\", \"w\")'", []),
    ("", []),
])
def test_targets(command, targets):
    assert write_targets(command) == targets


def test_an_argv_list_is_one_command():
    """Codex's shell tool sends the argv, e.g. ["bash", "-lc", "..."]."""
    assert write_targets(["bash", "-lc", "echo x > a; cp b c"]) == ["a", "c"]
    assert write_targets(["rm", "-f", "x y"]) == ["x y"]
    assert write_targets(["ls", "-l"]) == []


def test_relative_names_are_joined_with_cwd_and_globs_expanded_there(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.py").write_text("")
    (tmp_path / "src" / "b.py").write_text("")
    top = str(tmp_path)
    assert write_targets("echo > f; touch /abs/g", cwd=top) == [f"{top}/f", "/abs/g"]
    assert write_targets("rm src/*.py", cwd=top) == [f"{top}/src/a.py", f"{top}/src/b.py"]
    # an existing directory as the destination: the file lands inside it
    assert write_targets("cp README.md src", cwd=top) == [f"{top}/src/README.md"]
    assert write_targets("cp README.md new.md", cwd=top) == [f"{top}/new.md"]
    assert write_targets("cd src && touch c.py", cwd=top) == [f"{top}/src/c.py"]
    # no cwd: a glob cannot be expanded, and is skipped
    assert write_targets("rm src/*.py") == []


def test_each_target_once():
    assert write_targets("echo a > f; echo b >> f; touch f") == ["f"]


def test_tokens_split_operators_from_words():
    texts = [t.text for t in tokenize("a&&b||c|d;e>f 2>&1")]
    assert texts == ["a", "&&", "b", "||", "c", "|", "d", ";", "e", ">", "f", ">&", "1"]
