"""The planner's project domain, plans and ledgers on real databases (memory, an sqlite file, Postgres)."""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from uuid import uuid4

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from phasegraph.server.storage.migrate import alembic_config
from phasegraph.server.storage.store import RequestStore
from phasegraph.tools.context import ToolContext
from phasegraph.tools.planning import (
    BUILTIN_TEMPLATES,
    ErrorRow,
    LedgerFilter,
    PlanningError,
    PlanningStore,
    PlanNotFound,
    PlanRecord,
    UsageRow,
    is_destructive,
    open_planning,
    planning_registry,
    planning_tools,
    slug,
)
from phasegraph.tools.planning.domain import assess_health
from phasegraph.tools.planning.tables import planning_metadata
from phasegraph.tools.runner import ToolRunner

POSTGRES = os.environ.get("PHASEGRAPH_TEST_POSTGRES_URL", "")
PLANNING_TABLES = set(planning_metadata.tables)


@pytest.fixture(params=["memory", "sqlite", "postgres"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[PlanningStore]:
    if request.param == "postgres" and not POSTGRES:
        pytest.skip("PHASEGRAPH_TEST_POSTGRES_URL unset")
    database = {"memory": "memory", "sqlite": f"sqlite:{tmp_path / 'state.db'}", "postgres": POSTGRES}
    opened = open_planning(database[request.param])
    await opened.ensure_schema()
    yield opened
    await opened.close()


@pytest.fixture
def scope() -> str:
    """A scope of this test alone: the memory file and the Postgres database outlive it."""
    return f"s-{uuid4().hex[:10]}"


# Templates


async def test_builtin_templates_are_visible_in_every_scope_and_filtered_by_query(store, scope):
    for each in (scope, f"{scope}-other"):
        assert [t.template_id for t in await store.domain.list_templates(each)] == [
            t.template_id for t in BUILTIN_TEMPLATES
        ]
    found = await store.domain.list_templates(scope, "LAUNCH")
    assert [t.template_id for t in found] == ["product-launch"] and found[0].builtin
    assert await store.domain.list_templates(scope, "no such words") == []


async def test_custom_templates_belong_to_their_scope_and_duplicates_are_refused(store, scope):
    domain = store.domain
    made = await domain.create_template(
        scope, "Hiring Round", "Hire for one role.", ["Role", "Panel"], ["Write the job ad", "Screen CVs"]
    )
    assert (made.template_id, made.builtin) == ("hiring-round", False)
    assert (await domain.get_template(scope, "hiring-round")).task_seeds == ["Write the job ad", "Screen CVs"]
    assert [t.template_id for t in await domain.list_templates(scope, "hire")] == ["hiring-round"]
    assert "hiring-round" not in [t.template_id for t in await domain.list_templates(f"{scope}-other")]
    with pytest.raises(PlanningError, match="'hiring-round' exists already: use it"):
        await domain.create_template(scope, "hiring round!", "again", ["Role"])
    with pytest.raises(PlanningError, match="'event-plan' exists already"):
        await domain.create_template(scope, "Event Plan", "mine", ["Anything"])
    with pytest.raises(PlanningError, match="at least one section"):
        await domain.create_template(scope, "Empty", "no sections", [])
    with pytest.raises(PlanningError, match="no letters or digits"):
        await domain.create_template(scope, "!!!", "unnamed", ["Only"])
    with pytest.raises(PlanningError, match="no template 'nope'; templates: product-launch"):
        await domain.get_template(scope, "nope")
    # Another scope may take the same id: templates are per scope.
    assert (await domain.create_template(f"{scope}-other", "Hiring Round", "x", ["y"])).template_id == (
        "hiring-round"
    )


def test_slugs_are_short_lowercase_ascii():
    assert slug("  Spring Launch: Café Édition 2026! ") == "spring-launch-cafe-edition-2026"
    assert len(slug("word " * 40)) <= 60 and not slug("word " * 40).endswith("-")
    with pytest.raises(PlanningError):
        slug("¿?")


# Projects and tasks


async def test_a_project_is_seeded_from_its_template_and_ids_never_collide(store, scope):
    domain = store.domain
    project, seeded = await domain.create_project(scope, "Spring Launch", "product-launch", "April")
    assert (project.project_id, project.status, project.description) == ("spring-launch", "active", "April")
    seeds = next(t for t in BUILTIN_TEMPLATES if t.template_id == "product-launch").task_seeds
    tasks = await domain.list_tasks(scope, "spring-launch")
    assert [(t.task_id, t.title, t.status) for t in tasks] == [
        (f"spring-launch-t{i}", title, "todo") for i, title in enumerate(seeds, 1)
    ]
    assert seeded == tasks
    second, _ = await domain.create_project(scope, "spring launch", "event-plan")
    third, _ = await domain.create_project(scope, "Spring-Launch", "event-plan")
    assert (second.project_id, third.project_id) == ("spring-launch-2", "spring-launch-3")
    long_name = "a very long project name " * 4
    first_long, _ = await domain.create_project(scope, long_name, "event-plan")
    again_long, _ = await domain.create_project(scope, long_name, "event-plan")
    assert len(first_long.project_id) <= 60 and len(again_long.project_id) <= 60
    assert again_long.project_id.endswith("-2") and again_long.project_id != first_long.project_id
    with pytest.raises(PlanningError, match="no template 'nope'; templates: product-launch, research-study"):
        await domain.create_project(scope, "Other", "nope")
    assert [p.project_id for p in await domain.list_projects(scope)][:3] == [
        "spring-launch", "spring-launch-2", "spring-launch-3"
    ]  # fmt: skip


async def test_concurrent_creators_of_the_same_name_get_distinct_ids(store, scope):
    made = await asyncio.gather(*(store.domain.create_project(scope, "Rush", "event-plan") for _ in range(4)))
    assert sorted(p.project_id for p, _ in made) == ["rush", "rush-2", "rush-3", "rush-4"]


async def test_archived_projects_leave_the_active_list(store, scope):
    domain = store.domain
    await domain.create_project(scope, "Old", "event-plan")
    await domain.create_project(scope, "New", "event-plan")
    archived = await domain.archive_project(scope, "old")
    assert archived.status == "archived"
    assert [p.project_id for p in await domain.list_projects(scope)] == ["new"]
    assert [p.project_id for p in await domain.list_projects(scope, "archived")] == ["old"]
    assert {p.project_id for p in await domain.list_projects(scope, "")} == {"old", "new"}
    with pytest.raises(PlanningError, match="project status 'gone' is not allowed"):
        await domain.list_projects(scope, "gone")


async def test_one_scope_cannot_see_or_change_another_scopes_rows(store, scope):
    domain, other = store.domain, f"{scope}-other"
    await domain.create_project(scope, "Secret", "event-plan")
    await domain.publish_context_document(scope, "secret", "Brief", "Mine only.")
    assert await domain.list_projects(other, "") == []
    calls = [
        domain.get_project(other, "secret"),
        domain.list_tasks(other, "secret"),
        domain.list_documents(other, "secret"),
        domain.audit_project(other, "secret"),
        domain.archive_project(other, "secret"),
        domain.create_task(other, "secret", "Sneak in"),
        domain.publish_context_document(other, "secret", "Brief", "Overwrite."),
    ]
    for call in calls:
        with pytest.raises(PlanningError, match="no project 'secret' in this scope; projects: none yet"):
            await call
    for call in (
        domain.update_task(other, "secret-t1", status="done"),
        domain.delete_task(other, "secret-t1"),
    ):
        with pytest.raises(PlanningError, match="no task 'secret-t1' in this scope; tasks: none yet"):
            await call
    # The same name is free in the other scope, and the first scope's rows are untouched.
    assert (await domain.create_project(other, "Secret", "event-plan"))[0].project_id == "secret"
    assert [t.status for t in await domain.list_tasks(scope, "secret")] == ["todo"] * 4
    assert [d.body for d in await domain.list_documents(scope, "secret")] == ["Mine only."]
    assert (await domain.get_project(scope, "secret")).status == "active"


async def test_unknown_ids_name_a_few_alternatives(store, scope):
    domain = store.domain
    for name in ("Alpha", "Beta"):
        await domain.create_project(scope, name, "event-plan")
    with pytest.raises(PlanningError, match="no project 'gamma' in this scope; projects: alpha, beta"):
        await domain.get_project(scope, "gamma")
    with pytest.raises(PlanningError, match=r"no task 'alpha-t9' in this scope; tasks: .*alpha-t1"):
        await domain.update_task(scope, "alpha-t9", status="done")


async def test_task_updates_validate_their_values_and_follow_the_blocker(store, scope):
    domain = store.domain
    await domain.create_project(scope, "Fair", "event-plan")
    with pytest.raises(PlanningError, match="status 'finished' is not allowed; use todo, in_progress"):
        await domain.update_task(scope, "fair-t1", status="finished")
    with pytest.raises(PlanningError, match="priority 'urgent' is not allowed; use low, normal, high"):
        await domain.update_task(scope, "fair-t1", priority="urgent")
    with pytest.raises(PlanningError, match="nothing to change"):
        await domain.update_task(scope, "fair-t1")
    with pytest.raises(PlanningError, match="task title must not be empty"):
        await domain.update_task(scope, "fair-t1", title="  ")
    task, changed = await domain.update_task(scope, "fair-t1", blocker="Venue unconfirmed")
    assert (task.status, task.blocker) == ("blocked", "Venue unconfirmed")
    assert changed == {"status": "blocked", "blocker": "Venue unconfirmed"}
    task, changed = await domain.update_task(scope, "fair-t1", status="in_progress")
    assert (task.status, task.blocker, changed) == (
        "in_progress",
        None,
        {"status": "in_progress", "blocker": None},
    )
    task, changed = await domain.update_task(scope, "fair-t2", status="todo", blocker="Waiting on budget")
    assert (task.status, task.blocker) == ("todo", "Waiting on budget")
    task, changed = await domain.update_task(scope, "fair-t3", title="Draft the full agenda", priority="high")
    assert changed == {"title": "Draft the full agenda", "priority": "high"}
    again, unchanged = await domain.update_task(scope, "fair-t3", priority="high")
    assert (unchanged, again.updated_at) == ({}, task.updated_at)
    stored = {t.task_id: t for t in await domain.list_tasks(scope, "fair")}
    assert (stored["fair-t1"].status, stored["fair-t3"].priority) == ("in_progress", "high")
    assert [t.task_id for t in await domain.list_tasks(scope, "fair", "todo")] == [
        "fair-t2",
        "fair-t3",
        "fair-t4",
    ]
    with pytest.raises(PlanningError, match="status 'stuck' is not allowed"):
        await domain.list_tasks(scope, "fair", "stuck")


async def test_new_task_numbers_follow_the_highest_even_after_a_delete(store, scope):
    domain = store.domain
    await domain.create_project(scope, "Count", "event-plan")  # tasks t1..t4
    deleted = await domain.delete_task(scope, "count-t2")
    assert deleted.task_id == "count-t2"
    made = [await domain.create_task(scope, "count", f"Extra {i}", "low") for i in range(7)]
    assert [t.task_id for t in made] == [f"count-t{n}" for n in range(5, 12)]
    assert made[0].priority == "low" and made[0].status == "todo"
    listed = [t.task_id for t in await domain.list_tasks(scope, "count")]
    assert listed == ["count-t1", "count-t3", "count-t4", *(f"count-t{n}" for n in range(5, 12))]
    with pytest.raises(PlanningError, match="priority 'top' is not allowed"):
        await domain.create_task(scope, "count", "Bad", "top")
    with pytest.raises(PlanningError, match="no task 'count-t2'"):
        await domain.delete_task(scope, "count-t2")


# Documents and audits


async def test_publishing_the_same_title_again_is_the_next_version(store, scope):
    domain = store.domain
    await domain.create_project(scope, "Study", "research-study")
    first = await domain.publish_context_document(scope, "study", "Research Brief", "v1")
    second = await domain.publish_context_document(scope, "study", "Research Brief", "v2")
    other = await domain.publish_context_document(scope, "study", "Interview guide", "questions")
    assert (first.document_id, first.version) == ("study-doc-research-brief", 1)
    assert (second.document_id, second.version, second.body) == ("study-doc-research-brief", 2, "v2")
    listed = await domain.list_documents(scope, "study")
    assert [(d.document_id, d.version) for d in listed] == [
        (other.document_id, 1),
        ("study-doc-research-brief", 2),
    ]


async def test_concurrent_publishers_get_distinct_versions(store, scope):
    await store.domain.create_project(scope, "Busy", "event-plan")
    published = await asyncio.gather(
        *(store.domain.publish_context_document(scope, "busy", "Brief", f"body {i}") for i in range(3))
    )
    assert sorted(d.version for d in published) == [1, 2, 3]


def test_health_rules():
    counts = {"todo": 0, "in_progress": 0, "blocked": 0, "done": 0}
    assert assess_health(counts, True) == "at_risk"  # no tasks at all
    assert assess_health({**counts, "todo": 3}, True) == "healthy"
    assert assess_health({**counts, "todo": 3}, False) == "at_risk"
    assert assess_health({**counts, "todo": 2, "blocked": 1}, True) == "at_risk"
    assert assess_health({**counts, "blocked": 2, "done": 5}, True) == "stalled"
    assert assess_health({**counts, "done": 4}, True) == "healthy"


async def test_audits_report_counts_blockers_and_health(store, scope):
    domain = store.domain
    await domain.create_project(scope, "Gala", "event-plan")  # four todo tasks, no document
    audit = await domain.audit_project(scope, "gala")
    assert (audit["health"], audit["has_context_document"], audit["total"]) == ("at_risk", False, 4)
    assert audit["counts"] == {"todo": 4, "in_progress": 0, "blocked": 0, "done": 0}
    assert audit["findings"] == ["None of the 4 tasks has started.", "The project has no context document."]
    await domain.publish_context_document(scope, "gala", "Brief", "A gala in May.")
    assert (await domain.audit_project(scope, "gala"))["health"] == "healthy"
    await domain.update_task(scope, "gala-t1", blocker="No venue")
    audit = await domain.audit_project(scope, "gala")
    assert audit["health"] == "at_risk"
    assert audit["blocked"] == [{"task_id": "gala-t1", "title": "Book the venue", "blocker": "No venue"}]
    assert "gala-t1 (Book the venue) is blocked: No venue." in audit["findings"]
    for task_id in ("gala-t2", "gala-t3", "gala-t4"):
        await domain.update_task(scope, task_id, status="done")
    audit = await domain.audit_project(scope, "gala")
    assert audit["health"] == "stalled"
    assert audit["findings"][0] == "3 of 4 tasks are done, 0 in progress."
    assert "Every open task is blocked" in audit["findings"][-1]
    await domain.update_task(scope, "gala-t1", status="done")
    audit = await domain.audit_project(scope, "gala")
    assert (audit["health"], audit["findings"][-1]) == (
        "healthy",
        "Every task is done: the project can be archived.",
    )
    assert audit["project"]["project_id"] == "gala"


# Plans


def _plan(scope: str, plan_id: str = "plan-1", **fields: Any) -> PlanRecord:
    values = {
        "scope": scope, "plan_id": plan_id, "session_id": "sess-1", "request_id": "req-1",
        "context_type": "project", "execution_mode": "auto_execute", "objective": "Launch",
        "status": "draft", "steps": [{"id": "s1", "tool": "list_templates", "args": {}}],
        "created_at": 100.0, "updated_at": 100.0,
    }  # fmt: skip
    return PlanRecord.model_validate({**values, **fields})


async def test_saving_a_plan_again_replaces_it(store, scope):
    plans = store.plans
    await plans.save(_plan(scope))
    await plans.save(_plan(scope))  # a re-run after a crash
    await plans.save(_plan(scope, objective="Launch in May", status="pending_review"))
    assert [(p.plan_id, p.objective, p.status) for p in await plans.list(scope)] == [
        ("plan-1", "Launch in May", "pending_review")
    ]
    await asyncio.gather(*(plans.save(_plan(scope, "plan-2", objective=f"o{i}")) for i in range(4)))
    assert len(await plans.list(scope)) == 2
    assert (await plans.get(scope, "plan-1")).steps == [{"id": "s1", "tool": "list_templates", "args": {}}]


async def test_plan_status_changes_and_listing(store, scope):
    plans = store.plans
    await plans.save(_plan(scope, "p1", created_at=1.0))
    await plans.save(_plan(scope, "p2", session_id="sess-2", created_at=2.0))
    await plans.set_status(scope, "p1", "approved", review={"verdict": "approve", "notes": ["fine"]})
    await plans.set_status(scope, "p1", "completed", summary="All 1 step succeeded.")
    done = await plans.get(scope, "p1")
    assert (done.status, done.review, done.summary) == (
        "completed", {"verdict": "approve", "notes": ["fine"]}, "All 1 step succeeded."
    )  # fmt: skip
    assert done.updated_at > done.created_at
    assert [p.plan_id for p in await plans.list(scope)] == ["p1", "p2"]
    assert [p.plan_id for p in await plans.list(scope, session_id="sess-2")] == ["p2"]
    assert [p.plan_id for p in await plans.list(scope, status="completed")] == ["p1"]
    with pytest.raises(PlanningError, match="plan status 'finished' is not allowed"):
        await plans.set_status(scope, "p1", "finished")
    with pytest.raises(PlanNotFound):
        await plans.set_status(scope, "missing", "failed")
    with pytest.raises(PlanNotFound):
        await plans.get(f"{scope}-other", "p1")  # plans belong to their scope
    assert await plans.list(f"{scope}-other") == []


# Ledgers


#: A model call the provider failed: it counts as a call, with no tokens and no cost.
FAILED_CALL = {
    "status": "error", "error_kind": "provider", "input_tokens": 0, "output_tokens": 0, "cost_usd": 0.0,
    "latency_ms": 0.0,
}  # fmt: skip


def _usage(scope: str, request: str, index: int, **fields: Any) -> UsageRow:
    values = {
        "scope": scope, "request_id": request, "call_index": index, "session_id": "sess-1", "user_id": "u1",
        "context_type": "general", "operation_type": "planner", "profile": "balanced", "execution_mode": None,
        "model": "scripted", "input_tokens": 100, "output_tokens": 10, "latency_ms": 5.0, "cost_usd": 0.25,
        "created_at": 1000.0 + index,
    }  # fmt: skip
    return UsageRow.model_validate({**values, **fields})


def _error(scope: str, request: str, index: int, **fields: Any) -> ErrorRow:
    values = {
        "scope": scope, "request_id": request, "error_index": index, "session_id": "sess-1", "user_id": "u1",
        "component": "tool", "stage": "execute", "tool_name": "create_project", "context_type": "general",
        "execution_mode": None, "kind": "PlanningError", "message": "no template",
        "created_at": 1000.0 + index,
    }  # fmt: skip
    return ErrorRow.model_validate({**values, **fields})


async def test_recording_the_same_ledger_key_again_keeps_the_first_row(store, scope):
    ledger = store.ledger
    await ledger.record_usage(_usage(scope, "r1", 0))
    await ledger.record_usage(_usage(scope, "r1", 0, input_tokens=999))  # a re-run after a crash
    await ledger.record_error(_error(scope, "r1", 0))
    await ledger.record_error(_error(scope, "r1", 0, message="again"))
    only = LedgerFilter(scopes=frozenset({scope}))
    usage = await ledger.usage(only)
    assert [(r.request_id, r.input_tokens) for r in usage.rows] == [("r1", 100)]
    errors = await ledger.errors(only)
    assert (errors.total, [r.message for r in errors.rows]) == (1, ["no template"])


async def test_usage_totals_cover_every_matching_row_and_groups_sum_in_sql(store, scope):
    ledger = store.ledger
    rows = [
        _usage(scope, "r1", 0),
        _usage(scope, "r1", 1, operation_type="plan_draft", model="big", cost_usd=1.0),
        _usage(scope, "r2", 0, session_id="sess-2", execution_mode="review_first"),
        _usage(scope, "r2", 1, session_id="sess-2", operation_type="plan_review", model="big"),
        _usage(scope, "r2", 2, session_id="sess-2", **FAILED_CALL),  # a failed call is a row, with no tokens
        _usage(f"{scope}-other", "r9", 0, cost_usd=50.0),
    ]
    for row in rows:
        await ledger.record_usage(row)
    only = LedgerFilter(scopes=frozenset({scope}))
    page = await ledger.usage(only, limit=2)
    assert [(r.request_id, r.call_index) for r in page.rows] == [("r2", 2), ("r1", 1)]  # newest first
    assert page.rows[0].status == "error" and page.rows[0].error_kind == "provider"
    assert page.totals == {
        "calls": 5, "failed": 1, "input_tokens": 400, "output_tokens": 40, "cost_usd": 1.75,
        "latency_ms": 20.0,
    }  # fmt: skip
    by_model = await ledger.usage(only, by="model")
    sums = {"input_tokens": 200, "output_tokens": 20}
    assert by_model.groups == [
        {"key": "big", "calls": 2, "failed": 0, **sums, "cost_usd": 1.25},
        {"key": "scripted", "calls": 3, "failed": 1, **sums, "cost_usd": 0.5},
    ]
    by_operation = await ledger.usage(only, by="operation")
    assert [(g["key"], g["calls"]) for g in by_operation.groups] == [
        ("plan_draft", 1), ("plan_review", 1), ("planner", 3)
    ]  # fmt: skip
    modes = await ledger.usage(only, by="execution_mode")
    assert sorted((g["key"] or "", g["calls"]) for g in modes.groups) == [("", 4), ("review_first", 1)]
    for by, keys in (("session", ["sess-1", "sess-2"]), ("request", ["r1", "r2"]), ("context", ["general"])):
        assert [g["key"] for g in (await ledger.usage(only, by=by)).groups] == keys
    by_status = await ledger.usage(only, by="status")
    assert [(g["key"], g["calls"], g["failed"]) for g in by_status.groups] == [("error", 1, 1), ("ok", 4, 0)]
    failed = await ledger.usage(only.model_copy(update={"status": "error"}))
    assert [(r.request_id, r.call_index) for r in failed.rows] == [("r2", 2)]
    assert (await ledger.usage(only, limit=0)).rows == []
    everything = await ledger.usage(LedgerFilter(), by="profile")
    assert everything.totals["calls"] >= 6 and everything.totals["cost_usd"] >= 51.75
    with pytest.raises(PlanningError, match="cannot group by 'colour'; use operation, context, model"):
        await ledger.usage(only, by="colour")


async def test_usage_filters_each_narrow_the_rows(store, scope):
    ledger = store.ledger
    for row in (
        _usage(scope, "r1", 0, created_at=10.0),
        _usage(scope, "r1", 1, model="big", profile="deep", created_at=20.0),
        _usage(scope, "r2", 0, session_id="sess-2", context_type="project", created_at=30.0),
    ):
        await ledger.record_usage(row)

    async def calls(**fields: Any) -> list[tuple[str, int]]:
        report = await ledger.usage(LedgerFilter(scopes=frozenset({scope}), **fields))
        return sorted((r.request_id, r.call_index) for r in report.rows)

    assert await calls(session_id="sess-2") == [("r2", 0)]
    assert await calls(request_id="r1") == [("r1", 0), ("r1", 1)]
    assert await calls(context_type="project") == [("r2", 0)]
    assert await calls(model="big") == await calls(profile="deep") == [("r1", 1)]
    assert await calls(operation_type="planner", model="scripted") == [("r1", 0), ("r2", 0)]
    assert await calls(since=20.0) == [("r1", 1), ("r2", 0)]  # since is inclusive
    assert await calls(until=20.0) == [("r1", 0)]  # until is exclusive
    assert await calls(since=15.0, until=25.0) == [("r1", 1)]
    assert (await ledger.usage(LedgerFilter(scopes=frozenset()))).totals["calls"] == 0
    with pytest.raises(PlanningError, match="usage ledger cannot be filtered by component"):
        await ledger.usage(LedgerFilter(component="tool"))
    with pytest.raises(PlanningError, match="limit must be 0 or more"):
        await ledger.usage(LedgerFilter(), limit=-1)


async def test_error_reports_count_all_rows_and_group_them(store, scope):
    ledger = store.ledger
    for row in (
        _error(scope, "r1", 0),
        _error(scope, "r1", 1, tool_name=None, component="planner", stage="draft", kind="InvalidModelOutput"),
        _error(scope, "r2", 0, stage="review", created_at=1005.0),
        _error(f"{scope}-other", "r1", 0),
    ):
        await ledger.record_error(row)
    only = LedgerFilter(scopes=frozenset({scope}))
    page = await ledger.errors(only, by="component", limit=1)
    assert (page.total, len(page.rows), page.rows[0].request_id) == (3, 1, "r2")
    assert page.groups == [{"key": "planner", "count": 1}, {"key": "tool", "count": 2}]
    tools = await ledger.errors(only, by="tool")
    assert sorted((g["key"] or "", g["count"]) for g in tools.groups) == [("", 1), ("create_project", 2)]
    assert [g["key"] for g in (await ledger.errors(only, by="kind")).groups] == [
        "InvalidModelOutput", "PlanningError"
    ]  # fmt: skip
    stage = await ledger.errors(only.model_copy(update={"stage": "review"}), by="stage")
    assert (stage.total, stage.groups) == (1, [{"key": "review", "count": 1}])
    assert (await ledger.errors(only.model_copy(update={"tool_name": "create_project"}))).total == 2
    assert (await ledger.errors(only, by="context")).groups == [{"key": "general", "count": 3}]
    with pytest.raises(PlanningError, match="cannot group by 'model'; use component, stage, tool"):
        await ledger.errors(only, by="model")
    with pytest.raises(PlanningError, match="errors ledger cannot be filtered by model"):
        await ledger.errors(LedgerFilter(model="big"))


# The memory store, the schema and the migration


def test_the_memory_store_keeps_its_rows_across_event_loops(scope):
    async def create() -> None:
        store = open_planning("memory")
        await store.ensure_schema()
        await store.domain.create_project(scope, "Shared", "event-plan")
        await store.close()

    async def read() -> list[str]:
        store = open_planning("memory")
        await store.ensure_schema()
        try:
            return [p.project_id for p in await store.domain.list_projects(scope)]
        finally:
            await store.close()

    asyncio.run(create())
    assert asyncio.run(read()) == ["shared"]


async def test_ensure_schema_is_safe_when_called_at_once_and_again(tmp_path: Path):
    stores = [open_planning(f"sqlite:{tmp_path / 'race.db'}") for _ in range(4)]
    await asyncio.gather(*(s.ensure_schema() for s in stores))
    await stores[0].ensure_schema()
    await stores[0].domain.create_project("s", "After", "event-plan")
    for each in stores:
        await each.close()


async def test_ensure_schema_races_on_postgres(fresh_postgres: str):
    stores = [open_planning(fresh_postgres) for _ in range(4)]
    try:
        await asyncio.gather(*(s.ensure_schema() for s in stores))
        assert (await stores[1].domain.create_project("s", "After", "event-plan"))[0].project_id == "after"
    finally:
        for each in stores:
            await each.close()


def _planning_differences(url: str) -> list[Any]:
    """What the migrated tables lack or have beyond ``planning_metadata`` (empty when they match)."""
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            context = MigrationContext.configure(conn, opts={"compare_type": True})
            diffs = compare_metadata(context, planning_metadata)
    finally:
        engine.dispose()
    return [d for d in diffs if _table_of(d) in PLANNING_TABLES]


def _table_of(diff: Any) -> str:
    """The table a difference is about (alembic reports a column's changes as a list of tuples)."""
    first = diff[0] if isinstance(diff, list) else diff
    item = first[1]
    if isinstance(item, sa.Table):
        return item.name
    if isinstance(item, sa.Index | sa.UniqueConstraint):
        return item.table.name  # type: ignore[union-attr]
    return first[2]  # (kind, schema, table, ...)


async def _migrate(database: str) -> None:
    requests = RequestStore.for_checkpointer(database)
    await requests.setup()
    await requests.close()


async def test_migration_0004_keeps_tables_ensure_schema_made_first(tmp_path: Path, scope):
    database = tmp_path / "cli-first.db"
    planning = open_planning(f"sqlite:{database}")
    await planning.ensure_schema()  # a CLI run, before any server migrated this database
    await planning.domain.create_project(scope, "Early", "event-plan")
    await _migrate(f"sqlite:{database}")
    await _migrate(f"sqlite:{database}")  # a second start finds nothing to do
    with sqlite3.connect(database) as db:
        (version,) = db.execute("SELECT version_num FROM phasegraph_alembic_version").fetchone()
        assert version >= "0004"
    assert [p.project_id for p in await planning.domain.list_projects(scope)] == ["early"]
    await planning.ensure_schema()
    await planning.close()


async def test_migration_0004_creates_what_the_metadata_describes(tmp_path: Path):
    database = tmp_path / "server-first.db"
    await _migrate(f"sqlite:{database}")
    assert _planning_differences(f"sqlite:///{database}") == []
    planning = open_planning(f"sqlite:{database}")
    await planning.ensure_schema()  # the server migrated: nothing left to create
    await planning.close()
    engine = sa.create_engine(f"sqlite:///{database}")
    with engine.begin() as conn:
        command.downgrade(alembic_config(conn), "0003")
        assert not PLANNING_TABLES & set(sa.inspect(conn).get_table_names())
    engine.dispose()


async def test_migration_0004_on_postgres_matches_the_metadata(fresh_postgres: str):
    await _migrate(fresh_postgres)
    assert _planning_differences(fresh_postgres.replace("postgresql://", "postgresql+psycopg://", 1)) == []


@pytest.mark.parametrize("first", ["server", "cli"])
async def test_a_usage_table_from_before_call_statuses_gains_them(tmp_path: Path, scope, first: str):
    """Migration 0007 (a server) or ensure_schema (a CLI run) adds status and error_kind; old rows are ok."""
    database = tmp_path / "old.db"
    engine = sa.create_engine(f"sqlite:///{database}")
    with engine.begin() as conn:
        command.upgrade(alembic_config(conn), "0005")  # the planning tables as they were made before
        old = _usage(scope, "r-old", 0).model_dump(exclude={"status", "error_kind"})
        conn.execute(sa.table("phasegraph_usage", *map(sa.column, old)).insert().values(**old))
    engine.dispose()
    planning = open_planning(f"sqlite:{database}")
    if first == "server":
        await _migrate(f"sqlite:{database}")
    else:
        await planning.ensure_schema()
    assert _planning_differences(f"sqlite:///{database}") == []
    await planning.ledger.record_usage(_usage(scope, "r-new", 0, **FAILED_CALL))
    rows = (await planning.ledger.usage(LedgerFilter(scopes=frozenset({scope})))).rows
    await _migrate(f"sqlite:{database}")  # each finds the columns the other added, and keeps them
    await planning.ensure_schema()
    await planning.close()
    assert sorted((r.request_id, r.status, r.error_kind) for r in rows) == [
        ("r-new", "error", "provider"),
        ("r-old", "ok", None),
    ]


# Tools


def _context(tmp_path: Path, scope: str, store: PlanningStore | None, entity_id: str = "") -> ToolContext:
    return ToolContext(workspace=tmp_path, project_id=scope, planning=store, entity_id=entity_id)


def test_the_tools_and_which_are_destructive():
    tools = planning_tools()
    assert [t.name for t in tools] == planning_registry().names() == [
        "list_templates", "create_template", "create_project", "publish_context_document", "list_projects",
        "list_tasks", "create_task", "update_task", "audit_project", "archive_project", "delete_task",
    ]  # fmt: skip
    assert [t.name for t in tools if is_destructive(t)] == ["archive_project", "delete_task"]
    for item in tools:
        schema = item.tool_call_schema.model_json_schema()
        assert "context" not in schema["properties"] and item.description


async def test_tools_answer_in_json_and_default_to_the_entity(store, scope, tmp_path: Path):
    runner = ToolRunner(planning_registry(), _context(tmp_path, scope, store))

    async def ok(tool: str, **args: Any) -> dict[str, Any]:
        result = await runner.run(tool, args)
        assert result.status == "ok", result.error
        return json.loads(result.output or "")

    made = await ok("create_project", name="Spring Launch", template_id="product-launch")
    assert made["project"]["id"] == "spring-launch" and made["tasks_created"] == 5
    assert made["tasks"][0] == {"task_id": "spring-launch-t1", "title": "Write the positioning statement"}
    templates = await ok("list_templates", query="research")
    assert [t["template_id"] for t in templates["templates"]] == ["research-study"]
    custom = await ok("create_template", name="Retro", description="A sprint retro.", sections=["Went well"])
    assert custom["template"]["task_seeds"] == []
    assert [p["project_id"] for p in (await ok("list_projects"))["projects"]] == ["spring-launch"]

    # With the conversation about a project, project_id may be left out.
    runner = ToolRunner(planning_registry(), _context(tmp_path, scope, store, entity_id="spring-launch"))
    document = await ok("publish_context_document", title="Brief", body="Launch in April.")
    assert document["document"] == {
        "id": "spring-launch-doc-brief", "document_id": "spring-launch-doc-brief",
        "project_id": "spring-launch", "title": "Brief", "version": 1,
        "published_at": document["document"]["published_at"],
    }  # fmt: skip
    task = await ok("create_task", title="Book a photographer", priority="high")
    assert task["task"]["task_id"] == "spring-launch-t6"
    updated = await ok("update_task", task_id="spring-launch-t6", blocker="No budget yet")
    assert updated["changed"] == {"blocker": "No budget yet", "status": "blocked"}
    assert [t["task_id"] for t in (await ok("list_tasks", status="blocked"))["tasks"]] == ["spring-launch-t6"]
    audit = await ok("audit_project")
    assert (audit["health"], audit["blocked"][0]["task_id"]) == ("at_risk", "spring-launch-t6")
    assert (await ok("delete_task", task_id="spring-launch-t6"))["deleted"]["title"] == "Book a photographer"
    assert (await ok("archive_project"))["project"]["status"] == "archived"
    assert (await ok("list_projects", status="archived"))["projects"][0]["project_id"] == "spring-launch"


async def test_tool_failures_become_error_results(store, scope, tmp_path: Path):
    runner = ToolRunner(planning_registry(), _context(tmp_path, scope, store))
    unknown = await runner.run("create_project", {"name": "X", "template_id": "nope"})
    assert unknown.status == "error" and "no template 'nope'; templates: product-launch" in (
        unknown.error or ""
    )
    no_project = await runner.run("list_tasks", {})
    assert no_project.status == "error" and "name the project (project_id)" in (no_project.error or "")
    bad = await runner.run("update_task", {"task_id": "x-t1", "status": "finished"})
    assert bad.status == "error" and "status 'finished' is not allowed" in (bad.error or "")
    missing = await runner.run("create_template", {"name": "Y"})
    assert missing.status == "error" and "invalid arguments" in (missing.error or "")
    nothing = ToolRunner(planning_registry(), _context(tmp_path, scope, None))
    without = await nothing.run("list_templates", {})
    assert (without.status, without.error) == ("error", "this run has no project domain")
