"""Canonical tool-call signatures: one stable fingerprint per semantically equal call."""

from __future__ import annotations

import json
import posixpath
from collections.abc import Callable, Mapping
from typing import Any

ArgNormalizer = Callable[[Any], Any]

#: Key under which a tool's ``metadata`` may declare per-argument normalisers.
NORMALIZERS_KEY = "arg_normalizers"


def normalize_value(value: Any) -> Any:
    """Return a canonical form of a JSON-like value.

    Mapping keys are sorted (at every depth), strings lose surrounding whitespace and
    integral floats become ints, so ``1`` and ``1.0`` compare equal.
    """
    if isinstance(value, Mapping):
        return {str(k): normalize_value(value[k]) for k in sorted(value, key=str)}
    if isinstance(value, list | tuple):
        return [normalize_value(v) for v in value]
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def normalize_path(value: Any) -> Any:
    """Normalise a workspace-relative path so ``./docs/../docs/a.md`` equals ``docs/a.md``."""
    if not isinstance(value, str):
        return value
    cleaned = posixpath.normpath(value.strip().replace("\\", "/") or ".")
    return cleaned.lstrip("/") if cleaned != "/" else "."


def canonical_signature(
    name: str,
    args: Mapping[str, Any],
    project_id: str,
    normalizers: Mapping[str, ArgNormalizer] | None = None,
) -> str:
    """Build ``name|action|normalised-args|project`` for a tool call.

    Args:
        name: Tool name.
        args: Arguments as the model sent them.
        project_id: Project the call runs in; the same call in another project differs.
        normalizers: Optional per-argument normalisers declared by the tool.

    Returns:
        A readable string that is equal for calls that mean the same thing.
    """
    normalizers = normalizers or {}
    cleaned = {key: normalizers[key](value) if key in normalizers else value for key, value in args.items()}
    canonical = normalize_value(cleaned)
    action = canonical.pop("action", "")
    body = json.dumps(canonical, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return f"{name.strip()}|{action}|{body}|{project_id}"
