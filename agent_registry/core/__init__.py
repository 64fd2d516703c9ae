"""The core: the Registry API (sessions, locks, the operation table, the transaction).

Importing the core registers its operations: one module per family, each operation with
its shape and its handler (sessions, locks, diary).  Messages (core/messages.py) register
when the commands that send them import it."""
from . import diary, locks, sessions  # noqa: F401  (they register the core's operations)
