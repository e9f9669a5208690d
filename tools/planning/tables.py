"""The project domain's tables, with the planner's plans and its usage and error ledgers.

Every table is partitioned by ``scope``: the phasegraph project of the request. The server's
migration 0004 creates them; ``PlanningStore.ensure_schema`` does for a database no server migrated.
"""

from __future__ import annotations

import sqlalchemy as sa

planning_metadata = sa.MetaData()

ID = 200


def _scope() -> sa.Column[str]:
    return sa.Column("scope", sa.String(ID), primary_key=True)


templates = sa.Table(
    "phasegraph_templates",
    planning_metadata,
    _scope(),
    sa.Column("template_id", sa.String(ID), primary_key=True),
    sa.Column("name", sa.String(ID), nullable=False),
    sa.Column("description", sa.Text, nullable=False),
    sa.Column("sections", sa.Text, nullable=False),
    sa.Column("task_seeds", sa.Text, nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
)
projects = sa.Table(
    "phasegraph_projects",
    planning_metadata,
    _scope(),
    sa.Column("project_id", sa.String(ID), primary_key=True),
    sa.Column("name", sa.String(ID), nullable=False),
    sa.Column("template_id", sa.String(ID), nullable=False),
    sa.Column("description", sa.Text, nullable=False),
    sa.Column("status", sa.String(20), nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("updated_at", sa.Float, nullable=False),
)
tasks = sa.Table(
    "phasegraph_tasks",
    planning_metadata,
    _scope(),
    sa.Column("task_id", sa.String(ID), primary_key=True),
    sa.Column("project_id", sa.String(ID), nullable=False),
    sa.Column("title", sa.Text, nullable=False),
    sa.Column("status", sa.String(20), nullable=False),
    sa.Column("priority", sa.String(20), nullable=False),
    sa.Column("blocker", sa.Text),
    sa.Column("updated_at", sa.Float, nullable=False),
)
documents = sa.Table(
    "phasegraph_context_documents",
    planning_metadata,
    _scope(),
    sa.Column("document_id", sa.String(ID), primary_key=True),
    sa.Column("project_id", sa.String(ID), nullable=False),
    sa.Column("title", sa.Text, nullable=False),
    sa.Column("body", sa.Text, nullable=False),
    sa.Column("version", sa.Integer, nullable=False),
    sa.Column("published_at", sa.Float, nullable=False),
)
plans = sa.Table(
    "phasegraph_plans",
    planning_metadata,
    _scope(),
    sa.Column("plan_id", sa.String(ID), primary_key=True),
    sa.Column("session_id", sa.String(ID), nullable=False),
    sa.Column("request_id", sa.String(ID), nullable=False),
    sa.Column("context_type", sa.String(30), nullable=False),
    sa.Column("execution_mode", sa.String(30), nullable=False),
    sa.Column("objective", sa.Text, nullable=False),
    sa.Column("status", sa.String(30), nullable=False),
    sa.Column("steps", sa.Text, nullable=False),
    sa.Column("review", sa.Text),
    sa.Column("summary", sa.Text, nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("updated_at", sa.Float, nullable=False),
)
usage = sa.Table(
    "phasegraph_usage",
    planning_metadata,
    _scope(),
    sa.Column("request_id", sa.String(ID), primary_key=True),
    sa.Column("call_index", sa.Integer, primary_key=True),
    sa.Column("session_id", sa.String(ID), nullable=False),
    sa.Column("user_id", sa.String(ID), nullable=False),
    sa.Column("context_type", sa.String(30), nullable=False),
    sa.Column("operation_type", sa.String(50), nullable=False),
    sa.Column("profile", sa.String(20), nullable=False),
    sa.Column("execution_mode", sa.String(30)),
    sa.Column("model", sa.String(ID), nullable=False),
    sa.Column("input_tokens", sa.Integer, nullable=False),
    sa.Column("output_tokens", sa.Integer, nullable=False),
    sa.Column("latency_ms", sa.Float, nullable=False),
    sa.Column("cost_usd", sa.Float, nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
    # added by migration 0007 (and by ensure_schema on a database no server migrated)
    sa.Column("status", sa.String(20), nullable=False, server_default="ok"),
    sa.Column("error_kind", sa.String(50)),
    sa.Index("ix_phasegraph_usage_scope_created", "scope", "created_at"),
)
errors = sa.Table(
    "phasegraph_errors",
    planning_metadata,
    _scope(),
    sa.Column("request_id", sa.String(ID), primary_key=True),
    sa.Column("error_index", sa.Integer, primary_key=True),
    sa.Column("session_id", sa.String(ID), nullable=False),
    sa.Column("user_id", sa.String(ID), nullable=False),
    sa.Column("component", sa.String(50), nullable=False),
    sa.Column("stage", sa.String(50), nullable=False),
    sa.Column("tool_name", sa.String(ID)),
    sa.Column("context_type", sa.String(30), nullable=False),
    sa.Column("execution_mode", sa.String(30)),
    sa.Column("kind", sa.String(50), nullable=False),
    sa.Column("message", sa.Text, nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Index("ix_phasegraph_errors_scope_created", "scope", "created_at"),
)
