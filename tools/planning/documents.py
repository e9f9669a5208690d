"""A project's context documents: published in versions, listed by title.

A document's id is ``<project_id>-doc-<slug of title>``; publishing the same title again writes
that document's next version over the last one, so a project lists each title once.
"""

from __future__ import annotations

import time

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine

from phasegraph.tools.planning.errors import PlanningError
from phasegraph.tools.planning.projects import fetch_project
from phasegraph.tools.planning.records import ContextDocument
from phasegraph.tools.planning.rules import ATTEMPTS, slug
from phasegraph.tools.planning.tables import documents


class DocumentRows:
    """Publishes and lists a scope's context documents (part of ``ProjectDomain``)."""

    engine: AsyncEngine

    async def publish_context_document(
        self, scope: str, project_id: str, title: str, body: str
    ) -> ContextDocument:
        """Publish a document of a project; the same title again is that document's next version."""
        # two publishers may write the same version: the one refused writes the next
        for _ in range(ATTEMPTS):
            try:
                published = await self._publish(scope, project_id, title, body)
            except IntegrityError:
                continue
            if published is not None:
                return published
        raise PlanningError(f"document {title!r} could not be published: too many publishers at once")

    async def _publish(self, scope: str, project_id: str, title: str, body: str) -> ContextDocument | None:
        """The next version of the document, or None when another publisher wrote it first."""
        document_id = f"{project_id}-doc-{slug(title)}"
        async with self.engine.begin() as conn:
            await fetch_project(conn, scope, project_id)
            version = (
                await conn.execute(
                    sa.select(sa.func.max(documents.c.version)).where(
                        documents.c.scope == scope, documents.c.document_id == document_id
                    )
                )
            ).scalar() or 0
            document = ContextDocument(
                document_id=document_id,
                project_id=project_id,
                title=title.strip(),
                body=body,
                version=version + 1,
                published_at=time.time(),
            )
            values = {"scope": scope, **document.model_dump()}
            if not version:
                await conn.execute(documents.insert().values(**values))
                return document
            written = await conn.execute(
                documents.update()
                .where(
                    documents.c.scope == scope,
                    documents.c.document_id == document_id,
                    documents.c.version == version,
                )
                .values(**values)
            )
        return document if written.rowcount else None

    async def list_documents(self, scope: str, project_id: str) -> list[ContextDocument]:
        """A project's context documents (their latest versions), by title."""
        async with self.engine.connect() as conn:
            await fetch_project(conn, scope, project_id)
            rows = (
                await conn.execute(
                    sa.select(documents)
                    .where(documents.c.scope == scope, documents.c.project_id == project_id)
                    .order_by(documents.c.title)
                )
            ).all()
        return [
            ContextDocument.model_validate({k: v for k, v in r._mapping.items() if k != "scope"})
            for r in rows
        ]
