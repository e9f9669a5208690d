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
from phasegraph.server.http.langgraph_api.thread_edits import edit_routes
from phasegraph.server.http.langgraph_api.threads import thread_routes


def langgraph_routes(caller: Callable[..., Access]) -> tuple[APIRouter, ...]:
    """Every LangGraph API route, with the app's caller dependency (tokens and projects), in matching order.

    Side by side, not one router including the others: FastAPI builds each route of a nested router
    once more when the app includes it (a quarter of the app's start-up).
    """
    project = project_dependency(caller)
    return thread_routes(project), edit_routes(project), run_routes(project)
