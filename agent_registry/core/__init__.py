"""The core: the Registry API (sessions, locks, the operation table, the transaction)."""
