"""harness/shellwrites.py: the files a shell command writes, read without running it."""
from __future__ import annotations

import os

import pytest

from agent_registry.harness.shellwrites import read_writes, tokenize, write_targets


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
    ("sed --in s/a/b/ f", ["f"]),  # GNU's long options by an unambiguous start
    ("sed --ex s/a/b/ --in-pl=.b f g", ["f", "g"]),
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
    ("ln -s a b", ["b"]),
    ("cp --backup a b", ["b"]),  # --backup takes CONTROL only after "="
    ("cp --backup=numbered a b", ["b"]),
    ("cp --t dir a b", ["dir/a", "dir/b"]),  # GNU's long options by an unambiguous start
    ("mv --target=dir a", ["a", "dir/a"]),
    ("sort --o=out in", ["out"]),
    ("cp --sparse always a c", ["c"]),
    ("patch --fuzz 3 -p0 src/auth.py fix.diff", ["src/auth.py"]),
    # sort -o, patch -o, the (un)packers
    ("sort -o src/auth.py src/auth.py", ["src/auth.py"]),
    ("sort -k 2 --output=out in", ["out"]),
    ("sort in > out", ["out"]),
    ("patch -o new.py src/auth.py fix.diff", ["new.py"]),
    ("patch -o - src/auth.py fix.diff", []),
    ("gzip src/auth.py", ["src/auth.py.gz", "src/auth.py"]),
    ("gzip -k -S .z a", ["a.z"]),  # kept: only the packed file is new
    ("gunzip a.gz", ["a", "a.gz"]),
    ("gzip -d a.gz", ["a", "a.gz"]),
    ("gunzip g", ["g", "g.gz"]),  # it unpacks g.gz
    ("gunzip h.tgz", ["h.tar", "h.tgz"]),
    ("xz -T 0 -C crc32 a", ["a.xz", "a"]),
    ("zstd a", ["a.zst"]),  # zstd keeps its input ...
    ("zstd --rm a", ["a.zst", "a"]),  # ... unless told
    ("zstd a -o b.zst", ["b.zst"]),
    ("zstd -d --output-dir-flat=out a.zst", ["out"]),
    ("gzip -c a > a.gz", ["a.gz"]),
    ("gunzip -l a.gz", []),
    # tar writes the archive it makes, and what --remove-files removes
    ("tar -czf a.tgz src", ["a.tgz"]),
    ("tar cf a.tar src", ["a.tar"]),
    ("tar -rf assets/bundle.tar f", ["assets/bundle.tar"]),
    ("tar -cf a.tar --remove-files src/auth.py", ["a.tar", "src/auth.py"]),
    ("tar -C src -cf a.tar --remove-files auth.py", ["a.tar", "src/auth.py"]),
    ("tar -cf a.tar -Xexcludes src", ["a.tar"]),
    ("tar -g snap.snar -czf b.tgz src", ["b.tgz", "snap.snar"]),
    # extracting writes the folder it extracts to, which covers what is held in it
    ("tar xzf release.tgz", ["."]),
    ("tar -C src -xf a.tar", ["src"]),
    ("tar --extract --file=a.tar", ["."]),
    ("tar -xf x -C /tmp/build", ["/tmp/build"]),
    # its long options by an unambiguous start, as getopt_long reads them
    ("tar --remove-f -cf x.tar src/auth.py", ["x.tar", "src/auth.py"]),
    ("tar --cre --file a.tar src", ["a.tar"]), ("tar --extr -f a.tar", ["."]),
    ("tar --app -f a.tar --dir src auth.py", ["a.tar"]),
    ("tar -x --dir=src -f a.tar", ["src"]), ("tar -xf a.tar --to-s", []),
    ("tar -cf a.tar --index=list.txt src", ["a.tar", "list.txt"]),
    ("unzip -o a.zip", ["."]),
    ("unzip a.zip -d out", ["out"]),
    ("unzip -q t.zip -d/tmp/t", ["/tmp/t"]),
    ("gunzip p.z", ["p", "p.z"]),
    ("bunzip2 r.bz", ["r", "r.bz"]),
    ("bunzip2 s", ["s.out", "s"]),
    ("unxz t.lzma", ["t", "t.lzma"]),
    ("xz --format=lzma u", ["u.lzma", "u"]),
    ("zstd --format=gzip v", ["v.gz"]),
    # git commands that change working-tree files
    ("git checkout -- a b", ["a", "b"]),
    ("git checkout HEAD~1 -- src/auth.py", ["src/auth.py"]),
    ("git checkout main", [":/"]),
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
    # wrappers' options with a value, and the folder env -C and sudo -D run a command in
    ("timeout --signal KILL 5 rm x", ["x"]),
    ("timeout -s KILL -k 1 5 rm x", ["x"]),
    ("sudo --user root rm -f x", ["x"]),
    ("nice --adjustment 5 touch f", ["f"]),
    ("env -C src rm auth.py", ["src/auth.py"]),
    ("env --chdir src touch f", ["src/f"]),
    ("sudo --chdir=src rm auth.py", ["src/auth.py"]),
    ("env -Csrc rm auth.py; touch g", ["src/auth.py", "g"]),
    ("env -S 'rm -f x' y", ["x", "y"]),
    ("env --split-string='A=1 rm x'", ["x"]),
    ("env -S 'rm \"my file\" # c'", ["my file"]),
    ("env -S '-C src rm f'", ["src/f"]),
    ("env -C d env -C e rm f", ["d/e/f"]),
    ("env -iC src rm f", ["src/f"]),
    ("sudo -nu U rm f", ["f"]),
    ("/usr/bin/env -C src rm f", ["src/f"]),
    ("env - rm f", ["f"]),
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
    # ... but a shell runs what it is given on its input
    ("bash <<EOF\nrm -f src/auth.py\nEOF\n", ["src/auth.py"]),
    ("sh -s <<'EOF' > log\ntouch a\nEOF\necho > b", ["log", "a", "b"]),
    ("bash -e <<-EOF\n\tcd src && echo x > f\n\tEOF", ["src/f"]),
    ("bash <<< 'rm x'", ["x"]),
    ("sudo -u bob -s <<'EOF'\nrm -f x\nEOF", ["x"]),
    ("sudo -i <<'EOF'\nrm -f x\nEOF", ["x"]),
    ("bash <<-EOF\n\tcat > x <<Y\n\tdata\n\tY\n\trm g\n\tEOF", ["x", "g"]),  # <<- strips
    ("cat <<EOF\n$(rm g) `touch h` \\$(rm no)\nEOF", ["g", "h"]),  # the shell expands it
    ("cat <<'EOF'\n$(rm g)\nEOF", []),
    ("bash <<EOF\nrm a\\\nb\nEOF", ["ab"]),  # the outer shell joins the lines first
    ("patch -p1 <<-EOF\n\t--- a/z\n\t+++ b/z\n\t@@ -1 +1 @@\n\t-a\n\t+b\n\tEOF", ["z"]),
    ("patch -p1 <<EOF\n--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-a\n+b\n\\ No newline at end of file\nEOF",
     ["x.py"]),  # a backslash before no $, ` or \ is kept as it is: the diff is read
    ("patch -p1 <<'EOF'\n--- a/src/auth.py\n+++ b/src/auth.py\n@@ -1 +1 @@\n-a\n+b\nEOF",
     ["src/auth.py"]),
    # what depends on the shell, or cannot be parsed, yields nothing (read_writes says
    # what it could not follow: tests below)
    ("echo $X > $F", []),
    ("echo x > \"$HOME/f\"", []),
    ("echo x > `name`", []),
    ("echo $(date) > stamp", ["stamp"]),
    ("echo \"$(echo a > b)\" > c", ["c", "b"]),
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


