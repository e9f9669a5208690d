"""Ids are per project: another project's ids neither conflict nor reveal anything; old databases migrate."""

import sqlite3
from pathlib import Path

import httpx
import sqlalchemy as sa
from alembic.script import ScriptDirectory

from phasegraph.nodes.events import Final, PhaseStart
from phasegraph.nodes.models import DEMO_WORKSPACE
from phasegraph.nodes.trace import TraceEntry
from phasegraph.server.storage.migrate import alembic_config
from tests.server.conftest import Server, stream

RUN = "/api/runs/triggered_phase/stream"
A = {"Authorization": "Bearer ta"}
B = {"Authorization": "Bearer tb"}


def test_another_projects_ids_are_free_and_invisible(servers):
    server = servers(PHASEGRAPH_API_TOKENS="ta:projA;tb:projB")
    with httpx.Client(base_url=server.url) as client:
        body = {"message": "Summarise the roadmap", "requestId": "shared", "threadId": "chat"}
        mine = stream(client, "POST", RUN, json={**body, "projectId": "projA"}, headers=A)
        only_a = {"message": "Hi", "requestId": "only-a", "projectId": "projA"}
        stream(client, "POST", RUN, json=only_a, headers=A)

        # B reuses A's request and thread ids: a normal new request, with its own answer.
        theirs = stream(client, "POST", RUN, json={**body, "projectId": "projB"}, headers=B)
        assert theirs[-1].type == "final" and theirs[0].project_id == "projB"
        assert client.get("/api/requests/shared", headers=B).json()["projectId"] == "projB"

        # A's request is untouched: same status, same events.
        assert client.get("/api/requests/shared", headers=A).json()["projectId"] == "projA"
        assert [e.seq for e in stream(client, "GET", "/api/requests/shared/stream", headers=A)] == [
            e.seq for e in mine
        ]

        # An id only A has answers B exactly like an id nobody has.
        for path in ("", "/trace", "/stream"):
            never = client.get(f"/api/requests/never{path}", headers=B)
            hidden = client.get(f"/api/requests/only-a{path}", headers=B)
            assert hidden.status_code == never.status_code == 404
            assert hidden.json()["message"].replace("only-a", "ID") == never.json()["message"].replace(
                "never", "ID"
            )
        for action in ("pause", "cancel", "resume"):
            assert client.post(f"/api/requests/only-a/{action}", headers=B, json={}).status_code == 404
        assert client.get("/api/requests/only-a", headers=A).json()["status"] == "completed"
        # B may not even ask for A's project.
        assert client.get("/api/requests/only-a", params={"projectId": "projA"}, headers=B).status_code == 403


# The tables as the first release made them (metadata.create_all, no migrations).
_OLD = sa.MetaData()
sa.Table(
    "phasegraph_requests", _OLD,
    sa.Column("request_id", sa.String(200), primary_key=True),
    sa.Column("project_id", sa.String(200), nullable=False, index=True),
    sa.Column("protocol", sa.String(100), nullable=False),
    sa.Column("thread_id", sa.String(200), nullable=False, index=True),
    sa.Column("status", sa.String(20), nullable=False),
    sa.Column("settings", sa.JSON, nullable=False),
    sa.Column("last_seq", sa.Integer, nullable=False, default=0),
    sa.Column("pause_requested", sa.Boolean, nullable=False, default=False),
    sa.Column("cancel_requested", sa.Boolean, nullable=False, default=False),
    sa.Column("owner", sa.String(100), nullable=True),
    sa.Column("heartbeat_at", sa.Float, nullable=True),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("updated_at", sa.Float, nullable=False),
)  # fmt: skip
sa.Table(
    "phasegraph_events", _OLD,
    sa.Column("request_id", sa.String(200), primary_key=True),
    sa.Column("seq", sa.Integer, primary_key=True),
    sa.Column("data", sa.Text, nullable=False),
)  # fmt: skip
sa.Table(
    "phasegraph_traces", _OLD,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("request_id", sa.String(200), nullable=False, index=True),
    sa.Column("data", sa.Text, nullable=False),
)  # fmt: skip


