"""Requests found by their LangGraph thread: retention forgets an expired thread's requests by it.

Revision ID: 0006
Revises: 0005
"""

from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Index ``phasegraph_requests.thread_key``."""
    with op.batch_alter_table("phasegraph_requests") as batch:
        batch.create_index("ix_phasegraph_requests_thread_key", ["thread_key"])


def downgrade() -> None:
    """Drop the index again."""
    with op.batch_alter_table("phasegraph_requests") as batch:
        batch.drop_index("ix_phasegraph_requests_thread_key")