# -- issue 33 item 1 / issue 34 item 6: the forms the parser now reads -----------------

@pytest.fixture
def tree(tmp_path):
    """A folder to run commands in: src/auth.py, a patch naming it, a script file."""
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "auth.py").write_text("auth = 1\n")
    (tmp_path / "fix.diff").write_text(
        "diff --git a/src/auth.py b/src/auth.py\n--- a/src/auth.py\n+++ b/src/auth.py\n"
        "@@ -1 +1 @@\n-auth = 1\n+auth = 2\n")
    return tmp_path


@pytest.mark.parametrize("command, targets", [
    # git's whole-tree forms: TOP (":/") is the whole working tree, wherever it runs
    ("git reset --hard", [":/"]),
    ("git reset --hard HEAD~1", [":/"]),
    ("git reset HEAD~1", []),
    ("git stash", [":/"]),
    ("git stash pop", [":/"]),
    ("git stash push -m wip", [":/"]),
    ("git stash push -- src/auth.py", ["{top}/src/auth.py"]),
    ("git stash list", []),
    ("git checkout -f", [":/"]),
    ("git clean -fd", [":/"]),
    ("git clean -n", []),
    # the root (or ".") as a target
    ("git checkout .", ["{top}"]),
    ("git checkout -- .", ["{top}"]),
    ("git restore .", ["{top}"]),
    ("cd src && git restore .", ["{top}/src"]),
    ("git restore --staged src/auth.py", []),
    # checkout REV P, with and without --
    ("git checkout HEAD src/auth.py", ["{top}/src/auth.py"]),
    ("git checkout HEAD~2 -- src/auth.py", ["{top}/src/auth.py"]),
    ("git checkout src/auth.py", ["{top}/src/auth.py"]),
    ("git checkout -b topic", []),
    ("git checkout", []),
    ("git checkout --detach", []),
    # what moves the working tree to another commit's writes every file the two differ
    # in, which the gate cannot name: the whole tree
    ("git checkout main", [":/"]),
    ("git checkout -", [":/"]),
    ("git checkout -q --track origin/topic", [":/"]),
    ("git checkout -b topic origin/main", [":/"]),
    ("git checkout -btopic origin/main", [":/"]),
    ("git checkout --orphan gh-pages main", [":/"]),
    ("git checkout -p", [":/"]),
    ("git checkout -f -b topic", [":/"]),
    ("git switch main", [":/"]),
    ("git switch -", [":/"]),
    ("git switch --detach v1.0", [":/"]),
    ("git switch -c topic origin/main", [":/"]),
    ("git switch --orphan gh-pages", [":/"]),
    ("git switch -f -c topic", [":/"]),
    ("git switch -c topic", []),
    ("git switch --create topic", []),
    ("git switch --detach", []),
    ("git merge origin/main", [":/"]),
    ("git merge --abort", [":/"]),
    ("git merge --continue", []),
    ("git pull", [":/"]),
    ("git pull --rebase origin main", [":/"]),
    ("git rebase -i HEAD~3", [":/"]),
    ("git rebase --continue", [":/"]),
    ("git rebase --show-current-patch", []),
    ("git cherry-pick abc123", [":/"]),
    ("git cherry-pick --quit", []),
    ("git revert --no-edit HEAD", [":/"]),
    ("git bisect start HEAD v1.0", [":/"]),
    ("git bisect good", [":/"]),
    ("git bisect reset", [":/"]),
    ("git bisect log", []),
    ("git read-tree -m -u HEAD other", [":/"]),
    ("git read-tree HEAD", []),
    ("git merge-file src/auth.py base theirs", ["{top}/src/auth.py"]),
    ("git merge-file -L a -L b -L c src/auth.py base theirs", ["{top}/src/auth.py"]),
    ("git merge-file -p src/auth.py base theirs", []),
    ("git merge-base HEAD main", []),
    ("git -C src pull", [":/"]),
    ("git checkout other --", [":/"]),
    ("git checkout -b x origin/y --", [":/"]),
    ("git read-tree -mu HEAD other", [":/"]),
    ("git merge-file --marker-size 9 src/auth.py base theirs", ["{top}/src/auth.py"]),
    ("git --git-dir .git checkout other", [":/"]),
    ("git --work-tree . --namespace ns pull", [":/"]),
    ("git sparse-checkout set docs", [":/"]),
    ("git sparse-checkout list", []),
    ("git checkout-index -f -a", [":/"]),
    ("git checkout-index -f src/auth.py", ["{top}/src/auth.py"]),
    ("git checkout-index --prefix=/tmp/export/ -a", []),
    # forms of them that write no file of the tree
    ("git pull --dry-run . other", []),
    ("git bisect start --no-checkout other v1", []),
    ("git merge --help", []),
    ("git checkout HEAD", []),
    ("git checkout --detach HEAD", []),
    ("git checkout -b x HEAD", []),
    ("git switch -c x HEAD", []),
    ("git -C src checkout HEAD auth.py", ["{top}/src/auth.py"]),
    # patches: the files they name
    ("git apply fix.diff", [":/src/auth.py"]),
    ("git apply --cached fix.diff", []),
    ("git apply --check fix.diff", []),
    ("git am fix.diff", [":/src/auth.py"]),
    ("git apply < fix.diff", [":/"]),
    ("patch -p1 < fix.diff", ["{top}/src/auth.py"]),
    ("patch -p1 -i fix.diff", ["{top}/src/auth.py"]),
    ("patch src/auth.py fix.diff", ["{top}/src/auth.py"]),
    # links, in-place perl
    ("ln -sf /etc/passwd src/auth.py", ["{top}/src/auth.py"]),
    ("ln -s ../x src/", ["{top}/src/x"]),
    ("perl -pi -e 's/1/2/' src/auth.py", ["{top}/src/auth.py"]),
    ("perl -i.bak -pe 's/1/2/' src/auth.py", ["{top}/src/auth.py"]),
    ("perl -ne 'print' src/auth.py", []),
    # process substitution, $(…) and backquotes around a write
    ("echo x > >(tee src/auth.py)", ["{top}/src/auth.py"]),
    ("diff <(cat a) <(echo x > src/auth.py)", ["{top}/src/auth.py"]),
    ("echo $(echo x > src/auth.py)", ["{top}/src/auth.py"]),
    ("echo `echo x > src/auth.py`", ["{top}/src/auth.py"]),
    ("x=\"$(sed -i s/1/2/ src/auth.py)\"", ["{top}/src/auth.py"]),
    # variables given a plain value, $'…' quoting, brace forms, pushd, sh -o
    ("f=src/auth.py; echo x > $f", ["{top}/src/auth.py"]),
    ("export f=src/auth.py && echo x >> \"${f}\"", ["{top}/src/auth.py"]),
    ("echo x > $'src/auth.py'", ["{top}/src/auth.py"]),
    ("echo x > $'src/\\x61uth.py'", ["{top}/src/auth.py"]),
    ("touch src/{auth,other}.py", ["{top}/src/auth.py", "{top}/src/other.py"]),
    ("tee src/a{1..3}.py", ["{top}/src/a1.py", "{top}/src/a2.py", "{top}/src/a3.py"]),
    ("pushd src && echo x > auth.py", ["{top}/src/auth.py"]),
    ("pushd src; popd; echo x > f", ["{top}/f"]),
    ("bash -o pipefail -c 'echo x > src/auth.py'", ["{top}/src/auth.py"]),
    # a file's mode and owner are part of what its holder has
    ("chmod 000 src/auth.py", ["{top}/src/auth.py"]),
    ("chmod -x src/auth.py", ["{top}/src/auth.py"]),
    ("chmod -R u+w,g-w src", ["{top}/src"]),
    ("chmod --reference=README.md src/auth.py", ["{top}/src/auth.py"]),
    ("chown me:staff src/auth.py", ["{top}/src/auth.py"]),
    ("chgrp -h staff src/auth.py", ["{top}/src/auth.py"]),
    # (( … )) is arithmetic: its << shifts, and no here-document swallows what follows
    ("(( x = 1 << 2 ))\necho x > src/auth.py", ["{top}/src/auth.py"]),
    ("((x++)); rm src/auth.py", ["{top}/src/auth.py"]),
    ("((cd src; rm auth.py))", ["{top}/src/auth.py"]),  # two subshells, as bash reads it
    # busybox runs its applet; su and runuser run a shell's -c command, runuser -u a command
    ("busybox rm src/auth.py", ["{top}/src/auth.py"]),
    ("busybox sh -c 'echo x > src/auth.py'", ["{top}/src/auth.py"]),
    ("su -c 'rm src/auth.py' bob", ["{top}/src/auth.py"]),
    ("su - bob -lc 'echo x >> src/auth.py'", ["{top}/src/auth.py"]),
    ("su -s /bin/sh --command='rm src/auth.py' bob", ["{top}/src/auth.py"]),
    ("runuser -l bob -c 'rm src/auth.py'", ["{top}/src/auth.py"]),
    ("runuser -u bob -- rm src/auth.py", ["{top}/src/auth.py"]),
    ("sudo runuser -u bob sed -i s/1/2/ src/auth.py", ["{top}/src/auth.py"]),
    # the commands inside ${…} and $((…)) run too
    ("echo ${x:-$(rm src/auth.py)}", ["{top}/src/auth.py"]),
    ("echo \"${x/a/`rm src/auth.py`}\"", ["{top}/src/auth.py"]),
    ("echo $(( $(rm src/auth.py) + 1 ))", ["{top}/src/auth.py"]),
    # $((…)) whose inner ( closes early is a command; a comment inside $(…) hides no )
    ("echo $((rm src/auth.py) )", ["{top}/src/auth.py"]),
    ("echo $(echo hi # )'\nrm src/auth.py\n)'\\'", ["{top}/src/auth.py"]),
    ("cat ${HOME:+<(rm src/auth.py)}", ["{top}/src/auth.py"]),
    # a cd after a wrapper runs the program, or in a coprocess: not the shell's folder
    ("coproc cd src; rm auth.py", ["{top}/auth.py"]),
    ("nohup cd src; rm auth.py", ["{top}/auth.py"]),
    ("if cd src; then rm auth.py; fi", ["{top}/src/auth.py"]),
    ("command cd src && rm auth.py", ["{top}/src/auth.py"]),
    ("coproc touch src/auth.py", ["{top}/src/auth.py"]),
    ("setsid ionice -c 3 rm src/auth.py", ["{top}/src/auth.py"]),
    ("su --comm='rm src/auth.py' <<< true", ["{top}/src/auth.py"]),
    # wrappers with an operand before their command, or that run it as a shell's string
    ("flock /tmp/l rm src/auth.py", ["{top}/src/auth.py"]),  # the lock file: not changed
    ("flock -x /tmp/l -c 'echo x > src/auth.py'", ["{top}/src/auth.py"]),
    ("flock 9 && rm src/auth.py", ["{top}/src/auth.py"]),
    ("flock 9 rm src/auth.py", ["{top}/src/auth.py"]),  # a file named 9, then the command
    ("nice -n 5 flock -n 9 -c 'rm src/auth.py'", ["{top}/src/auth.py"]),
    ("taskset -c 0,1 rm src/auth.py", ["{top}/src/auth.py"]),
    ("taskset 0x3 sed -i s/1/2/ src/auth.py", ["{top}/src/auth.py"]),
    ("chrt -f 10 rm src/auth.py", ["{top}/src/auth.py"]),
    ("chrt --idle 0 rm src/auth.py", ["{top}/src/auth.py"]),
    ("numactl -C 0 --membind=0 rm src/auth.py", ["{top}/src/auth.py"]),
    ("unshare -r rm src/auth.py", ["{top}/src/auth.py"]),
    ("unshare --wd src rm auth.py", ["{top}/src/auth.py"]),
    ("script -qc 'rm src/auth.py' /dev/null", ["{top}/src/auth.py"]),
    ("script -c true src/auth.py", ["{top}/src/auth.py"]),  # its typescript
    ("script --command='rm src/auth.py'", ["{top}/typescript", "{top}/src/auth.py"]),
    ("script log.txt -q -c 'rm src/auth.py'", ["{top}/log.txt", "{top}/src/auth.py"]),
    ("script -q -o 10000 -c true out.log", ["{top}/out.log"]),
    ("script --timing=src/auth.py -c ls /dev/null", ["{top}/src/auth.py"]),
    ("script -tsrc/auth.py -c ls /dev/null", ["{top}/src/auth.py"]),
    ("watch -q 3 rm src/auth.py", ["{top}/src/auth.py"]),
    ("fakeroot -f /usr/bin/faked rm src/auth.py", ["{top}/src/auth.py"]),
    ("numactl -c 0 rm src/auth.py", ["{top}/src/auth.py"]),
    ("unshare -T --monotonic 5 rm src/auth.py", ["{top}/src/auth.py"]),
    ("faketime -f -30d rm src/auth.py", ["{top}/src/auth.py"]),
    ("faketime -p 1 '2020-01-01' rm src/auth.py", ["{top}/src/auth.py"]),
    ("strace -o src/auth.py -p 1234", ["{top}/src/auth.py"]),
    ("numactl --file src/auth.py --length 1M --interleave=all", ["{top}/src/auth.py"]),
    ("numactl -L 1M -S src/auth.py -m 0", ["{top}/src/auth.py"]),
    ("valgrind --tool=massif rm src/auth.py", ["{top}/src/auth.py"]),
    ("script -qtsrc/auth.py /dev/null -c ls", ["{top}/src/auth.py"]),
    ("script --comm 'rm src/auth.py' /dev/null", ["{top}/src/auth.py"]),
    ("time --out=src/auth.py ls", ["{top}/src/auth.py"]),
    ("faketime -f --date-prog=x touch src/auth.py", ["{top}/src/auth.py"]),
    ("time -o src/auth.py", ["{top}/src/auth.py"]),
    ("watch -n 1 rm src/auth.py", ["{top}/src/auth.py"]),
    ("watch 'echo x > src/auth.py'", ["{top}/src/auth.py"]),
    ("watch -x rm src/auth.py", ["{top}/src/auth.py"]),
    ("sg staff 'rm src/auth.py'", ["{top}/src/auth.py"]),
    ("sg staff touch src/auth.py", []),  # sg runs its one word: `touch`
    ("sg - staff -c 'rm src/auth.py'", ["{top}/src/auth.py"]),
    ("strace -f -e trace=file rm src/auth.py", ["{top}/src/auth.py"]),
    ("strace -o src/auth.py ls", ["{top}/src/auth.py"]),
    ("ltrace -o src/auth.py ls", ["{top}/src/auth.py"]),
    ("valgrind --log-file=src/auth.py ls", ["{top}/src/auth.py"]),
    ("valgrind -q --leak-check=full rm src/auth.py", ["{top}/src/auth.py"]),
    ("valgrind --tool=massif --massif-out-file=src/auth.py ls", ["{top}/src/auth.py"]),
    ("xvfb-run -a -s '-screen 0 1x1x8' rm src/auth.py", ["{top}/src/auth.py"]),
    ("xvfb-run -e src/auth.py ls", ["{top}/src/auth.py"]),
    ("dbus-run-session -- rm src/auth.py", ["{top}/src/auth.py"]),
    ("fakeroot -- rm src/auth.py", ["{top}/src/auth.py"]),
    ("fakeroot -s src/auth.py ls", ["{top}/src/auth.py"]),
    ("eatmydata unbuffer catchsegv rm src/auth.py", ["{top}/src/auth.py"]),
    ("torsocks -P 9050 proxychains4 -q rm src/auth.py", ["{top}/src/auth.py"]),
    ("faketime '2020-01-01 10:00' rm src/auth.py", ["{top}/src/auth.py"]),
    # formatters that rewrite what they are given, and downloads into a file
    ("black -l 100 src/auth.py", ["{top}/src/auth.py"]), ("black --check src", []),
    ("black --diff src/auth.py", []), ("cat x | black -", []),
    ("ruff format src/auth.py", ["{top}/src/auth.py"]), ("ruff format --check .", []),
    ("ruff check --fix --select I src", ["{top}/src"]), ("ruff check src", []),
    ("cd src && ruff format", ["{top}/src"]), ("ruff check --fix", ["{top}"]),
    ("ruff check -o src/auth.py .", ["{top}/src/auth.py"]),
    ("prettier --write src/auth.py", ["{top}/src/auth.py"]), ("prettier --check src", []),
    ("prettier -w --print-width 100 'src/**/*.py'", ["{top}/src"]),
    ("eslint --fix src/auth.py", ["{top}/src/auth.py"]), ("eslint src", []),
    ("eslint --fix", ["{top}"]), ("eslint --fix --fix-dry-run src", []),
    ("gofmt -w src/auth.py", ["{top}/src/auth.py"]), ("gofmt -l -d src", []),
    ("goimports -w -local x src", ["{top}/src"]),
    ("clang-format -i -style=file src/auth.py", ["{top}/src/auth.py"]),
    ("clang-format -style=file src/auth.py", []),
    ("rustfmt --edition 2021 src/auth.py", ["{top}/src"]),  # and the modules it names
    ("rustfmt --check src/auth.py", []), ("rustfmt --emit stdout src/auth.py", []),
    ("sort src/auth.py | sponge src/auth.py", ["{top}/src/auth.py"]),
    ("curl -sSLo src/auth.py https://example.com/a", ["{top}/src/auth.py"]),
    ("curl -H 'A: b' --output src/auth.py https://example.com/a", ["{top}/src/auth.py"]),
    ("curl -o - https://example.com/a", []), ("curl -s https://example.com/a", []),
    ("wget -qO src/auth.py https://example.com/a", ["{top}/src/auth.py"]),
    ("wget --output-document=src/auth.py https://example.com/a", ["{top}/src/auth.py"]),
    ("wget -qO- https://example.com/a", []),
    # the review's: values read as operands or operands as values, modes that write
    ("black -S src", ["{top}/src"]), ("black -t py311 src/auth.py", ["{top}/src/auth.py"]),
    ("black -c 'x=1'", []), ("ruff format --stdin-filename a.py", []),
    ("ruff check --fix-only .", ["{top}"]), ("ruff check --add-noqa .", ["{top}"]),
    ("ruff check --unsafe-fixes .", []),
    ("ruff --config pyproject.toml format src/auth.py", ["{top}/src/auth.py"]),
    ("prettier --loglevel warn --write src/auth.py", ["{top}/src/auth.py"]),
    ("eslint --fix --concurrency 4 src", ["{top}/src"]),
    ("eslint --cache src", ["{top}/.eslintcache"]),
    ("clang-format -i --style Google src/auth.py", ["{top}/src/auth.py"]),
    ("gofmt -w=false src", []), ("rustfmt src/main.rs", ["{top}/src"]),
    ("curl -LO https://example.com/d/auth.py", ["{top}/auth.py"]),
    ("curl --output-dir src -o auth.py https://example.com/a", ["{top}/src/auth.py"]),
    ("curl -D src/auth.py https://example.com/a", ["{top}/src/auth.py"]),
    ("wget https://example.com/d/auth.py", ["{top}/auth.py"]),
    ("wget -P src https://example.com/d/auth.py", ["{top}/src/auth.py"]),
    ("wget -q -o src/auth.py https://example.com/", ["{top}/src/auth.py", "{top}/index.html"]),
    ("wget -r https://example.com/d/", ["{top}/example.com"]),
    # a tool fetched or found by a package runner is read as the tool
    ("npx prettier --write src/auth.py", ["{top}/src/auth.py"]),
    ("npx -y prettier@3.3 -w src", ["{top}/src"]), ("npx prettier --check src", []),
    ("npx --package prettier -- prettier --write src", ["{top}/src"]),
    ("npx -c 'prettier --write src/auth.py'", ["{top}/src/auth.py"]),
    ("npm exec -- eslint --fix src", ["{top}/src"]), ("npm x eslint src", []),
    ("pnpm dlx prettier --write src", ["{top}/src"]),
    ("yarn dlx prettier --write src", ["{top}/src"]),
    ("bunx prettier --write src", ["{top}/src"]),
    ("npx @biomejs/biome@1 format --write src", []),
    ("uvx ruff format src/auth.py", ["{top}/src/auth.py"]),
    ("uvx ruff@0.6.9 check --fix src", ["{top}/src"]),
    ("uvx --from black==24.1 black src", ["{top}/src"]),
    ("uv tool run -q black src", ["{top}/src"]),
    ("uv run --with black black src/auth.py", ["{top}/src/auth.py"]),
    ("uv run --directory src ruff format auth.py", ["{top}/src/auth.py"]),
    ("uv --directory src run black .", ["{top}/src"]),
    ("uv run -m black src", ["{top}/src"]), ("uv run python -m black src", ["{top}/src"]),
    ("uv run --frozen ruff format --check src", []),
    ("uv run rm src/auth.py", ["{top}/src/auth.py"]),
    ("poetry run black src", ["{top}/src"]), ("poetry -C src run black .", ["{top}/src"]),
    ("pipx run black src/auth.py", ["{top}/src/auth.py"]),
    ("pipx run --spec black==24.1 black src", ["{top}/src"]),
    ("pipenv run black src", ["{top}/src"]),
    ("python -m black src", ["{top}/src"]), ("python3.11 -Bm ruff format src", ["{top}/src"]),
    ("python3 -X dev -m black src/auth.py", ["{top}/src/auth.py"]),
    ("python -m black --check src", []), ("python -m pytest src", []),
    ("python3 -c 'print(1)' src/auth.py", []), ("sudo -u x uvx black src", ["{top}/src"]),
    ("xargs prettier --check < list", []), ("xargs curl -s < urls", []),
    # the review's: npm exec and poetry take their options up to a later --; pnpm's -c
    # makes one shell line; the last folder counts; go's and cargo's other forms
    ("npm exec prettier -- --write src", ["{top}/src"]),
    ("npm exec --yes true -- prettier --write src", ["{top}/src"]),
    ("npx prettier -- --write src", []), ("pnpm dlx -c prettier --write src", ["{top}/src"]),
    ("poetry run sed -- -i s/1/2/ src/auth.py", ["{top}/src/auth.py"]),
    ("poetry run prettier --write --directory=src -- auth.py", ["{top}/src/auth.py"]),
    ("uv --directory x run --directory src black auth.py", ["{top}/src/auth.py"]),
    ("npx git+https://example.com/x.git clean -fdx", []),
    ("cargo fmt --all", [":/"]), ("cargo +nightly fmt", [":/"]),
    ("cargo -q fmt -p b", [":/"]), ("cargo fmt -- --emit stdout", []),
    ("go -C src fmt ./...", ["{top}/src"]), ("go fmt example.com/m/...", [":/"]),
    ("go fmt src/auth.go", ["{top}/src/auth.go"]), ("go fmt -mod mod ./src", ["{top}/src"]),
    # the second review's: npm exec's options after the command, a second --, pnpm's
    # line kept whole, go's -C after fmt, cargo from a subfolder, curl's other files
    ("npm exec black --check src/auth.py", ["{top}/src/auth.py"]),
    ("npm exec -- prettier --write -- src/auth.py", ["{top}/src/auth.py"]),
    ("npm exec black --workspace=pkgs/a src/auth.py", []),
    ("pnpm --package=x dlx -c 'echo a@b > src/auth.py'", ["{top}/src/auth.py"]),
    ("go fmt -C src auth.go", ["{top}/src/auth.go"]), ("go -C=src fmt", ["{top}/src"]),
    ("cd src && cargo fmt", [":/"]), ("poetry run black --dir=src -- auth.py", []),
    ("curl -o '#1/f' 'https://x/{a,b}'", ["{top}"]), ("curl -O 'https://x/[1-2].py'", ["{top}"]),
    ("curl --dump src/auth.py https://x", ["{top}/src/auth.py"]),
    ("curl --trace src/auth.py https://x", ["{top}/src/auth.py"]),
    ("curl -w '%output{src/auth.py}' https://x", ["{top}/src/auth.py"]),
    ("curl -K cfg https://x", [":/"]),
    ("parallel --joblog +src/auth.py echo ::: a", ["{top}/src/auth.py"]),
    ("xargs time -o src/auth.py echo", ["{top}/src/auth.py"]),
    # the third review's: curl's --url, an unparsable URL, a URL without its scheme, an
    # appending %output, a format file; a wrapper's file with no command; go -n=false
    ("curl -O --url https://x/d/auth.py", ["{top}/auth.py"]),
    ("curl -gO 'http://[::1/auth.py'", ["{top}/auth.py"]),
    ("curl -O example.com/src/auth.py", ["{top}/auth.py"]),
    ("curl -w '%output{>>src/auth.py}' https://x", ["{top}/src/auth.py"]),
    ("curl -w @fmt.txt https://x", [":/"]), ("xargs strace -o src/auth.py", ["{top}/src/auth.py"]),
    ("go fmt -n=false ./src", ["{top}/src"]),
    ("cargo fmt --manifest-path src/Cargo.toml -p y", [":/"]),
    ("go fmt ./...", ["{top}"]), ("go fmt ./src/...", ["{top}/src"]), ("go fmt", ["{top}"]),
    ("cd src && go fmt -x .", ["{top}/src"]), ("go fmt example.com/m/x", [":/"]),
    ("go fmt -n ./...", []), ("go build ./...", []), ("cargo fmt", [":/"]),
    ("cargo fmt --all -- --check", []), ("cargo fmt --check", []),
    ("cargo fmt --manifest-path src/Cargo.toml", ["{top}/src"]), ("cargo build", []),
    # every -o of a curl with several URLs, and a name it makes from a URL's glob
    ("curl -o a.txt https://x/a -o src/auth.py https://x/b", ["{top}/a.txt", "{top}/src/auth.py"]),
    ("curl --output=a https://x/a --output src/auth.py https://x/b", ["{top}/a", "{top}/src/auth.py"]),
    ("curl -o 'src/f_#1.py' 'https://x/{auth,b}.py'", ["{top}/src"]),
    ("curl -sD h1 -D src/auth.py https://x/a", ["{top}/h1", "{top}/src/auth.py"]),
    ("parallel --joblog src/auth.py --results out -j 2 wc -l ::: a", ["{top}/src/auth.py", "{top}/out"]),
    ("parallel -k echo ::: a b", []), ("parallel --dry-run rm ::: src/auth.py", []),
])
def test_forms_read_before_they_run(tree, command, targets):
    top = str(tree)
    expected = [t.format(top=top) for t in targets]
    assert read_writes(command, top) == expected


