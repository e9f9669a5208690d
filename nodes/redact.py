"""Keep configured secrets (provider keys, bearer tokens) out of events, stored records and logs.

A provider that echoes its API key in an error body, or a tool that echoes a bearer token, would
otherwise carry the secret into everything downstream. Each sink applies one ``Redactor``, built
from settings, at the single place it writes.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from functools import lru_cache
from typing import Any, TypeVar

from pydantic import BaseModel

from phasegraph.nodes.settings import ServerSettings, provider_settings

#: What a secret is replaced with.
MASK = "[REDACTED]"
#: Shorter values are not treated as secrets: a local server's key may be "x", and replacing every
#: "x" would garble text without protecting anything.
MIN_SECRET_CHARS = 8
#: Every run of ``MIN_SECRET_CHARS`` characters holds a whole piece of this length at a multiple of it.
ANCHOR = MIN_SECRET_CHARS // 2

M = TypeVar("M", bound=BaseModel)


class Redactor:
    """Masks every run of ``MIN_SECRET_CHARS`` or more characters of a configured secret.

    A provider that quotes the first dozen characters of a key leaks part of it as surely as one
    that quotes it whole, so the unit masked is a fragment, not the secret. Every
    ``MIN_SECRET_CHARS``-long window of a secret contains one of its "anchors" (the ``ANCHOR``-long
    pieces at multiples of ``ANCHOR``), so a text none of them occurs in is clean after one fast
    substring search each; only around an anchor's occurrences are windows compared.
    """

    def __init__(self, secrets: Iterable[str]) -> None:
        # Longest first, so a secret that contains another is masked whole.
        self.secrets = sorted({s for s in secrets if len(s) >= MIN_SECRET_CHARS}, key=len, reverse=True)
        self._windows = {
            s[i : i + MIN_SECRET_CHARS] for s in self.secrets for i in range(len(s) - MIN_SECRET_CHARS + 1)
        }
        self._anchors = {
            s[i : i + ANCHOR] for s in self.secrets for i in range(0, len(s) - ANCHOR + 1, ANCHOR)
        }

    def spans(self, value: str) -> list[tuple[int, int]]:
        """The maximal ``(start, end)`` runs of ``value`` made of fragments of a secret, in order."""
        starts: set[int] = set()
        for anchor in self._anchors:
            at = value.find(anchor)
            while at != -1:
                # A fragment holding this occurrence starts at most ANCHOR characters before it.
                for start in range(max(at - ANCHOR, 0), at + 1):
                    if value[start : start + MIN_SECRET_CHARS] in self._windows:
                        starts.add(start)
                at = value.find(anchor, at + 1)
        runs: list[tuple[int, int]] = []
        for start in sorted(starts):
            end = start + MIN_SECRET_CHARS
            if runs and start <= runs[-1][1]:
                runs[-1] = (runs[-1][0], max(runs[-1][1], end))
            else:
                runs.append((start, end))
        return runs

    def found(self, value: str) -> bool:
        """Whether ``value`` holds a fragment of a secret."""
        return bool(self.spans(value))

    def text(self, value: str) -> str:
        """``value`` with every fragment of a secret masked (adjacent fragments as one ``MASK``)."""
        masked, last = [], 0
        for start, end in self.spans(value):
            masked += [value[last:start], MASK]
            last = end
        return "".join([*masked, value[last:]]) if masked else value

    def data(self, value: Any) -> Any:
        """A copy of JSON-like data (dicts, lists, strings) with every string redacted."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {self.data(k): self.data(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.data(v) for v in value]
        return value

    def model(self, value: M) -> M:
        """``value`` itself when it holds no secret, else a redacted copy of the same type."""
        if not self.secrets or not self.found(value.model_dump_json()):
            return value
        return type(value).model_validate(self.data(value.model_dump(mode="json")))


@lru_cache(maxsize=1)
def redactor() -> Redactor:
    """The process's redactor: every provider key and every bearer token configured in settings."""
    provider = provider_settings()
    keys = [provider.openai_api_key, provider.anthropic_api_key]
    secrets = [k.get_secret_value() for k in keys if k is not None]
    return Redactor([*secrets, *ServerSettings().bearer_tokens()])


class RedactingFilter(logging.Filter):
    """A log filter (install it on handlers) that masks secrets in messages and tracebacks."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Render the record's message and traceback now, redacted; always keep the record."""
        scrub = redactor()
        if scrub.secrets:
            # Arguments are redacted one by one, so formatters that read them (uvicorn's access
            # log does) keep working; only a secret hidden in a non-string argument flattens them.
            record.msg = scrub.text(record.msg) if isinstance(record.msg, str) else record.msg
            if isinstance(record.args, tuple):
                record.args = tuple(scrub.data(a) if isinstance(a, str) else a for a in record.args)
            elif isinstance(record.args, dict):
                record.args = scrub.data(record.args)
            if scrub.text(message := record.getMessage()) != message:
                record.msg, record.args = scrub.text(message), None
        if record.exc_info:
            record.exc_text = scrub.text(logging.Formatter().formatException(record.exc_info))
            record.exc_info = None
        if record.stack_info:
            record.stack_info = scrub.text(record.stack_info)
        return True


def redact_logging(logger: logging.Logger | None = None) -> None:
    """Install ``RedactingFilter`` on every handler of ``logger`` (the root logger by default)."""
    for handler in (logger or logging.getLogger()).handlers:
        if not any(isinstance(f, RedactingFilter) for f in handler.filters):
            handler.addFilter(RedactingFilter())
