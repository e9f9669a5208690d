"""The project domain: templates, projects, tasks and context documents, per scope.

Every method takes the scope (the phasegraph project of the request) first and every query filters
on it, so one scope never sees or changes another's rows. Ids are slugs of names
(``spring-launch``); tasks are ``<project_id>-t<n>``, documents ``<project_id>-doc-<slug of title>``.

``ProjectDomain`` is the one object callers use. Its methods are written by theme in sibling
modules: ``templates`` (``TemplateRows``), ``projects`` (``ProjectRows``), ``tasks``
(``TaskRows``), ``documents`` (``DocumentRows``); ``audit`` holds the health rules and ``rules``
the checks and limits they all share.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from phasegraph.tools.planning.audit import HEALTH_RULES, assess_health, audit
from phasegraph.tools.planning.documents import DocumentRows
from phasegraph.tools.planning.projects import ProjectRows
from phasegraph.tools.planning.rules import (
    ATTEMPTS,
    MAX_SLUG,
    PRIORITIES,
    PROJECT_STATUSES,
    SHOWN_IDS,
    TASK_STATUSES,
    slug,
)
from phasegraph.tools.planning.tasks import TaskRows
from phasegraph.tools.planning.templates import BUILTIN_TEMPLATES

__all__ = [
    "ATTEMPTS",
    "BUILTIN_TEMPLATES",
    "HEALTH_RULES",
    "MAX_SLUG",
    "PRIORITIES",
    "PROJECT_STATUSES",
    "SHOWN_IDS",
    "TASK_STATUSES",
    "ProjectDomain",
    "assess_health",
    "slug",
]


class ProjectDomain(ProjectRows, TaskRows, DocumentRows):
    """Reads and changes one database's domain rows; every method is limited to its ``scope``."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine

    async def audit_project(self, scope: str, project_id: str) -> dict[str, Any]:
        """A project's health: task counts, blockers, whether it has a context document, and findings.

        ``health`` is the first of ``HEALTH_RULES`` that holds: stalled (every open task is blocked),
        at_risk (a task is blocked, no context document, or no tasks), healthy.
        """
        project = await self.get_project(scope, project_id)
        found = await self.list_tasks(scope, project_id)
        has_document = bool(await self.list_documents(scope, project_id))
        return audit(project, found, has_document)