def test_a_git_pathspec_file_names_the_files_it_lists(tree):
    (tree / "list").write_text("src/auth.py\nREADME.md\n")
    top = str(tree)
    assert read_writes("git checkout HEAD --pathspec-from-file list", top) == \
        [f"{top}/src/auth.py", f"{top}/README.md"]
    assert read_writes("git checkout HEAD --pathspec-from-file=-", top) == [":/"]
    assert read_writes("git checkout HEAD --pathspec-from-file gone", top) == [":/"]
    assert read_writes("git restore --pathspec-from-file=list", top) == \
        [f"{top}/src/auth.py", f"{top}/README.md"]
    assert read_writes("git rm --pathspec-from-file list", top) == \
        [f"{top}/src/auth.py", f"{top}/README.md"]


def test_a_git_alias_is_read_as_the_command_it_expands_to(tree):
    """git runs an alias of a word that is none of its own commands: set in the
    repository's config, the user's, or with ``-c``, nested, it writes what its
    expansion writes; one that runs a shell command, or a chain git would not end, is
    not followed; a word no alias names (another program's subcommand) writes nothing."""
    import subprocess
    top = str(tree)
    subprocess.run(["git", "init", "-q", top], check=True)
    for name, value in (("co", "checkout"), ("up", "pull --rebase"), ("st", "status"),
                        ("back", "co"), ("sh", "!rm -f src/auth.py"), ("l1", "l2"),
                        ("l2", "l1"), ("status", "reset --hard")):
        subprocess.run(["git", "-C", top, "config", f"alias.{name}", value], check=True)
    subprocess.run(["git", "config", "--global", "alias.gco", "checkout"], check=True)
    auth = f"{top}/src/auth.py"
    for command, targets in (("git co main", [":/"]), ("git co -- src/auth.py", [auth]),
                             ("git up", [":/"]), ("git back main", [":/"]),
                             ("git gco src/auth.py", [auth]),
                             ("cd src && git co auth.py", [auth]),
                             ("git -c alias.wipe='reset --hard' wipe", [":/"]),
                             ("git st", []), ("git status", []), ("git lfs pull", [])):
        found = read_writes(command, top)
        assert (list(found), found.unfollowed) == (targets, []), command
    for command, why in (("git sh", "git sh: an alias that runs a shell command"),
                         ("git l1", "more than 8 git commands to look up"),
                         ("git -c alias.a1=a2 -c alias.a2=a1 a1", "aliases nested more than"),
                         ("git $CMD main", "a git command the shell computes ($CMD)"),
                         ("git -C nowhere co main", "git co: its alias cannot be looked up")):
        found = read_writes(command, top)
        assert any(why in note for note in found.unfollowed), (command, found.unfollowed)


