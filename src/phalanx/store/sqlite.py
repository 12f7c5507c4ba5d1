"""SQLite persistence for the Store: one row per object.

Every write is one transaction (the object row plus the resourceVersion
counter), or, under group commit, every batch of writes is (``write_batch``,
store/commit.py); so a crash leaves the state as of the last committed
transaction, never half of one. A write is on disk (``synchronous``, below)
before its watch events are sent or the API acknowledges it; under group
commit the store's reads may see it while its transaction is in flight.
"""
from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Iterator

_SCHEMA = """
CREATE TABLE IF NOT EXISTS objects (
    kind      TEXT NOT NULL,
    namespace TEXT NOT NULL,      -- '' for cluster-scoped objects
    name      TEXT NOT NULL,
    rv        INTEGER NOT NULL,
    json      TEXT NOT NULL,
    PRIMARY KEY (kind, namespace, name)
);
CREATE TABLE IF NOT EXISTS meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
"""


# Durability of a commit (SQLite WAL mode):
# - NORMAL: the commit is in the WAL, in the OS page cache, when it returns. It
#   survives a crash or SIGKILL of this process, but an OS crash or power loss
#   can lose the last commits (the database stays consistent).
# - FULL: the WAL is fsync'ed at every commit, so an acknowledged write survives
#   power loss too.
# The contract is "every accepted write is durable before it is acknowledged":
# FULL is the only mode that keeps it whatever fails (the crash test only kills
# processes, which NORMAL would survive too), so it is the default. It costs
# one fsync per transaction (benchmarks/store_throughput.py measures both modes).
SYNCHRONOUS_MODES = ("FULL", "NORMAL")
DEFAULT_SYNCHRONOUS = "FULL"


class SqliteBackend:
    """The store's durable copy. Used from one thread at a time (the store's, or its commit worker's)."""

    def __init__(self, path: Path, synchronous: str = DEFAULT_SYNCHRONOUS) -> None:
        if synchronous not in SYNCHRONOUS_MODES:
            raise ValueError(f"synchronous: must be one of {', '.join(SYNCHRONOUS_MODES)}, not {synchronous!r}")
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        # check_same_thread=False: the store may be built on one thread and used
        # on the event-loop thread; it is never used from two threads at once.
        self._db = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute(f"PRAGMA synchronous={synchronous}")
        self.synchronous = synchronous
        self._db.executescript(_SCHEMA)

    def load(self) -> tuple[int, Iterator[tuple[str, str, str, int, str]]]:
        """The saved resourceVersion counter and every stored row."""
        row = self._db.execute("SELECT value FROM meta WHERE key = 'rv'").fetchone()
        counter = int(row[0]) if row else 0
        max_rv = self._db.execute("SELECT MAX(rv) FROM objects").fetchone()[0] or 0
        rows = self._db.execute("SELECT kind, namespace, name, rv, json FROM objects ORDER BY rv")
        return max(counter, int(max_rv)), rows

    def put(self, kind: str, namespace: str | None, name: str, rv: int, raw: str) -> None:
        self._write(
            "INSERT OR REPLACE INTO objects (kind, namespace, name, rv, json) VALUES (?, ?, ?, ?, ?)",
            (kind, namespace or "", name, rv, raw),
            rv,
        )

    def delete(self, kind: str, namespace: str | None, name: str, rv: int) -> None:
        self._write(
            "DELETE FROM objects WHERE kind = ? AND namespace = ? AND name = ?",
            (kind, namespace or "", name),
            rv,
        )

    def _write(self, sql: str, params: tuple, rv: int) -> None:
        db = self._db
        db.execute("BEGIN")
        try:
            db.execute(sql, params)
            db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('rv', ?)", (str(rv),))
            db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise

    def write_batch(self, ops: list[tuple[str, str | None, str, int, str | None]]) -> None:
        """Many writes in one transaction, so one fsync (group commit): each op is
        ``(kind, namespace, name, rv, json)``, json None deleting the row; the
        counter becomes the last op's rv. All or nothing. May run on a worker
        thread, never on two threads at once."""
        if not ops:
            return
        db = self._db
        db.execute("BEGIN")
        try:
            for kind, namespace, name, _rv, raw in ops:
                if raw is None:
                    db.execute("DELETE FROM objects WHERE kind = ? AND namespace = ? AND name = ?",
                               (kind, namespace or "", name))
                else:
                    db.execute("INSERT OR REPLACE INTO objects (kind, namespace, name, rv, json) VALUES (?, ?, ?, ?, ?)",
                               (kind, namespace or "", name, _rv, raw))
            db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('rv', ?)", (str(ops[-1][3]),))
            db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise

    def close(self) -> None:
        self._db.close()
