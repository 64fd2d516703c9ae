"""The backstop and a held file's mode (harness/after.py, putback.py): a command the gate
cannot read that changes only the permission bits of a held file (0600 to 0644, +x),
which git's two modes do not tell apart, gets them put back and its agent told, as a
change of the bytes is."""
from __future__ import annotations

import pytest

from test_backstop import around, held, inbox  # noqa: F401  (fixture)
from test_guard import agents  # noqa: F401  (fixture)


@pytest.mark.parametrize("harness", ["claude", "gemini"])
@pytest.mark.parametrize("before, command, after", [
    (0o600, "python3 -c \"import os; os.chmod('src/auth.py', 0o644)\"", 0o644),
    (0o644, "python3 -c \"import os; os.chmod('src/auth.py', 0o755)\"", 0o755),
    (0o640, "python3 -c \"import os; os.chmod('src/auth.py', 0o400)\"", 0o400),
])
def test_a_mode_only_change_of_a_held_file_is_put_back_and_told(held, harness, before,
                                                                 command, after):
    auth = held / "src" / "auth.py"
    auth.chmod(before)
    content = auth.read_bytes()
    text = around(harness, held, command)
    assert auth.stat().st_mode & 0o7777 == before and auth.read_bytes() == content
    assert text and "src/auth.py" in text and "kimi-1" in text, text
    assert f"{after:o}" in text and f"{before:o}" in text, text
    [message] = [m for m in inbox(held, "kimi-1") if m.get("subject") == "backstop"]
    assert "src/auth.py" in message["body"] and f"{after:o}" in message["body"]


def test_a_mode_left_as_it_was_says_nothing(held):
    auth = held / "src" / "auth.py"
    auth.chmod(0o600)
    assert around("claude", held, "python3 -c \"import os; os.chmod('src/auth.py', 0o600)\"") \
        is None
    assert auth.stat().st_mode & 0o7777 == 0o600