def test_git_under_options_or_variables_that_move_its_tree_or_config(tree, tmp_path):
    """``-C DIR`` names the tree only without ``--work-tree``/``GIT_WORK_TREE``; an alias
    is looked up in git's config only where the command changes none of it; a command
    that would look up more than GIT_RUNS names is not followed."""
    import subprocess
    top, other = str(tree), str(tmp_path / "other")
    for repo in (top, other):
        subprocess.run(["git", "init", "-q", repo], check=True)
    subprocess.run(["git", "-C", top, "config", "alias.co", "checkout"], check=True)
    subprocess.run(["git", "-C", top, "config", "alias.repo", "checkout -f"], check=True)
    assert read_writes(f"git -C {other} pull", top) == [other]
    for command in (f"git -C {other} --work-tree={top} reset --hard",
                    f"GIT_WORK_TREE={top} git -C {other} reset --hard",
                    "git repo"):  # a command git 2.39 lacks: an alias here
        assert read_writes(command, top) == [":/"], command
    for command in ("git --config-env=alias.zz=ENV zz", "git -c include.path=f co main",
                    "HOME=/elsewhere git co main", "GIT_CONFIG_COUNT=1 git zz"):
        found = read_writes(command, top)
        assert any("change git's config" in note for note in found.unfollowed), command
    found = read_writes("; ".join(f"git q{i}" for i in range(20)), top)
    assert any("more than 8 git commands" in note for note in found.unfollowed)


