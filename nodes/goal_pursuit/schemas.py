"""What each phase answers (pydantic, obtained by structured output) and what a determination returns.

Field descriptions are part of the prompt: they become the tool schema the model fills in.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field, model_validator

#: Most searches, and most URIs or tools, one plan may ask for: a runaway plan is corrected, not run.
MAX_SEARCHES = 10
MAX_ITEMS = 50


class DiscoveryPlan(BaseModel):
    """Phase 1: what to add to the context before deciding."""

    discovery_analysis: str = Field(description="What the context already holds and what is still missing.")
    search_queries: list[str] = Field(
        default_factory=list,
        max_length=MAX_SEARCHES,
        description="Terms to search the resource repository for (its hits are listed).",
    )
    query_resources: list[str] = Field(
        default_factory=list,
        max_length=MAX_ITEMS,
        description="URIs (res://<type>/<id>) of resources to load into the context.",
    )
    expand_tools: list[str] = Field(
        default_factory=list,
        max_length=MAX_ITEMS,
        description="Tools whose full parameter schema you need to plan a call.",
    )
    refinement_needed: bool = Field(
        default=False,
        description="True when the context holds resources, properties or tools irrelevant to the goal.",
    )

    def is_empty(self) -> bool:
        """Nothing more to discover: the context is ready for a decision."""
        return not (self.search_queries or self.query_resources or self.expand_tools)


class PropertyRule(BaseModel):
    """Properties of one resource type."""

    resource_type: str = Field(description="The type in res://<type>/<id>, e.g. 'character'.")
    properties: list[str] = Field(description="Property names.")


class RefinementPlan(BaseModel):
    """Phase 2: what to take out of the context, and the order of what stays."""

    exclude_resources: list[str] = Field(
        default_factory=list, max_length=MAX_ITEMS, description="URIs to remove from the context."
    )
    exclude_properties: list[PropertyRule] = Field(
        default_factory=list, description="Properties to hide, per resource type."
    )
    include_properties: list[PropertyRule] = Field(
        default_factory=list, description="Per resource type, the only properties to show (optional)."
    )
    collapse_tools: list[str] = Field(
        default_factory=list,
        max_length=MAX_ITEMS,
        description="Expanded tools to return to their one-line summary.",
    )
    sorted_segments: list[str] = Field(
        default_factory=list,
        max_length=MAX_ITEMS,
        description="URIs of the context's resources, most relevant first.",
    )


class Execution(BaseModel):
    """The tool call an execute decision makes."""

    tool: str = Field(description="Name of the tool to run.")
    params: dict[str, Any] = Field(default_factory=dict, description="Its arguments, as its schema asks.")
    reason: str = Field(default="", description="Why this call moves the goal forward.")


class Finalization(BaseModel):
    """The answer a finalize decision gives."""

    response: str = Field(description="The answer to the user.")
    status: Literal["success", "partial", "failure"] = Field(
        default="success", description="success, partial (some of the goal), or failure (with why)."
    )


class ActionDecision(BaseModel):
    """Phase 3: run one tool, or finish."""

    situation_analysis: str = Field(
        description="Where the goal stands, given the context and finished tasks."
    )
    decision_type: Literal["execute", "finalize"] = Field(description="execute a tool, or finalize.")
    execution: Execution | None = Field(default=None, description="Required when decision_type is execute.")
    finalization: Finalization | None = Field(
        default=None, description="Required when decision_type is finalize."
    )
    context_verification: str = Field(
        default="", description="How the context confirms the prerequisites and every parameter."
    )

    @model_validator(mode="after")
    def _matching_part(self) -> ActionDecision:
        if self.decision_type == "execute" and self.execution is None:
            raise ValueError("decision_type 'execute' needs 'execution' (tool and params)")
        if self.decision_type == "finalize" and self.finalization is None:
            raise ValueError("decision_type 'finalize' needs 'finalization' (response and status)")
        return self


class PursuitAssessment(BaseModel):
    """Where the pursuit stands; refinement analysis evolves it between iterations."""

    finished_tasks: list[str] = Field(default_factory=list, description="What has been done.")
    remaining_work_summary: str = Field(default="", description="What is left to reach the goal.")
    required_context: str = Field(default="", description="What must be in the context to act.")
    expected_actions: str = Field(default="", description="The actions expected to reach the goal.")
    boundary_conditions: list[str] = Field(
        default_factory=list, description="Limits the actions must respect."
    )
    exception_conditions: list[str] = Field(
        default_factory=list, description="Situations in which to stop or do something else."
    )
    success_criteria: list[str] = Field(default_factory=list, description="How to tell the goal is reached.")


class AssessmentUpdate(BaseModel):
    """The assessment fields a refinement changes (omitted fields stay as they are)."""

    finished_tasks: list[str] | None = None
    remaining_work_summary: str | None = None
    required_context: str | None = None
    expected_actions: str | None = None
    boundary_conditions: list[str] | None = None
    exception_conditions: list[str] | None = None
    success_criteria: list[str] | None = None


class Approval(BaseModel):
    """How sure the analysis is of an approved decision."""

    confidence: float = Field(default=1.0, ge=0, le=1, description="0 to 1.")
    notes: str = Field(default="", description="Anything the executor should know.")


class Refinement(BaseModel):
    """What a refine verdict changes before the next iteration."""

    assessment: AssessmentUpdate = Field(
        default_factory=AssessmentUpdate, description="Assessment fields to change (e.g. a new prerequisite)."
    )
    exploration_hints: list[str] = Field(
        default_factory=list, description="What the next context discovery should look for."
    )


class RefinementDecision(BaseModel):
    """Phase 4: approve the decision, or refine the assessment and iterate."""

    analysis: str = Field(description="Quality of the decision and any issue found.")
    verdict: Literal["approve", "refine"] = Field(description="approve, or refine.")
    approval: Approval | None = Field(default=None, description="When approving.")
    refinement: Refinement | None = Field(default=None, description="Required when refining.")

    @model_validator(mode="after")
    def _matching_part(self) -> RefinementDecision:
        if self.verdict == "refine" and self.refinement is None:
            raise ValueError("verdict 'refine' needs 'refinement' (assessment changes and hints)")
        return self


class OperationPlan(BaseModel):
    """A determination's result: run this tool with these parameters."""

    kind: Literal["operation_plan"] = "operation_plan"
    tool: str
    params: dict[str, Any] = Field(default_factory=dict)
    reason: str = ""


class Resolution(BaseModel):
    """A determination's result: the goal is answered."""

    kind: Literal["resolution"] = "resolution"
    response: str
    status: Literal["success", "partial", "failure"] = "success"


PlannedAction = OperationPlan | Resolution


def planned_action(decision: ActionDecision) -> PlannedAction:
    """The OperationPlan or Resolution an action decision stands for."""
    if decision.execution is not None and decision.decision_type == "execute":
        return OperationPlan(
            tool=decision.execution.tool, params=decision.execution.params, reason=decision.execution.reason
        )
    final = decision.finalization or Finalization(response=decision.situation_analysis)
    return Resolution(response=final.response, status=final.status)


def read_action(data: dict[str, Any]) -> PlannedAction:
    """A planned action back from state (stored as a plain dict, with its ``kind``)."""
    return (
        OperationPlan.model_validate(data)
        if data["kind"] == "operation_plan"
        else Resolution.model_validate(data)
    )
