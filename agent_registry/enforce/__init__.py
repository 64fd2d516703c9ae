"""Enforcement: the git hooks' guard and their installation."""