def test_git_is_asked_in_the_environment_the_command_inherits(tree, tmp_path, monkeypatch):
    """A GIT_WORK_TREE the agent's shell inherits sends `git -C other reset --hard` to
    this tree: the gate asks git in that environment, not a cleaned one."""
    import subprocess
    top, other = str(tree), str(tmp_path / "other")
    for repo in (top, other):
        subprocess.run(["git", "init", "-q", repo], check=True)
    monkeypatch.setenv("GIT_WORK_TREE", top)
    assert read_writes(f"git -C {other} reset --hard", top) == [top]


def test_a_checkout_of_a_name_that_is_a_branch_and_a_folder_switches_branches(tree):
    """git's checkout takes a name that is both a commit and a file for the commit (the
    branch switch writes the whole tree); a file that names no commit is the file."""
    import subprocess
    top = str(tree)
    subprocess.run(["git", "init", "-q", top], check=True)
    subprocess.run(["git", "-C", top, "add", "-A"], check=True)
    subprocess.run(["git", "-C", top, "-c", "user.name=a", "-c", "user.email=a@b", "commit",
                    "-qm", "x"], check=True)
    subprocess.run(["git", "-C", top, "branch", "src"], check=True)
    assert read_writes("git checkout src", top) == [":/"]
    assert read_writes("git -C src checkout auth.py", top) == [f"{top}/src/auth.py"]
    assert read_writes("git checkout fix.diff", top) == [f"{top}/fix.diff"]
    assert read_writes("git checkout -- src", top) == [f"{top}/src"]


