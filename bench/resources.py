"""``python -m bench.resources``: how long a resource repository takes to load and to search.

A synthetic world (characters and places in YAML, chapters in Markdown, items in JSON, some of them
in list files) is written once, then loaded (files parsed and the FTS5 index built) and searched
with a mix of names, common words and hostile text. No assertion is made on the figures.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from phasegraph.tools.resources import ResourceRepository

SYLLABLES = ["ka", "ri", "mo", "sel", "dra", "vin", "tor", "lu", "esh", "nar", "bel", "quo", "fen", "ost"]
SEA_WORDS = ["tide", "harbour", "reef", "storm", "salt", "rope", "gull", "anchor", "marsh", "keel", "sail"]
STORY_WORDS = ["lamp", "bell", "chart", "lantern", "ledger", "drowned", "compass", "wreck", "keeper"]
MORE_WORDS = ["smuggler", "debt", "fog", "shingle", "channel", "night", "grey", "fox", "island", "captain"]
WORDS = [*SEA_WORDS, *STORY_WORDS, *MORE_WORDS]
HOSTILE = ["Mira's", '"unterminated', "NEAR AND OR", "***", "a:b -c*", "(tide"]
KINDS = ("character", "place", "chapter", "item", "item-list")
LIST_SIZE = 5


def _name(rng: random.Random) -> str:
    return " ".join("".join(rng.choices(SYLLABLES, k=rng.randint(2, 3))).title() for _ in range(2))


def _sentence(rng: random.Random, words: int) -> str:
    return " ".join(rng.choices(WORDS, k=words)).capitalize() + "."


def _properties(rng: random.Random, kind: str, refs: list[str]) -> dict[str, Any]:
    props: dict[str, Any] = {
        "name": _name(rng),
        "aliases": [f"the {rng.choice(WORDS).title()} {rng.choice(WORDS).title()}"],
        "summary": _sentence(rng, 12),
        "description": " ".join(_sentence(rng, rng.randint(8, 16)) for _ in range(6)),
    }
    if refs:
        props["related"] = rng.sample(refs, k=min(3, len(refs)))
    return props


def generate_world(folder: Path, n: int, seed: int = 7) -> None:
    """Write ``n`` synthetic resources under ``folder``: the same files for the same ``n`` and ``seed``."""
    rng = random.Random(seed)
    refs: list[str] = []
    pending: list[dict[str, Any]] = []
    for number in range(n):
        kind = rng.choice(KINDS)
        type_ = "item" if kind == "item-list" else kind
        id_ = f"{type_}-{number:05d}"
        props = _properties(rng, kind, refs)
        if kind == "item-list":
            pending.append({"id": id_, **props})
            if len(pending) == LIST_SIZE:
                _write(folder / "item" / f"list-{number:05d}.json", json.dumps(pending, indent=2))
                pending = []
        else:
            _write_single(folder / type_, id_, kind, props)
        refs.append(f"res://{type_}/{id_}")
    if pending:
        _write(folder / "item" / "list-rest.json", json.dumps(pending, indent=2))


def _write_single(folder: Path, id_: str, kind: str, props: dict[str, Any]) -> None:
    if kind == "chapter":
        body = props.pop("description")
        meta = yaml.safe_dump({"title": props.pop("name"), **props}, sort_keys=False)
        _write(folder / f"{id_}.md", f"---\n{meta}---\n{body}\n")
    elif kind == "item":
        _write(folder / f"{id_}.json", json.dumps(props, indent=2))
    else:
        _write(folder / f"{id_}.yaml", yaml.safe_dump(props, sort_keys=False))


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def measure_fts(
    n: int = 1000, *, folder: Path | None = None, queries: int = 50, seed: int = 7
) -> dict[str, float]:
    """Load seconds (parsing and index build) and mean search seconds for a world of ``n`` resources.

    Args:
        n: Resources to generate (ignored when ``folder`` already holds a world).
        folder: A world to measure; a synthetic one is written to a temporary folder when ``None``.
        queries: Searches to time: names, random words and hostile text, in a fixed order.
        seed: Seed of the generator and of the queries.
    """
    if folder is None:
        with tempfile.TemporaryDirectory(prefix="phasegraph-resources-") as temporary:
            generate_world(Path(temporary), n, seed)
            return measure_fts(n, folder=Path(temporary), queries=queries, seed=seed)
    started = time.perf_counter()
    repo = ResourceRepository.load(folder)
    load_seconds = time.perf_counter() - started
    rng = random.Random(seed)
    names = [
        str(repo.get(uri).properties.get("name") or repo.get(uri).properties.get("title"))
        for uri in repo.uris()
    ]
    texts = [
        rng.choice([rng.choice(names), " ".join(rng.sample(WORDS, 2)), rng.choice(HOSTILE)])
        for _ in range(queries)
    ]
    timings = []
    for text in texts:
        began = time.perf_counter()
        repo.search(text)
        timings.append(time.perf_counter() - began)
    repo.close()
    return {
        "resources": float(len(repo)),
        "load_seconds": load_seconds,
        "search_mean_seconds": statistics.fmean(timings),
        "search_max_seconds": max(timings),
    }


def main() -> None:
    """Print the figures for a synthetic world (1,000 resources unless ``--n`` says otherwise)."""
    parser = argparse.ArgumentParser(prog="python -m bench.resources", description=__doc__)
    parser.add_argument("--n", type=int, default=1000, help="resources in the synthetic world")
    parser.add_argument("--queries", type=int, default=50, help="searches to time")
    args = parser.parse_args()
    figures = measure_fts(args.n, queries=args.queries)
    print(f"resources:        {figures['resources']:.0f}")
    print(f"load + index:     {figures['load_seconds'] * 1000:.1f} ms")
    print(f"search (mean):    {figures['search_mean_seconds'] * 1000:.3f} ms over {args.queries} queries")
    print(f"search (slowest): {figures['search_max_seconds'] * 1000:.3f} ms")
    print(f"load + 1 search:  {(figures['load_seconds'] + figures['search_mean_seconds']) * 1000:.1f} ms")


if __name__ == "__main__":
    main()
