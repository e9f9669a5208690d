"""Real-provider runs through the OpenAI-compatible API; skipped unless credentials are set."""

import os

import pytest

from nodes.events import Final

pytestmark = [
    pytest.mark.live,
    pytest.mark.skipif(
        not os.environ.get("OPENAI_API_KEY"), reason="needs OPENAI_API_KEY (and OPENAI_BASE_URL)"
    ),
]

MODEL = os.environ.get("PHASEGRAPH_LIVE_MODEL", "gpt-4o-mini")


@pytest.mark.parametrize("protocol", ["triggered_phase", "unified"])
async def test_real_model_answers_within_budget(collect, protocol: str):
    result = await collect(
        protocol, "Read docs/roadmap.md and tell me how many milestones it has.", model=f"openai:{MODEL}"
    )
    assert result.error is None, result.error
    assert isinstance(result.events[-1], Final)
    if protocol == "triggered_phase":
        assert sum(e.type == "tool_call" for e in result.events) <= 3