@pytest.mark.parametrize("command, reads_only", [
    ("ls -la src", True), ("cd src && ls", True), ("git status", True),
    ("git log --oneline | head -5", True), ("ls > /dev/null 2>&1", True),
    ("grep -rn x $DIR", True), ("find . -name '*.py'", True), ("/usr/bin/cat f", True),
    ("true", True), ("time -p ls", True), ("git --no-pager log -p", True),
    # a program that may write, or runs another; a redirection into a file
    ("./ls", False), ("/usr/bin/../../tmp/ls", False), ("ls > out", False), ("echo $(rm x)", False), ("python3 x.py", False),
    ("git -C x status", False), ("git diff --output=x", False), ("git grep -Ovim x", False),
    ("git commit -m x", False), ("find . -delete", False), ("find . -exec cat {} +", False),
    ("rg --pre cat x", False), ("ls; $CMD", False), ("cat a | sh", False),
    ("sed -n 1p f", False), ("awk 1 f", False), ("/usr/bin/time -o out ls", False),
    ("echo 'unclosed", False),
    # what sets the environment a reader runs in (a pager, a preloaded library)
    ("PAGER='rm -f x' git log", False), ("env LD_PRELOAD=./x.so ls", False),
    ("export GIT_EXTERNAL_DIFF=./x.sh; git diff", False), ("x=1; ls", False),
    ("git grep --open-files-in-pager=vi x", False), ("git grep --open x", False),
    # bash evaluates an array subscript for test -v and printf -v: $(…) in it runs
    ("test -v 'a[$(rm x)]'", False), ("[ -R 'a[$(rm x)]' ]", False),
    ("printf -v 'a[$(rm x)]' y", False), ("printf '%s' y", True), ("[ -f x ]", True),
    # an option the shell computes, to a reader that has options that write or run
    ("git diff $(echo --output=f)", False), ("find . $X", False), ("cat $F", True),
    # code taken from a value: a prompt expansion, an indirection, arithmetic, a subscript
    ("echo '$(rm x)'; echo ${_@P}", False), ("echo ${!_}", False), ("echo $((_))", False),
    ("echo ${a[_]}", False), ("cat <<EOF\n${_@P}\nEOF", False),
    ("echo ${#x} ${x:-${y:-z}} ${x//\\`/}", True),
    # the command a wrapper runs, and what the wrapper itself writes or runs
    ("taskset -c 0 ls", True), ("flock 9", True), ("chrt -p 5 123", True),
    ("valgrind -q ls", False), ("strace -o out ls", False), ("strace -E X=1 ls", False),
    ("strace -o '|rm x' ls", False), ("script -qc ls /dev/null", False),
    ("unshare -R /srv ls", False), ("flock 9 rm x", False), ("faketime -f -30d make", False),
    ("valgrind --tool=callgrind ls", False), ("strace -o t -p 1", False),
    ("valgrind ls", False), ("fakeroot -f ./x ls", False), ("fakeroot -l ./x.so ls", False),
    ("torsocks --shell ls", False), ("flock -x lk ls", True),
    # a runner's program is fetched by its name: not the machine's reader of that name
    ("npx ls", False), ("uvx cat f", False), ("uv run ls", False), ("poetry run ls", False),
    ("python -m black --check src", False), ("npx --unknown ls", False),
])
def test_a_command_of_programs_that_write_no_file_is_told_apart(tree, command, reads_only):
    """What the backstop need not note around (harness/hook.py): only programs that
    write no file whatever their options, no redirection into a file."""
    assert read_writes(command, str(tree)).reads_only is reads_only


