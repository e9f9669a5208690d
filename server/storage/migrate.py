"""Bring the request store's tables to the newest schema with Alembic.

Every replica runs this at start-up. On Postgres an advisory lock makes replicas that start
together migrate one after the other (the later ones find nothing left to do). A database whose
tables were made before migrations existed (``create_all``, no ``alembic_version``) is stamped as
the baseline first, so its rows are migrated in place. A database already at the newest revision (every
start but the first) is recognised by one read of the version table, without importing Alembic.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import TYPE_CHECKING

import sqlalchemy as sa

if TYPE_CHECKING:
    from alembic.config import Config

MIGRATIONS = Path(__file__).resolve().parent / "migrations"
BASELINE = "0001"
#: Our own version table: the database may be an application's, with its own ``alembic_version``.
VERSION_TABLE = "phasegraph_alembic_version"
#: Any fixed number: the Postgres advisory lock every replica takes while it migrates.
LOCK_KEY = 7_349_120_311


def upgrade_schema(connection: sa.Connection) -> None:
    """Migrate the database ``connection`` is on to the newest revision (within its transaction)."""
    if connection.dialect.name == "postgresql":
        connection.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": LOCK_KEY})
    if _stored_revision(connection) == head_revision():
        return
    from alembic import command
    from alembic.runtime.migration import MigrationContext

    config = alembic_config(connection)
    context = MigrationContext.configure(connection, opts={"version_table": VERSION_TABLE})
    if context.get_current_revision() is None and sa.inspect(connection).has_table("phasegraph_requests"):
        command.stamp(config, _revision_of_unversioned(connection))
    command.upgrade(config, "head")


@functools.cache
def head_revision() -> str:
    """The newest revision: the highest numbered file in ``migrations/versions`` (``NNNN_what.py``).

    Revisions are numbered in the order they apply (each revises the one before it), so the file name
    tells the head without loading Alembic's script directory; a test checks the two agree.
    """
    numbers = [
        m.group(1) for f in (MIGRATIONS / "versions").iterdir() if (m := re.match(r"(\d{4})_", f.name))
    ]
    return max(numbers)


def _stored_revision(connection: sa.Connection) -> str | None:
    """The revision our version table records, or ``None`` without one."""
    if not sa.inspect(connection).has_table(VERSION_TABLE):
        return None
    return connection.execute(sa.text(f"SELECT version_num FROM {VERSION_TABLE}")).scalar()


def alembic_config(connection: sa.Connection | None = None) -> Config:
    """An Alembic configuration for the store's migrations (on ``connection`` when given)."""
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["connection"] = connection
    config.attributes["version_table"] = VERSION_TABLE
    return config


def _revision_of_unversioned(connection: sa.Connection) -> str:
    """The revision tables made without our version table have: ``create_all`` (0001), or 0002.

    0002 databases without one were migrated by a build that kept its version in Alembic's
    default table; their ``request_key`` column tells them apart.
    """
    columns = {c["name"] for c in sa.inspect(connection).get_columns("phasegraph_requests")}
    return "0002" if "request_key" in columns else BASELINE