def _old_database(url: str) -> list[str]:
    """Fill an old-schema database with one finished request; returns its events as JSON."""
    engine = sa.create_engine(url)
    events = [
        PhaseStart(request_id="old-1", project_id="legacy", protocol="triggered_phase", seq=1).to_json(),
        Final(request_id="old-1", project_id="legacy", protocol="triggered_phase", seq=2, answer="Done.")
        .to_json(),
    ]  # fmt: skip
    with engine.begin() as conn:
        _OLD.create_all(conn)
        conn.execute(
            _OLD.tables["phasegraph_requests"]
            .insert()
            .values(
                request_id="old-1",
                project_id="legacy",
                protocol="triggered_phase",
                thread_id="old-1",
                status="completed",
                settings={"model": "scripted:demo"},
                last_seq=2,
                pause_requested=False,
                cancel_requested=False,
                created_at=1.0,
                updated_at=1.0,
            )
        )
        conn.execute(
            _OLD.tables["phasegraph_events"].insert(),
            [{"request_id": "old-1", "seq": i + 1, "data": data} for i, data in enumerate(events)],
        )
        entry = TraceEntry(type="tool_call", request_id="old-1", details={"name": "list_files"})
        conn.execute(
            _OLD.tables["phasegraph_traces"].insert().values(request_id="old-1", data=entry.model_dump_json())
        )
    engine.dispose()
    return events


def _check_migrated(server) -> None:
    with httpx.Client(base_url=server.url) as client:
        record = client.get("/api/requests/old-1").json()
        assert (record["projectId"], record["status"], record["lastSeq"]) == ("legacy", "completed", 2)
        replay = stream(client, "GET", "/api/requests/old-1/stream")
        assert [e.type for e in replay] == ["phase_start", "final"] and replay[-1].answer == "Done."
        assert [t["details"]["name"] for t in client.get("/api/requests/old-1/trace").json()] == [
            "list_files"
        ]
        # The migrated database takes new requests, and the old id stays free in other projects.
        new = {"message": "Hi", "requestId": "old-1", "projectId": "other"}
        assert stream(client, "POST", RUN, json=new)[-1].type == "final"


def test_an_sqlite_database_from_before_migrations_is_upgraded_in_place(servers, tmp_path: Path):
    database = tmp_path / "old.db"
    _old_database(f"sqlite:///{database}")
    with sqlite3.connect(database) as db:  # the application sharing the database has Alembic too
        db.execute("CREATE TABLE alembic_version (version_num VARCHAR(32) PRIMARY KEY)")
        db.execute("INSERT INTO alembic_version VALUES ('their_rev')")
    _check_migrated(servers(PHASEGRAPH_CHECKPOINTER=f"sqlite:{database}"))
    # A second start finds nothing left to do.
    again = servers(PHASEGRAPH_CHECKPOINTER=f"sqlite:{database}")
    with httpx.Client(base_url=again.url) as client:
        assert (
            client.get("/api/requests/old-1", params={"projectId": "legacy"}).json()["status"] == "completed"
        )
    with sqlite3.connect(database) as db:
        assert db.execute("SELECT version_num FROM alembic_version").fetchall() == [("their_rev",)]
        head = ScriptDirectory.from_config(alembic_config()).get_current_head()
        assert db.execute("SELECT version_num FROM phasegraph_alembic_version").fetchall() == [(head,)]
        assert head == "0008" and db.execute("SELECT count(*) FROM phasegraph_networks").fetchone() == (0,)
        assert db.execute(
            "SELECT options FROM phasegraph_requests WHERE request_id = 'old-1'"
        ).fetchone() == ("{}",)
        # the migration makes no thread rows; the new request's turn listed its own thread
        threads = db.execute("SELECT project_id, thread_id FROM phasegraph_threads").fetchall()
        assert threads == [("other", "old-1")]


def test_a_postgres_database_from_before_migrations_is_upgraded_for_two_replicas(
    fresh_postgres: str, tmp_path: Path
):
    _old_database("postgresql+psycopg://" + fresh_postgres.split("://", 1)[1])
    env = {
        "PHASEGRAPH_CHECKPOINTER": fresh_postgres,
        "PHASEGRAPH_WORKSPACE": str(DEMO_WORKSPACE),
    }
    replicas = [Server(env=env, log=tmp_path / f"replica-{i}.log") for i in range(2)]
    try:
        # One after the other: two replicas starting at the same moment on an empty Postgres can
        # collide in LangGraph's own checkpointer setup (not ours; see the closing note).
        first, second = (replica.start() for replica in replicas)
        _check_migrated(first)
        with httpx.Client(base_url=second.url) as client:
            found = client.get("/api/requests/old-1", params={"projectId": "legacy"}).json()
            assert found["status"] == "completed"
    finally:
        for replica in replicas:
            replica.stop()
