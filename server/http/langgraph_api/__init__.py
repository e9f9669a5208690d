"""The LangGraph Server API subset (``langgraph-sdk``, Agent Chat UI, Studio, CopilotKit).

It runs on the app's one run manager.

Assistants are the registered protocols (assistant id = protocol id); threads and runs are
phasegraph threads and requests, in the caller's project.
"""

from __future__ import annotations

from collections.abc import Callable

from fastapi import APIRouter

from phasegraph.server.http.auth import Access
from phasegraph.server.http.langgraph_api.common import project_dependency
from phasegraph.server.http.langgraph_api.runs import run_routes
from phasegraph.server.http.langgraph_api.threads import thread_routes


def langgraph_routes(caller: Callable[..., Access]) -> APIRouter:
    """Every LangGraph API route, with the app's caller dependency (tokens and projects)."""
    project = project_dependency(caller)
    router = APIRouter()
    router.include_router(thread_routes(project))
    router.include_router(run_routes(project))
    return router
