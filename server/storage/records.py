"""What the store keeps, as tables and as records: requests, threads, events, traces.

These are the newest schema's definitions (``migrations`` builds it); queries use them. A request
or thread is keyed ``project/id``: ids are unique per project only.
"""

from __future__ import annotations

import time
from typing import Any, Literal

import sqlalchemy as sa
from pydantic import BaseModel, Field, model_validator

from phasegraph.nodes.errors import ConflictError, NotFoundError

#: ``superseded``: it was paused when a later request started on its thread, which now goes on from there.
Status = Literal["running", "paused", "cancelled", "completed", "failed", "superseded"]

#: Keys are ``project/id``: ids cannot contain "/", so a key names one project's request or thread.
KEY = sa.String(401)

metadata = sa.MetaData()
requests_table = sa.Table(
    "phasegraph_requests",
    metadata,
    sa.Column("request_key", KEY, primary_key=True),
    sa.Column("request_id", sa.String(200), nullable=False),
    sa.Column("project_id", sa.String(200), nullable=False, index=True),
    sa.Column("protocol", sa.String(100), nullable=False),
    sa.Column("thread_id", sa.String(200), nullable=False, index=True),
    sa.Column("thread_key", KEY, nullable=False, index=True),
    sa.Column("status", sa.String(20), nullable=False),
    sa.Column("settings", sa.JSON, nullable=False),
    sa.Column("last_seq", sa.Integer, nullable=False, default=0),
    sa.Column("pause_requested", sa.Boolean, nullable=False, default=False),
    sa.Column("cancel_requested", sa.Boolean, nullable=False, default=False),
    sa.Column("owner", sa.String(100), nullable=True),
    sa.Column("heartbeat_at", sa.Float, nullable=True),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("updated_at", sa.Float, nullable=False),
    sa.Column("options", sa.JSON, nullable=False, default=dict),
    # One running request per thread: of two starts, resumes or answers at once, the second write fails.
    sa.Index(
        "ux_phasegraph_requests_running_thread",
        "thread_key",
        unique=True,
        sqlite_where=sa.text("status = 'running'"),
        postgresql_where=sa.text("status = 'running'"),
    ),
)
threads_table = sa.Table(
    "phasegraph_threads",
    metadata,
    sa.Column("thread_key", KEY, primary_key=True),
    sa.Column("thread_id", sa.String(200), nullable=False),
    sa.Column("project_id", sa.String(200), nullable=False, index=True),
    sa.Column("metadata", sa.JSON, nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("updated_at", sa.Float, nullable=False),
)
events_table = sa.Table(
    "phasegraph_events",
    metadata,
    sa.Column("request_key", KEY, primary_key=True),
    sa.Column("seq", sa.Integer, primary_key=True),
    sa.Column("data", sa.Text, nullable=False),
)
traces_table = sa.Table(
    "phasegraph_traces",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("request_key", KEY, nullable=False, index=True),
    sa.Column("data", sa.Text, nullable=False),
)


#: Postgres channels: events committed (payload: owner and each request's last seq), control flags set.
EVENTS_CHANNEL = "phasegraph_events"
CONTROL_CHANNEL = "phasegraph_control"


def scoped_key(project_id: str, item_id: str) -> str:
    """The store's key of a project's request or thread id."""
    return f"{project_id}/{item_id}"


class RequestRecord(BaseModel):
    """One request as the server knows it."""

    request_key: str = ""  # project/request: ids are unique per project only
    request_id: str  # as the client named it
    project_id: str
    protocol: str
    thread_id: str  # as the client named it
    thread_key: str = ""  # the LangGraph thread id (project-scoped; rows older than scoping keep theirs)
    status: Status
    settings: dict[str, Any] = Field(default_factory=dict)  # Context fields to rebuild the run anywhere
    last_seq: int = 0
    pause_requested: bool = False
    cancel_requested: bool = False  # set by a replica that does not drive the run; the driver stops it
    owner: str | None = None
    heartbeat_at: float | None = None
    created_at: float = Field(default_factory=time.time)
    updated_at: float = Field(default_factory=time.time)
    # How a LangGraph API run asked to be driven (interrupts, start checkpoint, metadata); {} otherwise.
    options: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _scoped_keys(self) -> RequestRecord:
        """A new record's keys follow from its project and ids."""
        self.request_key = self.request_key or scoped_key(self.project_id, self.request_id)
        self.thread_key = self.thread_key or scoped_key(self.project_id, self.thread_id)
        return self


class RequestExists(ConflictError):
    """A request of that id already exists in the project (ids are unique per project)."""

    def __init__(self, request_id: str) -> None:
        super().__init__(f"request {request_id!r} already exists; resume it or use a new requestId")


class ThreadBusy(ConflictError):
    """Another request of the thread is running: a thread takes one turn at a time."""

    def __init__(self, thread_id: str) -> None:
        super().__init__(f"thread {thread_id!r} has a request running; wait, pause or cancel it first")


def only_one(records: list[RequestRecord], what: str, how_to_choose: str) -> RequestRecord:
    """The one record of an id among the caller's projects: 404 with none, 409 with several.

    Ids are per project, so a caller who sees several projects may find the id in more than one;
    ``how_to_choose`` tells them how to name the project.
    """
    if not records:
        raise NotFoundError(f"{what} does not exist")
    if len(records) > 1:
        projects = ", ".join(sorted(r.project_id for r in records))
        raise ConflictError(f"{what} exists in several of your projects ({projects}); {how_to_choose}")
    return records[0]
