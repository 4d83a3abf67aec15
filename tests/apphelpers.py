"""Helpers for tests that build in-process apps (importable from any test directory)."""


def close_app(application) -> None:
    """Stop an in-process app's runs and close its SQLite file.

    Each open database holds three descriptors (db, -wal, -shm); left open across hundreds
    of tests they push later sockets past select()'s FD_SETSIZE in the fake servers.
    """
    application.extensions["odysseus.runs"].close()
    application.extensions["odysseus.store"].close()
