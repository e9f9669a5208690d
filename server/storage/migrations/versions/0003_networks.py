"""Published agent networks: immutable, versioned snapshots per project (agent_network, seed 003).

Revision ID: 0003
Revises: 0002
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """One row per published version of a project's network."""
    op.create_table(
        "phasegraph_networks",
        sa.Column("project_id", sa.String(200), primary_key=True),
        sa.Column("name", sa.String(100), primary_key=True),
        sa.Column("version", sa.Integer, primary_key=True),
        sa.Column("digest", sa.String(64), nullable=False),
        sa.Column("snapshot", sa.Text, nullable=False),
        sa.Column("published_at", sa.Float, nullable=False),
    )


def downgrade() -> None:
    """Drop the table (its snapshots are lost)."""
    op.drop_table("phasegraph_networks")
