"""A job's life as a picture or text: built from its state history (``store.history``).

Below the components that show it (the API server's web view, the CLI, the simulator), above the
object helpers it reads pod states with.
"""
