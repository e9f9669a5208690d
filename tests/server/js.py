"""The real JS clients of tests/js/ (installed by ``make test``'s ``npm ci``), run and read back.

Each script prints one JSON report: every client call is a named step with its value, or with the HTTP
status and body of its failure, so a test names exactly which call failed and how.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

JS = Path(__file__).resolve().parents[1] / "js"
NODE = shutil.which("node") or "node"
#: The six protocols, in the order the scripts run them.
PROTOCOLS = ("triggered_phase", "unified", "goal_pursuit", "agent_network", "xml_contract", "planner")
#: The first message of each protocol's demo script (tests/js/lib.mjs FIRST) and the follow-up (SECOND).
SECOND = "Thanks. Anything else I should know?"
#: No client phones home from a test.
QUIET = {"COPILOTKIT_TELEMETRY_DISABLED": "true", "DO_NOT_TRACK": "1", "SCARF_ANALYTICS": "false"}


def installed() -> None:
    """Fail with the fix when ``npm ci`` has not run (``make test`` runs it before pytest)."""
    assert (JS / "node_modules" / ".package-lock.json").is_file(), (
        "tests/js/node_modules is missing: run `make test`, or `npm ci` in tests/js"
    )


def node(
    *args: str, timeout: float = 600, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``node ARGS`` in tests/js; its output is returned, its failure raised with stderr."""
    installed()
    result = subprocess.run(
        [NODE, *args],
        cwd=JS,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **QUIET, **(env or {})},
    )
    command = " ".join(args)
    assert result.returncode == 0, f"node {command} exited {result.returncode}:\n{result.stderr[-4000:]}"
    return result


@dataclass
class Report:
    """One script's report: ``steps[name]`` is ``{ok, value}`` or ``{ok: false, status, error}``."""

    steps: dict[str, dict[str, Any]]
    stderr: str

    def ok(self, name: str) -> Any:
        """The value of a step that must have succeeded; else fail with its status and body."""
        assert name in self.steps, f"step {name} never ran (an earlier step failed?): {sorted(self.steps)}"
        step = self.steps[name]
        assert step["ok"], f"{name} failed: status {step['status']}: {step['error']}"
        return step["value"]


def run_script(script: str, url: str, *protocols: str, timeout: float = 600) -> Report:
    """Run ``tests/js/SCRIPT URL [PROTOCOL ...]`` and parse its report."""
    result = node(script, url, *protocols, timeout=timeout)
    report = json.loads(result.stdout.strip().splitlines()[-1])
    return Report(steps=report["steps"], stderr=result.stderr)