def test_a_reader_found_in_a_folder_of_the_project_is_not_one(tree, monkeypatch):
    """A bare name is what the shell finds on PATH: an ``ls`` in the project's
    .venv/bin, before the system's, may write anything."""
    bin_dir = tree / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "ls").write_text("#!/bin/sh\necho x > src/auth.py\n")
    (bin_dir / "ls").chmod(0o755)
    assert read_writes("ls -la", str(tree)).reads_only is True
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    assert read_writes("ls -la", str(tree)).reads_only is False
    assert read_writes("echo x", str(tree)).reads_only is True  # bash's own


def test_gnu_times_output_file_is_a_write(tree):
    top = str(tree)
    assert read_writes("/usr/bin/time -o src/auth.py ls", top) == [f"{top}/src/auth.py"]
    assert read_writes("sudo time --output=t.log make", top) == [f"{top}/t.log"]


def test_a_device_path_is_one_after_normalising_and_the_shells_own_folder_is_here(tree):
    """/dev/../<tree>/src/auth.py is the file, not a device; /proc/self/cwd/ is the folder
    the command runs in (it was read as a device, or as a path outside the tree)."""
    top = str(tree)
    assert read_writes(f"rm /dev/..{top}/src/auth.py", top) == [f"{top}/src/auth.py"]
    assert read_writes("rm /proc/self/cwd/src/auth.py", top) == [f"{top}/src/auth.py"]
    assert read_writes("cd src && rm /proc/self/cwd/auth.py", top) == [f"{top}/src/auth.py"]
    assert read_writes("echo x > /dev/null; echo y > /proc/self/fd/2", top) == []


