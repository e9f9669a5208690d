"""LangGraph Server API: threads that exist before their first run, and each request's run options.

``phasegraph_threads`` keeps the threads ``POST /threads`` creates (with their metadata), so a
client can create a thread, look it up and search for it before any run. ``options`` on a request
keeps what a LangGraph API run asked for (``interrupt_before``/``interrupt_after``, the checkpoint it
started from, its metadata), so any replica that takes the run over drives it the same way.

Revision ID: 0005
Revises: 0004
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

KEY = sa.String(401)


def upgrade() -> None:
    """Add the threads table and the requests' ``options`` column (empty for existing rows)."""
    op.create_table(
        "phasegraph_threads",
        sa.Column("thread_key", KEY, primary_key=True),
        sa.Column("thread_id", sa.String(200), nullable=False),
        sa.Column("project_id", sa.String(200), nullable=False, index=True),
        sa.Column("metadata", sa.JSON, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("updated_at", sa.Float, nullable=False),
    )
    with op.batch_alter_table("phasegraph_requests") as batch:
        batch.add_column(sa.Column("options", sa.JSON, nullable=False, server_default="{}"))


def downgrade() -> None:
    """Drop them again."""
    with op.batch_alter_table("phasegraph_requests") as batch:
        batch.drop_column("options")
    op.drop_table("phasegraph_threads")
