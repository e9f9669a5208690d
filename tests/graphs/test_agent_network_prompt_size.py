"""Seed 003's acceptance: step 10's prompt of a scripted long run is at most half of naive injection.

The run is the bench's (bench/agent_network.py): three agents read generated documents of 1-3 KB and hand
control around; step 10 is the lead's second control epoch, after two reads of its own in that epoch and
four reads (one of them the lead's own, in its first epoch) before it.
"""

from __future__ import annotations

from pathlib import Path

from bench.agent_network import STEP, marker, prompt_size_run


async def test_step_10_prompt_is_at_most_half_of_naive_full_history_injection(tmp_path: Path):
    sizes = await prompt_size_run(tmp_path)
    print(
        f"\nagent_network step {sizes.step} prompt: {sizes.actual_chars} chars sent (segment injection), "
        f"{sizes.naive_chars} chars with naive full-history injection, ratio {sizes.ratio:.3f}"
    )
    assert sizes.step == STEP == 10
    assert sizes.actual_chars <= sizes.naive_chars / 2


async def test_step_10_prompt_injects_the_current_epochs_outputs_and_no_earlier_ones(tmp_path: Path):
    sizes = await prompt_size_run(tmp_path)
    # a long run: earlier epochs hold outputs, among them the same agent's from its first epoch
    assert (sizes.agent, sizes.epoch) == ("lead", 4)
    assert sizes.current_files == ["research/latency-metrics.md", "docs/owners.md"]
    assert "docs/brief.md" in sizes.earlier_files and len(sizes.earlier_files) == 4
    for path in sizes.current_files:
        text = (tmp_path / "workspace" / path).read_text(encoding="utf-8")
        assert text.strip() in sizes.prompt, f"{path}'s full output is missing from step {STEP}'s prompt"
        assert marker(path) in sizes.prompt
    for path in sizes.earlier_files:
        assert marker(path) not in sizes.prompt, f"{path}, read in an earlier epoch, reached the prompt"
        assert marker(path) in sizes.naive_prompt  # the anchor does carry it
    # the step-10 prompt is the one the run sent: its trace entry and its agent_step event agree
    step = next(e for e in sizes.events if e.type == "agent_step" and e.step == STEP)
    assert step.agent == "lead" and step.epoch == 4
    assert step.to_dict()["promptChars"] == sizes.actual_chars
