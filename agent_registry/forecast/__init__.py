"""The conflict forecast (issue 27, docs/overlap.md): which live sessions, working on
other branches or worktrees of this repository, have changed the same paths since their
merge base, and telling them.

- ``gate.py``: which sessions count, and a claim's cheap first question (anyone elsewhere?);
- ``sides.py``: where each live session works (its worktree here, with the uncommitted
  changes as a temporary commit; another clone's pushed branch) and the commit it stands on;
- ``merges.py``: one ``git merge-tree --write-tree --stdin`` for every pair not seen
  before, cached by the pair of tips; the changed-path fallback for git < 2.38;
- ``overlap.py``: the library calls, ``overlaps`` and ``changed_elsewhere``;
- ``tell.py``: one message to each session of a pair, once per overlap.
"""
