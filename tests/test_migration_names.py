"""Migration names say the order they run in, and renaming shipped ones breaks no existing database."""

from __future__ import annotations

import functools
import re

import pytest
from sqlite_utils import Database

from odysseus.store import migrations
from odysseus.store.migrations import MIGRATIONS, RENAMED, migrate

#: the names these migrations shipped under (written out here: the databases out there hold them)
OLD_NAME = {
    "m109_research": "m108_research",
    "m110_workflows": "m109_workflows",
    "m112_code_tools_access": "m105_code_tools_access",
}


def test_numbers_increase_in_the_order_migrations_run():
    names = [fn.__name__ for fn in MIGRATIONS]
    assert all(re.fullmatch(r"m\d{3}_[a-z0-9_]+", name) for name in names), names
    numbers = [int(name[1:4]) for name in names]
    assert numbers == sorted(numbers) and len(set(numbers)) == len(numbers), names


def test_renamed_migrations_exist_under_their_new_names_only():
    names = {fn.__name__ for fn in MIGRATIONS}
    assert set(RENAMED.values()) <= names and not set(RENAMED) & names
    assert all(RENAMED.get(old) == new for new, old in OLD_NAME.items())


@pytest.fixture
def recorded(monkeypatch):
    """The migrations, each recording its name when it runs."""
    ran = []

    def recording(fn):
        @functools.wraps(fn)
        def run(db):
            ran.append(fn.__name__)
            fn(db)

        return run

    monkeypatch.setattr(migrations, "MIGRATIONS", [recording(fn) for fn in MIGRATIONS])
    return ran


def _old_database(path, last: str) -> Database:
    """A database as the code before the renames left it: migrations up to ``last``, rows under the old names."""
    db = Database(str(path))
    db.table("_migrations").create({"name": str, "applied_at": str}, pk="name")
    for fn in MIGRATIONS:
        fn(db)
        db["_migrations"].insert({"name": OLD_NAME.get(fn.__name__, fn.__name__), "applied_at": "then"})
        if fn.__name__ == last:
            break
    return db


def test_a_database_made_under_the_old_names_runs_nothing_again(tmp_path, recorded):
    db = _old_database(tmp_path / "old.db", MIGRATIONS[-1].__name__)
    schema = db.execute("select type, name, sql from sqlite_master order by name").fetchall()
    assert {row["name"] for row in db["_migrations"].rows} >= set(OLD_NAME.values())
    migrate(db)
    assert recorded == []
    assert [row["name"] for row in db["_migrations"].rows_where(order_by="name")] == sorted(
        fn.__name__ for fn in MIGRATIONS
    )
    assert db.execute("select type, name, sql from sqlite_master order by name").fetchall() == schema


def test_an_older_database_still_runs_what_it_lacks(tmp_path, recorded):
    """Made before the code-tools migration existed (it ran after m111_page): it runs now, once."""
    names = [fn.__name__ for fn in MIGRATIONS]
    db = _old_database(tmp_path / "older.db", "m111_page")
    migrate(db)
    assert recorded == names[names.index("m111_page") + 1 :]
    assert "code_tools_access" in db.table_names()
    migrate(db)
    assert recorded == names[names.index("m111_page") + 1 :]  # and never again
