"""A project's tasks: listed, created, changed and deleted.

Task ids are ``<project_id>-t<n>``; a new task takes the number after the highest its project
has. Blocking and unblocking are status changes: a blocker blocks the task, and any other status
clears the blocker.
"""

from __future__ import annotations

import time
from typing import Any

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from phasegraph.tools.planning.errors import PlanningError
from phasegraph.tools.planning.projects import fetch_project
from phasegraph.tools.planning.records import Task
from phasegraph.tools.planning.rules import (
    ATTEMPTS,
    PRIORITIES,
    SHOWN_IDS,
    TASK_STATUSES,
    check_allowed,
    require_text,
    show_ids,
    task_number,
)
from phasegraph.tools.planning.tables import tasks


class TaskRows:
    """Lists, creates, changes and deletes a scope's tasks (part of ``ProjectDomain``)."""

    engine: AsyncEngine

    async def list_tasks(self, scope: str, project_id: str, status: str = "") -> list[Task]:
        """A project's tasks in the order they were made, optionally only those of one status."""
        if status:
            check_allowed(status, TASK_STATUSES, "status")
        async with self.engine.connect() as conn:
            await fetch_project(conn, scope, project_id)
            query = sa.select(tasks).where(tasks.c.scope == scope, tasks.c.project_id == project_id)
            if status:
                query = query.where(tasks.c.status == status)
            rows = (await conn.execute(query)).all()
        return sorted((_task(r) for r in rows), key=lambda t: task_number(t.task_id, project_id))

    async def create_task(self, scope: str, project_id: str, title: str, priority: str = "normal") -> Task:
        """A new ``todo`` task of a project; its number follows the highest the project has."""
        check_allowed(priority, PRIORITIES, "priority")
        title = require_text(title, "task title")
        for _ in range(ATTEMPTS):  # two callers may take the same number: the one refused takes the next
            try:
                return await self._insert_task(scope, project_id, title, priority)
            except IntegrityError:
                continue
        raise PlanningError(f"task {title!r} could not be created: too many at once; try again")

    async def _insert_task(self, scope: str, project_id: str, title: str, priority: str) -> Task:
        async with self.engine.begin() as conn:
            await fetch_project(conn, scope, project_id)
            ids = (
                await conn.execute(
                    sa.select(tasks.c.task_id).where(tasks.c.scope == scope, tasks.c.project_id == project_id)
                )
            ).scalars()
            number = max((task_number(i, project_id) for i in ids), default=0) + 1
            task = Task.model_validate(
                {
                    "task_id": f"{project_id}-t{number}",
                    "project_id": project_id,
                    "title": title,
                    "status": "todo",
                    "priority": priority,
                    "updated_at": time.time(),
                }
            )
            await conn.execute(tasks.insert().values(scope=scope, **task.model_dump()))
        return task

    async def update_task(
        self,
        scope: str,
        task_id: str,
        *,
        status: str | None = None,
        title: str | None = None,
        priority: str | None = None,
        blocker: str | None = None,
    ) -> tuple[Task, dict[str, Any]]:
        """Change a task; returns it and ``{field: new value}`` for the fields that really changed.

        A blocker without a status blocks the task; a status other than ``blocked`` clears its blocker.
        """
        changes: dict[str, Any] = {}
        if status is not None:
            changes["status"] = check_allowed(status, TASK_STATUSES, "status")
        if priority is not None:
            changes["priority"] = check_allowed(priority, PRIORITIES, "priority")
        if title is not None:
            changes["title"] = require_text(title, "task title")
        if blocker is not None:
            changes["blocker"] = require_text(blocker, "blocker")
            changes.setdefault("status", "blocked")
        elif changes.get("status", "blocked") != "blocked":
            changes["blocker"] = None
        if not changes:
            raise PlanningError("nothing to change: give a status, title, priority or blocker")
        async with self.engine.begin() as conn:
            task = await _fetch_task(conn, scope, task_id)
            changed = {k: v for k, v in changes.items() if getattr(task, k) != v}
            if not changed:
                return task, {}
            now = time.time()
            await conn.execute(
                tasks.update()
                .where(tasks.c.scope == scope, tasks.c.task_id == task_id)
                .values(**changed, updated_at=now)
            )
        return task.model_copy(update={**changed, "updated_at": now}), changed

    async def delete_task(self, scope: str, task_id: str) -> Task:
        """Delete a task for good."""
        async with self.engine.begin() as conn:
            task = await _fetch_task(conn, scope, task_id)
            await conn.execute(tasks.delete().where(tasks.c.scope == scope, tasks.c.task_id == task_id))
        return task


async def _fetch_task(conn: AsyncConnection, scope: str, task_id: str) -> Task:
    row = (
        await conn.execute(sa.select(tasks).where(tasks.c.scope == scope, tasks.c.task_id == task_id))
    ).first()
    if row is None:
        known = (
            await conn.execute(
                sa.select(tasks.c.task_id)
                .where(tasks.c.scope == scope)
                .order_by(tasks.c.updated_at.desc())
                .limit(SHOWN_IDS)
            )
        ).scalars()
        raise PlanningError(
            f"no task {task_id!r} in this scope; tasks: {show_ids(known)}"
            " (list_tasks shows a project's tasks)"
        )
    return _task(row)


def _task(row: Any) -> Task:
    return Task.model_validate({k: v for k, v in row._mapping.items() if k != "scope"})
