"""One running request per thread, as a fact of the database: a unique index over the running ones.

Starting a turn, resuming a request and answering an approval each checked that the thread was idle and
then wrote; two of them at the same moment both passed the check. With the index the second write fails,
whichever replica or worker makes it. A database that already holds several running requests of one
thread (left by that race) keeps the newest running and pauses the others, so nothing is lost: each can
be resumed once the thread is free.

Revision ID: 0008
Revises: 0007
"""

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

TABLE = "phasegraph_requests"
INDEX = "ux_phasegraph_requests_running_thread"
RUNNING = sa.text("status = 'running'")


def upgrade() -> None:
    """Pause all but the newest running request of each thread, then index the running ones."""
    op.execute(
        sa.text(
            f"UPDATE {TABLE} SET status = 'paused' WHERE status = 'running' AND EXISTS ("
            f"SELECT 1 FROM {TABLE} AS newer WHERE newer.thread_key = {TABLE}.thread_key "
            f"AND newer.status = 'running' AND (newer.created_at > {TABLE}.created_at "
            f"OR (newer.created_at = {TABLE}.created_at AND newer.request_key > {TABLE}.request_key)))"
        )
    )
    op.create_index(INDEX, TABLE, ["thread_key"], unique=True, sqlite_where=RUNNING, postgresql_where=RUNNING)


def downgrade() -> None:
    """Drop the index (the requests it paused stay paused)."""
    op.drop_index(INDEX, table_name=TABLE)
