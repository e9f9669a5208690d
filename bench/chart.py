"""The chart on docs/performance.md: per-cycle overhead, durability cost and the server under load."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # no screen: render straight to a file

import matplotlib.pyplot as plt

from bench.harness import Row


def draw(rows: list[Row], path: Path) -> None:
    """Grouped bars of each timed row's headline figure (median, min-max as error bars, ratio on top)."""
    panels = [
        ("1", "ms per tool cycle", lambda r: r.title.rsplit(": ", 1)[-1]),
        ("5", "ms per 3-cycle turn", lambda r: "durability"),
        ("4", "p50 run latency, s", lambda r: r.title.rsplit(", ", 1)[-1]),
    ]
    figure, axes = plt.subplots(1, len(panels), figsize=(15, 4.2))
    for axis, (key, label, group_of) in zip(axes, panels, strict=True):
        chosen = [r for r in rows if r.key == key and r.sides]
        _bars(axis, chosen, label, group_of)
        if key == "4":  # one run takes 0.2 s, five hundred take tens of seconds
            axis.set_yscale("log")
    figure.suptitle("phasegraph bench: each side next to its anchor, measured in the same run")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def _bars(axis: plt.Axes, rows: list[Row], label: str, group_of: object) -> None:
    if not rows:
        axis.set_title(f"{label}: not measured")
        return
    sides = list(dict.fromkeys(s.name for r in rows for s in r.sides))
    width = 0.8 / len(sides)
    for offset, side in enumerate(sides):
        xs, heights, lows, highs, ratios = [], [], [], [], []
        for position, row in enumerate(rows):
            if not _has(row, side):
                continue
            figure = row.side(side).figures[row.headline]
            assert isinstance(figure.value, float)
            xs.append(position + offset * width)
            heights.append(figure.value)
            lows.append(figure.value - (figure.low if figure.low is not None else figure.value))
            highs.append((figure.high if figure.high is not None else figure.value) - figure.value)
            ratios.append(_ratio_label(row, side))
        bars = axis.bar(xs, heights, width, yerr=[lows, highs], capsize=2, label=side)
        axis.bar_label(bars, labels=ratios, fontsize=7, padding=2)
    axis.set_xticks([p + 0.4 - width / 2 for p in range(len(rows))])
    axis.set_xticklabels([group_of(r) for r in rows])  # type: ignore[operator]
    axis.set_ylabel(label)
    axis.legend(fontsize=7)


def _has(row: Row, side: str) -> bool:
    """The row has a timed headline figure for ``side``."""
    found = next((s.figures.get(row.headline) for s in row.sides if s.name == side), None)
    return found is not None and isinstance(found.value, float)


def _ratio_label(row: Row, side: str) -> str:
    """What the bar is worth against its anchor, e.g. ``6.5x`` (the anchor itself: ``anchor``)."""
    if side == row.anchor:
        return "anchor"
    ratio = row.ratio(row.side(side))
    return f"{ratio:.1f}x" if ratio is not None else ""
