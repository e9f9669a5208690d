"""Project templates: the built-in ones every scope has, and the ones a scope creates.

A template names the sections of a project's context document and the tasks a project made from
it starts with. A scope's own templates are rows of ``phasegraph_templates``; the built-in ones
live only here and cannot be overwritten.
"""

from __future__ import annotations

import json
import time
from typing import Any

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine

from phasegraph.tools.planning.errors import PlanningError
from phasegraph.tools.planning.records import Template
from phasegraph.tools.planning.rules import require_texts, show_ids, slug
from phasegraph.tools.planning.tables import templates

#: Templates every scope has; they cannot be overwritten.
BUILTIN_TEMPLATES = (
    Template(
        template_id="product-launch",
        name="Product launch",
        builtin=True,
        description="Bring a product or feature to market: positioning, launch plan, channels and follow-up.",
        sections=["Goal", "Audience", "Positioning", "Launch plan", "Risks"],
        task_seeds=[
            "Write the positioning statement",
            "Plan the launch timeline",
            "Prepare launch channels",
            "Brief support and sales",
            "Review launch metrics",
        ],
    ),
    Template(
        template_id="research-study",
        name="Research study",
        builtin=True,
        description="Answer a question with evidence: hypotheses, method, sources and findings.",
        sections=["Question", "Hypotheses", "Method", "Sources", "Findings"],
        task_seeds=[
            "State the research question",
            "Collect sources",
            "Analyse the evidence",
            "Write up findings",
        ],
    ),
    Template(
        template_id="event-plan",
        name="Event plan",
        builtin=True,
        description="Run an event: venue, agenda, speakers, logistics and follow-up.",
        sections=["Purpose", "Agenda", "Logistics", "Budget"],
        task_seeds=["Book the venue", "Draft the agenda", "Invite speakers", "Send invitations"],
    ),
)


class TemplateRows:
    """Lists, finds and creates a scope's templates (part of ``ProjectDomain``)."""

    engine: AsyncEngine

    async def list_templates(self, scope: str, query: str = "") -> list[Template]:
        """Built-in and the scope's own templates, filtered by ``query`` on name and description."""
        async with self.engine.connect() as conn:
            rows = (await conn.execute(sa.select(templates).where(templates.c.scope == scope))).all()
        found = [*BUILTIN_TEMPLATES, *(_template(r) for r in rows)]
        needle = query.strip().lower()
        return (
            [
                t
                for t in found
                if needle in t.name.lower() or needle in t.description.lower() or needle in t.template_id
            ]
            if needle
            else found
        )

    async def get_template(self, scope: str, template_id: str) -> Template:
        """One template, or a PlanningError listing the known ones."""
        known = await self.list_templates(scope)
        found = next((t for t in known if t.template_id == template_id), None)
        if found is None:
            raise PlanningError(
                f"no template {template_id!r}; templates: {show_ids(t.template_id for t in known)}"
            )
        return found

    async def create_template(
        self,
        scope: str,
        name: str,
        description: str,
        sections: list[str],
        task_seeds: list[str] = (),  # type: ignore[assignment]
    ) -> Template:
        """A new template of the scope; its id is the slug of its name and must be new."""
        template_id = slug(name)
        exists = PlanningError(f"template {template_id!r} exists already: use it, or choose another name")
        if any(t.template_id == template_id for t in await self.list_templates(scope)):
            raise exists
        made = Template(
            template_id=template_id,
            name=name.strip(),
            description=description.strip(),
            sections=require_texts(sections, "sections"),
            task_seeds=require_texts(task_seeds, "task seeds"),
        )
        if not made.sections:
            raise PlanningError("a template needs at least one section")
        try:
            async with self.engine.begin() as conn:
                await conn.execute(
                    templates.insert().values(
                        scope=scope,
                        template_id=template_id,
                        name=made.name,
                        description=made.description,
                        sections=json.dumps(made.sections),
                        task_seeds=json.dumps(made.task_seeds),
                        created_at=time.time(),
                    )
                )
        except IntegrityError:  # another call created it since the check
            raise exists from None
        return made


def _template(row: Any) -> Template:
    return Template(
        template_id=row.template_id,
        name=row.name,
        description=row.description,
        sections=json.loads(row.sections),
        task_seeds=json.loads(row.task_seeds),
    )
