"""Usage rows say how each model call ended: ``status`` (ok, error, timeout) and ``error_kind``.

Failed model calls are usage rows too. Existing rows were all calls that answered (``ok``). A CLI
run may have added the columns already (``PlanningStore.ensure_schema``): those are kept.

Revision ID: 0007
Revises: 0006
"""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

TABLE = "phasegraph_usage"


def _columns() -> list[sa.Column]:
    return [
        sa.Column("status", sa.String(20), nullable=False, server_default="ok"),
        sa.Column("error_kind", sa.String(50), nullable=True),
    ]


def upgrade() -> None:
    """Add the columns the usage table lacks."""
    have = {column["name"] for column in sa.inspect(op.get_bind()).get_columns(TABLE)}
    missing = [column for column in _columns() if column.name not in have]
    if missing:
        with op.batch_alter_table(TABLE) as batch:
            for column in missing:
                batch.add_column(column)


def downgrade() -> None:
    """Drop them again (failed calls' rows stay, without their status)."""
    with op.batch_alter_table(TABLE) as batch:
        for column in reversed(_columns()):
            batch.drop_column(column.name)