@pytest.mark.parametrize("command, why", [
    ("echo x > $F", "a name the shell computes ($F)"),
    ("echo x > \"$(name)\"", "a name the shell computes"),
    ("echo x > `name`", "a name the shell computes"),
    ("for f in src/auth.py; do echo x > $f; done", "a name the shell computes ($f)"),
    ("find . -name '*.py' -exec sed -i s/1/2/ {} +", "find -exec hands sed"),
    ("find src -delete", "find -delete"),
    ("ls src | xargs rm -f", "xargs hands rm"),
    ("git ls-files | xargs -I{} cp /dev/null {}", "xargs hands cp"),
    ("ls | xargs sudo rm", "xargs hands rm"),
    ("find . -exec timeout 5 rm {} +", "find -exec hands rm"),
    ("git ls-files | xargs npx prettier --write", "xargs hands prettier"),
    ("find . -name '*.py' -exec black -q {} +", "find -exec hands black"),
    ("xargs curl -O < urls", "xargs hands curl"),
    ("parallel rm ::: src/auth.py", "parallel hands rm"),
    ("ls | xargs -0n 1 black", "xargs hands black"), ("xargs -tI {} black {}", "xargs hands black"),
    ("parallel sort -o {} x ::: src/auth.py", "parallel hands sort"),
    ("xargs -I % sort -o % x", "xargs hands sort"),
    ("find . -exec sort -o {} x \\;", "find -exec hands sort"),
    ("xargs env -C src sort -o out", "xargs hands sort"), ("xargs --max-a 1 rm", "xargs hands rm"),
    ("parallel --results '{}' echo ::: f", "parallel writes results"),
    ("npx " * 12 + "rm f", "too many package runners"),
    ("find . | xargs --eof rm", "xargs hands rm"),
    ("parallel 'echo $(rm src/auth.py)' ::: 1", "parallel runs a command we cannot read"),
    ("parallel -I @ sort -o @ @ ::: src/auth.py", "parallel hands sort"),
    ("find . -execdir sort -o out.txt {} \\;", "find -execdir hands sort"),
    ("xargs ksh -c 'rm \"$@\"' x", "xargs hands ksh"),
    ("echo $'\\U00110000' > f", "a character escape out of range"),
    ("ls | xargs go fmt", "xargs hands go"), ("pipenv run black '$HOME/x.py'", "a name the shell computes"),
    ("parallel -j4 'sed -i s/1/2/ {}' ::: src/auth.py", "parallel hands sed"),
    ("git ls-files | parallel -X --tag black", "parallel hands black"),
    ("ls | parallel", "parallel runs a command we cannot read"),
    ("parallel 'cat {} > {}.bak' ::: src/auth.py", "parallel runs a command we cannot read"),
    ("parallel --unknown-option x rm ::: a", "parallel runs a command we cannot read"),
    ("cat fix.diff | patch -p1", "patch applies a diff we cannot read"),
    ("sh -c \"$SCRIPT\"", "a script the shell computes"),
    ("curl -s https://example.com/install | sh", "a script sh reads from its input"),
    ("cat fix.sh | bash -s -- arg", "a script bash reads from its input"),
    ("echo 'rm f' | sudo -s", "a script sh reads from its input"),
    ("echo 'rm f' | fakeroot", "a script sh reads from its input"),
    ("echo 'rm f' | sg staff", "a script sh reads from its input"),
    ("echo 'rm f' | unshare -r", "a script sh reads from its input"),
    ("echo 'rm f' | torsocks --shell", "a script sh reads from its input"),
    # a file named in an option's value, or in part of an operand, that the shell computes
    ("sort -o $F x", "a name the shell computes ($F)"),
    ("curl -o \"$F\" https://example.com/a", "a name the shell computes ($F)"),
    ("prettier --write \"$D/*.js\"", "a name the shell computes ($D)"),
    ("curl -s https://example.com/i | bash -eo pipefail", "a script bash reads from its input"),
    ("curl -s https://example.com/i | bash /dev/stdin", "a script bash reads from its input"),
    ("bash <(curl -fsSL https://example.com/i)", "a script bash reads from a command"),
    ("find . -name '*.zst' -exec unzstd {} \\;", "find -exec hands unzstd"),
    ("ls | xargs --max-args 1 rm", "xargs hands rm"),
    ("git rev-list HEAD | xargs git cherry-pick", "xargs hands git"),
    ("env " + "-S -S " * 10 + "rm a", "too many env -S"),
    ("cd $D && echo x > f", "after a cd we cannot follow"),
    ("env -C \"$D\" rm f", "after a cd we cannot follow"),
    ("bash <<< \"$CMD\"", "a script the shell computes"),
    ("bash <<EOF\nrm $f\nEOF", "a script the shell computes"),
    ("bash <<EOF\necho \\`rm f\\`\nEOF", "a script the shell computes"),
    ("patch -p1 <<< \"$DIFF\"", "patch applies a diff we cannot read"),
    ("patch -p1 <<EOF\n$(cat fix.diff)\nEOF", "patch applies a diff we cannot read"),
    ("echo 'unclosed > f", "unclosed '"),
    ("su bob", "a script su reads from its input"),
    ("su -c \"$CMD\" bob", "a script the shell computes (su)"),
    ("echo $((", "unclosed ("),
    ("echo " + "$(" * 20 + ")" * 20, "too deeply nested"),
    ("touch " + "x" * 300_000, "too long to read"),
    # an option by a start of several of tar's (tar refuses it): not taken for either
    ("tar --fi=src/auth.py -c a", "tar's option --fi may be any of several"),
    ("tar --re -cf x.tar src/auth.py", "tar's option --re may be any of several"),
])
def test_what_it_cannot_follow_inside_a_write_is_said(tree, command, why):
    found = read_writes(command, str(tree))
    assert any(why in note for note in found.unfollowed), found.unfollowed


@pytest.mark.parametrize("command", [
    # a value given in a way the walker does not follow is not the last plain one it saw
    "f=README.md; for f in src/auth.py; do rm $f; done",
    "f=README.md; read f <<<src/auth.py; rm $f",
    "f=README.md; printf -v f src/auth.py; rm $f",
    "f=README.md; printf -vf src/auth.py; rm $f",
    "g=src/auth.py; declare -n f=g; echo x > $f",
    "f=README.md; : ${f:=src/auth.py}; rm $f",
    "files='README.md src/auth.py'; rm $files",  # split into two names
])
def test_a_value_given_where_the_walker_cannot_follow_is_computed_not_stale(tree, command):
    found = read_writes(command, str(tree))
    assert not [p for p in found if p.endswith(("README.md", "/g"))], found
    assert any("a name the shell computes" in note for note in found.unfollowed), found


@pytest.mark.parametrize("command", [
    "f=; f+=src/auth.py; rm $f",  # appended
    "f=src/auth.py; (f=README.md); echo x > $f",  # a subshell's value ends with it
    "f=src/auth.py; echo $(f=README.md); echo x > $f",
    "f=src/auth.py; sh -c 'f=README.md'; echo x > $f",  # another shell's too
])
def test_values_are_followed_as_the_shell_keeps_them(tree, command):
    assert read_writes(command, str(tree)) == [str(tree / "src" / "auth.py")]


@pytest.mark.parametrize("command", [
    "echo $HOME", "ls $(pwd)", "diff <(cat a) <(cat b)", "python3 -c 'print(1)'",
    "make 2>&1 | tee /dev/null", "git status", "git diff HEAD", "grep -r x . | xargs echo",
    "find . -name '*.py' -print", "tar tzf a.tgz", "tar -cf - src", "tar -xOf a.tar",
    "tar -x --to-command=cat -f a.tar", "unzip -l a.zip", "unzip -lv a.zip", "unzip -c a.zip",
    "sort -u in", "gzip -c a", "zcat a.gz", "bash --version", "bash build.sh",
    "sh < setup.sh", "command -v bash", "command -v sh >/dev/null && echo ok",
    "bash deploy.sh -s staging", "bash setup.sh <<EOF\n$NAME\nEOF",
    "git commit -m \"$(cat <<'EOF'\nfix: don't break the build\nEOF\n)\"",
])
def test_commands_that_write_nothing_are_read_as_such(tree, command):
    found = read_writes(command, str(tree))
    assert found == [] and found.unfollowed == []


def test_the_home_directory_is_expanded():
    assert write_targets("touch ~/f") == [os.path.expanduser("~/f")]


def test_the_commands_read_without_the_rules_are_those_without_a_rule():
    """A command named in no rule is read without importing harness/shellrules.py (issue
    35: most shell calls write nothing); so every command with a rule is in RULED, or its
    writes would go unread and the gate would let them through."""
    from agent_registry.harness import shellrules, shellwrites
    assert set(shellrules.RULES) == shellwrites.RULED


def test_the_tokenizer_knows_each_runners_subcommands():
    """shelltokens.RUNNER_NAMES, which spares a command such as `npm test` importing
    shellrunners, names the first word of each runner's subcommands that run a command."""
    from agent_registry.harness.shellrunners import RUNNERS
    from agent_registry.harness.shelltokens import RUNNER_NAMES
    assert RUNNER_NAMES == {name: tuple(dict.fromkeys(s.split()[0] for s in subs)) or None
                            for name, (subs, _) in RUNNERS.items()}

