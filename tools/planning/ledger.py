"""The usage and error ledgers: rows written by every planner session, read back with totals per group."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from pydantic import BaseModel
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine

from phasegraph.tools.planning.errors import PlanningError
from phasegraph.tools.planning.records import ErrorRow, UsageRow
from phasegraph.tools.planning.tables import errors, usage

#: ``by`` values and the column each groups on.
USAGE_GROUPS = {
    "operation": "operation_type",
    "context": "context_type",
    "model": "model",
    "profile": "profile",
    "execution_mode": "execution_mode",
    "session": "session_id",
    "request": "request_id",
    "status": "status",
}
ERROR_GROUPS = {
    "component": "component",
    "stage": "stage",
    "tool": "tool_name",
    "context": "context_type",
    "kind": "kind",
}


#: Filters that compare a column with the value given, and the ledgers whose rows have that column.
EQUAL_FILTERS = {
    "session_id": ("usage", "errors"),
    "request_id": ("usage", "errors"),
    "context_type": ("usage", "errors"),
    "operation_type": ("usage",),
    "model": ("usage",),
    "profile": ("usage",),
    "status": ("usage",),
    "component": ("errors",),
    "stage": ("errors",),
    "tool_name": ("errors",),
}


class LedgerFilter(BaseModel):
    """Which rows: each field given narrows them (``scopes`` None means every scope).

    ``since`` is inclusive, ``until`` exclusive (epoch seconds). A filter on a column the ledger
    does not have (``model`` for errors, ``component`` for usage) is refused, not ignored.
    """

    scopes: frozenset[str] | None = None
    session_id: str | None = None
    request_id: str | None = None
    context_type: str | None = None
    operation_type: str | None = None
    model: str | None = None
    profile: str | None = None
    status: str | None = None
    component: str | None = None
    stage: str | None = None
    tool_name: str | None = None
    since: float | None = None
    until: float | None = None


class UsageReport(BaseModel):
    """Rows (newest first, limited), totals over every matching row, and sums per group.

    ``calls`` counts every model call, failed ones included; ``failed`` those that did not end ``ok``.
    """

    rows: list[UsageRow]
    totals: dict[str, Any]
    groups: list[dict[str, Any]]


class ErrorReport(BaseModel):
    """Rows (newest first, limited), their total count, and counts per group."""

    rows: list[ErrorRow]
    total: int
    groups: list[dict[str, Any]]


class UsageLedger:
    """Writes and reads the usage and error rows."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine

    async def record_usage(self, row: UsageRow) -> None:
        """Store a model call; a row already stored under its key (a re-run) is kept as it was."""
        await self._insert(usage, row.model_dump())

    async def record_error(self, row: ErrorRow) -> None:
        """Store a caught error; a row already stored under its key is kept as it was."""
        await self._insert(errors, row.model_dump())

    async def usage(self, filters: LedgerFilter, by: str | None = None, limit: int = 200) -> UsageReport:
        """Usage rows, their totals and, with ``by``, sums per operation, context, model, ..."""
        where, group = _where(usage, filters, limit), _column(USAGE_GROUPS, by)
        sums = [
            sa.func.count().label("calls"),
            sa.func.coalesce(sa.func.sum(sa.case((usage.c.status != "ok", 1), else_=0)), 0).label("failed"),
            sa.func.coalesce(sa.func.sum(usage.c.input_tokens), 0).label("input_tokens"),
            sa.func.coalesce(sa.func.sum(usage.c.output_tokens), 0).label("output_tokens"),
            sa.func.coalesce(sa.func.sum(usage.c.cost_usd), 0.0).label("cost_usd"),
        ]
        async with self.engine.connect() as conn:
            rows = (
                await conn.execute(
                    sa.select(usage)
                    .where(*where)
                    .order_by(usage.c.created_at.desc(), usage.c.request_id, usage.c.call_index.desc())
                    .limit(limit)
                )
            ).all()
            total = (
                await conn.execute(
                    sa.select(
                        *sums, sa.func.coalesce(sa.func.sum(usage.c.latency_ms), 0.0).label("latency_ms")
                    ).where(*where)
                )
            ).one()
            groups = []
            if group is not None:
                column = usage.c[group]
                query = sa.select(column.label("key"), *sums).where(*where).group_by(column).order_by(column)
                groups = [_rounded(dict(g._mapping)) for g in (await conn.execute(query)).all()]
        return UsageReport(
            rows=[UsageRow.model_validate(r._mapping) for r in rows],
            totals=_rounded(dict(total._mapping)),
            groups=groups,
        )

    async def errors(self, filters: LedgerFilter, by: str | None = None, limit: int = 200) -> ErrorReport:
        """Error rows, their count and, with ``by``, counts per component, stage, tool, ..."""
        where, group = _where(errors, filters, limit), _column(ERROR_GROUPS, by)
        async with self.engine.connect() as conn:
            rows = (
                await conn.execute(
                    sa.select(errors)
                    .where(*where)
                    .order_by(errors.c.created_at.desc(), errors.c.request_id, errors.c.error_index.desc())
                    .limit(limit)
                )
            ).all()
            total = (
                await conn.execute(sa.select(sa.func.count()).select_from(errors).where(*where))
            ).scalar() or 0
            groups = []
            if group is not None:
                column = errors.c[group]
                query = (
                    sa.select(column.label("key"), sa.func.count().label("count"))
                    .where(*where)
                    .group_by(column)
                    .order_by(column)
                )
                groups = [dict(g._mapping) for g in (await conn.execute(query)).all()]
        return ErrorReport(
            rows=[ErrorRow.model_validate(r._mapping) for r in rows], total=total, groups=groups
        )

    async def _insert(self, table: sa.Table, values: dict[str, Any]) -> None:
        try:
            async with self.engine.begin() as conn:
                await conn.execute(table.insert().values(**values))
        except IntegrityError:  # the same key again: a re-run after a crash wrote this row already
            return


def _where(table: sa.Table, filters: LedgerFilter, limit: int) -> list[Any]:
    if limit < 0:
        raise PlanningError(f"limit must be 0 or more, not {limit}")
    ledger = table.name.removeprefix("phasegraph_")
    given = {name: getattr(filters, name) for name in EQUAL_FILTERS if getattr(filters, name) is not None}
    foreign = [name for name in given if ledger not in EQUAL_FILTERS[name]]
    if foreign:
        raise PlanningError(f"the {ledger} ledger cannot be filtered by {', '.join(foreign)}")
    where: list[Any] = [table.c[name] == value for name, value in given.items()]
    if filters.scopes is not None:
        where.append(table.c.scope.in_(sorted(filters.scopes)))
    if filters.since is not None:
        where.append(table.c.created_at >= filters.since)
    if filters.until is not None:
        where.append(table.c.created_at < filters.until)
    return where


def _column(groups: dict[str, str], by: str | None) -> str | None:
    if by is None:
        return None
    if by not in groups:
        raise PlanningError(f"cannot group by {by!r}; use {', '.join(groups)}")
    return groups[by]


def _rounded(values: dict[str, Any]) -> dict[str, Any]:
    return {k: round(float(v), 8) if k in ("cost_usd", "latency_ms") else v for k, v in values.items()}
