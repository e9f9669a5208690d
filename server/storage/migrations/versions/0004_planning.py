"""The planner's project domain, plans, and usage and error ledgers (planner, seed 002).

A CLI run may have created these tables already (``PlanningStore.ensure_schema``) on a database the
server had not migrated yet: such tables are kept.

Revision ID: 0004
Revises: 0003
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

ID = 200


def _tables() -> dict[str, list[sa.Column]]:
    def scope() -> sa.Column:
        return sa.Column("scope", sa.String(ID), primary_key=True)

    def text(name: str, nullable: bool = False) -> sa.Column:
        return sa.Column(name, sa.Text, nullable=nullable)

    def string(name: str, size: int = ID, nullable: bool = False, key: bool = False) -> sa.Column:
        return sa.Column(name, sa.String(size), nullable=nullable, primary_key=key)

    def number(name: str, kind: type = sa.Float, key: bool = False) -> sa.Column:
        return sa.Column(name, kind, nullable=False, primary_key=key)

    return {
        "phasegraph_templates": [
            scope(),
            string("template_id", key=True),
            string("name"),
            text("description"),
            text("sections"),
            text("task_seeds"),
            number("created_at"),
        ],
        "phasegraph_projects": [
            scope(),
            string("project_id", key=True),
            string("name"),
            string("template_id"),
            text("description"),
            string("status", 20),
            number("created_at"),
            number("updated_at"),
        ],
        "phasegraph_tasks": [
            scope(),
            string("task_id", key=True),
            string("project_id"),
            text("title"),
            string("status", 20),
            string("priority", 20),
            text("blocker", nullable=True),
            number("updated_at"),
        ],
        "phasegraph_context_documents": [
            scope(),
            string("document_id", key=True),
            string("project_id"),
            text("title"),
            text("body"),
            number("version", sa.Integer),
            number("published_at"),
        ],
        "phasegraph_plans": [
            scope(),
            string("plan_id", key=True),
            string("session_id"),
            string("request_id"),
            string("context_type", 30),
            string("execution_mode", 30),
            text("objective"),
            string("status", 30),
            text("steps"),
            text("review", nullable=True),
            text("summary"),
            number("created_at"),
            number("updated_at"),
        ],
        "phasegraph_usage": [
            scope(),
            string("request_id", key=True),
            number("call_index", sa.Integer, key=True),
            string("session_id"),
            string("user_id"),
            string("context_type", 30),
            string("operation_type", 50),
            string("profile", 20),
            string("execution_mode", 30, nullable=True),
            string("model"),
            number("input_tokens", sa.Integer),
            number("output_tokens", sa.Integer),
            number("latency_ms"),
            number("cost_usd"),
            number("created_at"),
        ],
        "phasegraph_errors": [
            scope(),
            string("request_id", key=True),
            number("error_index", sa.Integer, key=True),
            string("session_id"),
            string("user_id"),
            string("component", 50),
            string("stage", 50),
            string("tool_name", nullable=True),
            string("context_type", 30),
            string("execution_mode", 30, nullable=True),
            string("kind", 50),
            text("message"),
            number("created_at"),
        ],
    }


def upgrade() -> None:
    """Create each table the database does not have yet (with the ledgers' scope/time indexes)."""
    existing = set(sa.inspect(op.get_bind()).get_table_names())
    for name, columns in _tables().items():
        if name in existing:
            continue
        op.create_table(name, *columns)
        if name in ("phasegraph_usage", "phasegraph_errors"):
            op.create_index(f"ix_{name}_scope_created", name, ["scope", "created_at"])


def downgrade() -> None:
    """Drop the tables (their rows are lost)."""
    for name in reversed(list(_tables())):
        op.drop_table(name)
