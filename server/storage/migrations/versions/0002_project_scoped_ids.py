"""Request and thread ids are scoped by project.

Two projects may now use the same request id or thread id without meeting: a request is keyed by
``request_key`` (``project/request``), and its LangGraph thread by ``thread_key``. Rows made before
keep their LangGraph thread (``thread_key`` = the old ``thread_id``), so their checkpoints stay
reachable.

Revision ID: 0002
Revises: 0001
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

KEY = sa.String(401)  # project id (200) + "/" + id (200); ids cannot contain "/"


def upgrade() -> None:
    """Rename the global ids to keys, fill them with project-scoped values, add the client ids back."""
    for table in ("phasegraph_events", "phasegraph_traces"):
        with op.batch_alter_table(table) as batch:
            batch.alter_column("request_id", new_column_name="request_key", type_=KEY)
    with op.batch_alter_table("phasegraph_requests") as batch:
        batch.alter_column("request_id", new_column_name="request_key", type_=KEY)
    with op.batch_alter_table("phasegraph_requests") as batch:  # a second batch: the name is free now
        batch.add_column(sa.Column("request_id", sa.String(200), nullable=True))
        batch.add_column(sa.Column("thread_key", KEY, nullable=True))
    # Events and traces first: they find their request by its old, global id.
    for table in ("phasegraph_events", "phasegraph_traces"):
        op.execute(
            f"UPDATE {table} SET request_key = COALESCE((SELECT r.project_id || '/' || r.request_key "
            f"FROM phasegraph_requests r WHERE r.request_key = {table}.request_key), request_key)"
        )
    op.execute(
        "UPDATE phasegraph_requests SET request_id = request_key, thread_key = thread_id, "
        "request_key = project_id || '/' || request_key"
    )
    with op.batch_alter_table("phasegraph_requests") as batch:
        batch.alter_column("request_id", existing_type=sa.String(200), nullable=False)
        batch.alter_column("thread_key", existing_type=KEY, nullable=False)
        batch.create_index(
            "ix_phasegraph_requests_project_request", ["project_id", "request_id"], unique=True
        )
        batch.create_index("ix_phasegraph_requests_project_thread", ["project_id", "thread_id"])
