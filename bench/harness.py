"""Figures, rows and side-by-side timing shared by every benchmark row.

A row names its workload, its sides and which side is the anchor; each side carries figures
(a timing with its spread, or a count). Timed sides run interleaved (A, B, C, then B, C, A ...)
so a noisy machine slows every side alike, and the ratio against the anchor holds.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from typing import Any

Value = float | int | bool | str


@dataclass
class Figure:
    """One figure: a plain value, or the median of timed samples with their min and max."""

    value: Value
    unit: str = ""
    low: float | None = None
    high: float | None = None
    samples: int | None = None

    @classmethod
    def of_samples(cls, samples: list[float], unit: str = "ms", scale: float = 1000.0) -> Figure:
        """Median and min-max of ``samples`` (seconds), shown in ``unit`` (``scale`` per second)."""
        scaled = [s * scale for s in samples]
        return cls(statistics.median(scaled), unit, min(scaled), max(scaled), len(scaled))

    def text(self) -> str:
        """How the figure reads in the table."""
        if isinstance(self.value, bool):
            return "yes" if self.value else "no"
        if isinstance(self.value, float):
            shown = _num(self.value)
            if self.low is not None and self.high is not None:
                shown += f" ({_num(self.low)}-{_num(self.high)})"
            return f"{shown} {self.unit}".strip()
        return f"{self.value} {self.unit}".strip()


@dataclass
class Side:
    """One side of a comparison: what was run, and its figures."""

    name: str
    figures: dict[str, Figure] = field(default_factory=dict)


@dataclass
class Row:
    """One comparison: a workload run on several sides, the first of ``sides`` named ``anchor``."""

    key: str  # "1", "3b", ...: rows sort and group by it
    title: str
    workload: str
    anchor: str
    headline: str  # the figure the ratio is taken of
    sides: list[Side] = field(default_factory=list)
    note: str = ""

    def side(self, name: str) -> Side:
        """The side called ``name``."""
        return next(s for s in self.sides if s.name == name)

    def ratio(self, side: Side) -> float | None:
        """``side``'s headline figure over the anchor's (``None`` when either is not a number)."""
        mine = _number(side.figures.get(self.headline))
        anchor = _number(self.side(self.anchor).figures.get(self.headline))
        if mine is None or anchor is None:
            return None
        if anchor == 0:
            return None if mine else 1.0
        return mine / anchor

    def to_dict(self) -> dict[str, Any]:
        """Every figure of both sides, with the ratios, for ``latest.json``."""
        data = asdict(self)
        data["ratios"] = {s.name: self.ratio(s) for s in self.sides}
        return data


def _number(figure: Figure | None) -> float | None:
    """The figure's value when it is a number (a yes/no or a text is not)."""
    if figure is None or isinstance(figure.value, bool) or not isinstance(figure.value, int | float):
        return None
    return float(figure.value)


def not_landed(key: str, protocol: str, workload: str) -> Row:
    """A row reserved for a protocol whose issue has not landed yet."""
    return Row(key, f"{protocol}", workload, anchor="-", headline="-", note="not landed yet")


async def interleaved(
    sides: dict[str, Callable[[], Awaitable[object]]], repeats: int, warmup: int = 1
) -> dict[str, list[float]]:
    """Time each side ``repeats`` times, rotating the order each round; seconds per call.

    ``warmup`` rounds run first and are not kept (imports, caches, first connections).
    """
    names = list(sides)
    samples: dict[str, list[float]] = {name: [] for name in names}
    for round_ in range(warmup + repeats):
        shift = round_ % len(names)
        for name in names[shift:] + names[:shift]:
            started = time.perf_counter()
            await sides[name]()
            elapsed = time.perf_counter() - started
            if round_ >= warmup:
                samples[name].append(elapsed)
    return samples


def _num(value: float) -> str:
    if value == 0:
        return "0"
    if abs(value) < 0.1:  # two significant digits: 0.00074 s and 0.021 s, not 0.00 and 0.02
        return f"{value:.{1 - math.floor(math.log10(abs(value)))}f}"
    if abs(value) >= 100:
        return f"{value:.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"
