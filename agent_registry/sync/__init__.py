"""Sync with a remote: the remote committer (fetch, replay, push), reading a remote, gc."""
