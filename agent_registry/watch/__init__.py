"""The watchdog: the event follower and its notifications."""
