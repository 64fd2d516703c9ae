#!/usr/bin/env bash
# Two agents, each in its own linked worktree of one repository, race for src/auth.py.
# Run by `make demo` (which puts .venv/bin on PATH). Everything happens in a temporary
# directory that is removed at the end.
set -euo pipefail

if ! command -v agent-registry >/dev/null 2>&1; then
    echo "agent-registry is not on PATH: run this through 'make demo'" >&2
    exit 1
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/agent-registry-demo.XXXXXX")
trap 'rm -rf "$work"' EXIT
unset AGENT_REGISTRY_SESSION GIT_DIR GIT_WORK_TREE GIT_INDEX_FILE
export AGENT_REGISTRY_TZ=${AGENT_REGISTRY_TZ:-UTC}
# the demo's throwaway repositories stay off the user's list of repositories (status --repos)
export AGENT_REGISTRY_HOME="$work/home"
# an identity for the demo project's own first commit, whatever this machine's git config
export GIT_AUTHOR_NAME="Demo" GIT_AUTHOR_EMAIL="demo@example.com"
export GIT_COMMITTER_NAME="Demo" GIT_COMMITTER_EMAIL="demo@example.com"

bold="" plain=""
if [ -t 1 ]; then bold=$(printf '\033[1m') plain=$(printf '\033[0m'); fi
say() { printf '\n%s== %s%s\n' "$bold" "$*" "$plain"; }
# show and run a command as one agent, from its worktree
as() {
    local who=$1 dir=$2 shown="" arg; shift 2
    for arg in "$@"; do
        case $arg in *" "*) shown+=" \"$arg\"" ;; *) shown+=" $arg" ;; esac
    done
    printf '[%s] $ agent-registry%s\n' "$who" "$shown"
    (cd "$dir" && agent-registry "$@") 2>&1 | sed 's/^/    /'
}

say "A project with src/auth.py, and two linked worktrees of it"
project=$work/project
git init -q -b main "$project"
mkdir "$project/src"
printf 'def login(user, password):\n    return False\n' > "$project/src/auth.py"
git -C "$project" add -A
git -C "$project" -c core.hooksPath=/dev/null commit -q -m "initial"
git -C "$project" worktree add -q -b kimi-work "$work/kimi"
git -C "$project" worktree add -q -b claude-work "$work/claude"
git -C "$project" worktree list | sed 's/^/    /'

say "Each agent registers from its own worktree (this script stands in for both agents' processes)"
as kimi "$work/kimi" register kimi-1 Kimi 2.7 "Refactoring auth" --pid $$
as claude "$work/claude" register claude-1 --provider Claude --ai-version 4 \
    --working-on "Adding OAuth login" --pid $$

say "Both claim src/auth.py at the same instant"
go=$work/go
for agent in kimi claude; do
    (
        while [ ! -e "$go" ]; do :; done  # a start line: both begin together
        cd "$work/$agent"
        set +e
        agent-registry lock acquire src/auth.py --session "$agent-1" >"$work/$agent.out" 2>&1
        echo $? >"$work/$agent.rc"
    ) &
done
touch "$go"
wait
for agent in kimi claude; do
    printf '[%s] exit %s:\n' "$agent" "$(cat "$work/$agent.rc")"
    sed 's/^/    /' "$work/$agent.out"
done
if [ "$(cat "$work/kimi.rc")" = 0 ]; then
    winner=kimi loser=claude
else
    winner=claude loser=kimi
fi
if [ "$(cat "$work/$loser.rc")" != 1 ] || [ "$(cat "$work/$winner.rc")" != 0 ]; then
    echo "expected exactly one winner (exit 0) and one refusal (exit 1)" >&2
    exit 1
fi
echo "-> $winner-1 won; $loser-1 was refused and told who holds the file"

say "What the loser sees"
as "$loser" "$work/$loser" status
as "$loser" "$work/$loser" lock check src/auth.py --session "$loser-1" ||
    echo "-> exit $?: another session holds it, so $loser-1 leaves the file alone"

say "The winner logs its work and finishes: its locks are released, then its session ends"
as "$winner" "$work/$winner" context log "$winner-1" "split login() into password and token paths"
as "$winner" "$work/$winner" finish "$winner-1"

say "The loser claims again, and wins"
as "$loser" "$work/$loser" lock acquire src/auth.py --session "$loser-1"
as "$loser" "$work/$loser" lock list

say "The audit trail: the registry branch, its lock shards and this clone's ref"
# sessions are on agent-registry, claims on agent-registry-shards/NN, heartbeats and
# diary lines on agent-registry-clones/<clone> (docs/shards.md)
git -C "$project" log --oneline agent-registry --branches='agent-registry-shards/*' \
    --branches='agent-registry-clones/*' | sed 's/^/    /'

say "registry.md on the branch (what a git forge shows)"
git -C "$project" show agent-registry:registry.md | sed 's/^/    /'

say "The project's own branches, index and working tree were never touched"
git -C "$project" status --short --branch | sed 's/^/    /'
echo
echo "demo done; removing $work"
