"""Stored plans: one row per plan, saved again (idempotently) as its status changes."""

from __future__ import annotations

import json
import time
from typing import Any, get_args

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncEngine

from phasegraph.tools.planning.errors import PlanningError, PlanNotFound
from phasegraph.tools.planning.records import PlanRecord, PlanStatus
from phasegraph.tools.planning.tables import plans

#: Every status a plan may have.
PLAN_STATUSES: tuple[str, ...] = get_args(PlanStatus)


class PlanStore:
    """Plans of each scope."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine

    async def save(self, record: PlanRecord) -> None:
        """Store a plan; saving the same plan id again replaces it (a re-run after a crash may)."""
        values = {
            **record.model_dump(),
            "steps": json.dumps(record.steps),
            "review": json.dumps(record.review) if record.review is not None else None,
        }
        async with self.engine.begin() as conn:
            await conn.execute(_upsert(conn.dialect.name, values))

    async def get(self, scope: str, plan_id: str) -> PlanRecord:
        """A plan of the scope, or PlanNotFound."""
        async with self.engine.connect() as conn:
            row = (
                await conn.execute(sa.select(plans).where(plans.c.scope == scope, plans.c.plan_id == plan_id))
            ).first()
        if row is None:
            raise PlanNotFound(f"no plan {plan_id!r} in this scope")
        return _record(row)

    async def set_status(
        self,
        scope: str,
        plan_id: str,
        status: str,
        *,
        review: dict[str, Any] | None = None,
        summary: str | None = None,
    ) -> None:
        """Change a plan's status (and its review or summary, when given)."""
        if status not in PLAN_STATUSES:
            raise PlanningError(f"plan status {status!r} is not allowed; use {', '.join(PLAN_STATUSES)}")
        values: dict[str, Any] = {"status": status, "updated_at": time.time()}
        if review is not None:
            values["review"] = json.dumps(review)
        if summary is not None:
            values["summary"] = summary
        async with self.engine.begin() as conn:
            done = await conn.execute(
                plans.update().where(plans.c.scope == scope, plans.c.plan_id == plan_id).values(**values)
            )
        if done.rowcount == 0:
            raise PlanNotFound(f"no plan {plan_id!r} in this scope")

    async def list(
        self, scope: str, *, session_id: str | None = None, status: str | None = None
    ) -> list[PlanRecord]:
        """The scope's plans, oldest first, optionally of one session or status."""
        query = sa.select(plans).where(plans.c.scope == scope).order_by(plans.c.created_at)
        if session_id is not None:
            query = query.where(plans.c.session_id == session_id)
        if status is not None:
            query = query.where(plans.c.status == status)
        async with self.engine.connect() as conn:
            return [_record(r) for r in (await conn.execute(query)).all()]


def _upsert(dialect: str, values: dict[str, Any]) -> sa.Insert:
    """Insert a plan, or replace every column of the stored one with the same (scope, plan_id)."""
    if dialect not in ("sqlite", "postgresql"):
        raise PlanningError(f"plans cannot be stored in a {dialect} database; use sqlite or Postgres")
    insert = (postgresql.insert if dialect == "postgresql" else sqlite.insert)(plans).values(**values)
    replaced = {name: insert.excluded[name] for name in values if name not in ("scope", "plan_id")}
    return insert.on_conflict_do_update(index_elements=[plans.c.scope, plans.c.plan_id], set_=replaced)


def _record(row: Any) -> PlanRecord:
    data = dict(row._mapping)
    data["steps"] = json.loads(data["steps"])
    data["review"] = json.loads(data["review"]) if data["review"] else None
    return PlanRecord.model_validate(data)
