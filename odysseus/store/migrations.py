"""Ordered schema migrations over sqlite-utils (``m001_...`` style): the registry and the runner.

The migrations live in ``migrations_before_120`` and ``migrations_since_120``, imported at the end of
this module, which registers them in file order.

Each migration runs once, in order, recorded in ``_migrations``. Never edit a
migration that has shipped; add a new one. Their numbers increase in the order they run
(``tests/test_migration_names.py`` keeps it so). A shipped migration that is renamed keeps its
old name in ``RENAMED``: ``migrate`` renames its ``_migrations`` row first, so a database made
under the old name neither runs it again nor skips anything.
"""

from __future__ import annotations

import datetime
from typing import Callable, Dict, List

from sqlite_utils import Database

MIGRATIONS: List[Callable[[Database], None]] = []

#: old name -> name now, for shipped migrations renamed so that their numbers run in order
RENAMED: Dict[str, str] = {
    "m108_research": "m109_research",  # shared m108 with m108_memories
    "m109_workflows": "m110_workflows",
    "m105_code_tools_access": "m112_code_tools_access",  # ran after m111_page
}


def migration(fn: Callable[[Database], None]) -> Callable[[Database], None]:
    """Register ``fn`` as the next migration."""
    MIGRATIONS.append(fn)
    return fn


def migrate(db: Database) -> None:
    """Apply every migration not yet applied (the caller holds one transaction around all of them)."""
    if "_migrations" not in db.table_names():
        db.table("_migrations").create({"name": str, "applied_at": str}, pk="name")
    for old, new in RENAMED.items():  # rows written under an old name (a row under the new one wins)
        db.execute("update or ignore _migrations set name = ? where name = ?", [new, old])
        db.execute("delete from _migrations where name = ?", [old])
    done = {row["name"] for row in db["_migrations"].rows}
    for fn in MIGRATIONS:
        if fn.__name__ not in done:
            fn(db)
            db.execute(
                "insert into _migrations (name, applied_at) values (?, ?)",
                [fn.__name__, datetime.datetime.now(datetime.timezone.utc).isoformat()],
            )


# The migrations themselves, registered in order by importing their modules (each uses ``migration``).
from . import migrations_before_120, migrations_since_120  # noqa: E402,F401
