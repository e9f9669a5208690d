"""Bring the request store's tables to the newest schema with Alembic.

Every replica runs this at start-up. On Postgres an advisory lock makes replicas that start
together migrate one after the other (the later ones find nothing left to do). A database whose
tables were made before migrations existed (``create_all``, no ``alembic_version``) is stamped as
the baseline first, so its rows are migrated in place.
"""

from __future__ import annotations

from pathlib import Path

import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext

MIGRATIONS = Path(__file__).parent / "migrations"
BASELINE = "0001"
#: Any fixed number: the Postgres advisory lock every replica takes while it migrates.
LOCK_KEY = 7_349_120_311


def upgrade_schema(connection: sa.Connection) -> None:
    """Migrate the database ``connection`` is on to the newest revision (within its transaction)."""
    if connection.dialect.name == "postgresql":
        connection.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": LOCK_KEY})
    config = alembic_config(connection)
    current = MigrationContext.configure(connection).get_current_revision()
    if current is None and sa.inspect(connection).has_table("phasegraph_requests"):
        command.stamp(config, BASELINE)
    command.upgrade(config, "head")


def alembic_config(connection: sa.Connection | None = None) -> Config:
    """An Alembic configuration for the store's migrations (on ``connection`` when given)."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["connection"] = connection
    return config
