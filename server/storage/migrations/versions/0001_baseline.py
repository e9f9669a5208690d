"""Baseline: request records, event logs and traces keyed by a global request id.

Revision ID: 0001
Revises:
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create the tables as the first release made them with ``create_all``."""
    op.create_table(
        "phasegraph_requests",
        sa.Column("request_id", sa.String(200), primary_key=True),
        sa.Column("project_id", sa.String(200), nullable=False, index=True),
        sa.Column("protocol", sa.String(100), nullable=False),
        sa.Column("thread_id", sa.String(200), nullable=False, index=True),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("settings", sa.JSON, nullable=False),
        sa.Column("last_seq", sa.Integer, nullable=False),
        sa.Column("pause_requested", sa.Boolean, nullable=False),
        sa.Column("cancel_requested", sa.Boolean, nullable=False),
        sa.Column("owner", sa.String(100), nullable=True),
        sa.Column("heartbeat_at", sa.Float, nullable=True),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("updated_at", sa.Float, nullable=False),
    )
    op.create_table(
        "phasegraph_events",
        sa.Column("request_id", sa.String(200), primary_key=True),
        sa.Column("seq", sa.Integer, primary_key=True),
        sa.Column("data", sa.Text, nullable=False),
    )
    op.create_table(
        "phasegraph_traces",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("request_id", sa.String(200), nullable=False, index=True),
        sa.Column("data", sa.Text, nullable=False),
    )
