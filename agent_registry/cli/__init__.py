"""The command line: the click commands, the click-free fast paths, the console they
share (session, lock arguments, the one error -> exit map)."""
