"""Model prices: what a call's tokens cost, from a configurable table (USD per million tokens).

The bundled table (``prices.json``) prices a few OpenAI models and the scripted model (at
gpt-4o-mini's rate, so offline runs show costs); ``PHASEGRAPH_PRICE_TABLE`` names a JSON file
that replaces it. Keys are model specs as clients see them, with shell wildcards (``openai:*``).
"""

from __future__ import annotations

import json
from fnmatch import fnmatchcase
from functools import lru_cache
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from phasegraph.nodes.errors import ConfigurationError
from phasegraph.nodes.settings import run_settings

BUNDLED = Path(__file__).resolve().parent / "prices.json"


class Price(BaseModel):
    """USD per million input and output tokens."""

    model_config = ConfigDict(extra="forbid")

    input_per_million: float = Field(ge=0)
    output_per_million: float = Field(ge=0)

    def cost(self, input_tokens: int, output_tokens: int) -> float:
        """What that many tokens cost, in USD."""
        return (input_tokens * self.input_per_million + output_tokens * self.output_per_million) / 1_000_000


@lru_cache(maxsize=8)
def load_prices(path: str = "") -> dict[str, Price]:
    """The price table in ``path`` (the bundled one when empty); a bad file is a ConfigurationError."""
    source = Path(path) if path else BUNDLED
    try:
        return TypeAdapter(dict[str, Price]).validate_python(json.loads(source.read_text(encoding="utf-8")))
    except OSError as exc:
        raise ConfigurationError(f"price table {source.name}: {exc.strerror or type(exc).__name__}") from None
    except (json.JSONDecodeError, ValidationError) as exc:
        raise ConfigurationError(f"price table {source.name} is not a valid table: {exc}") from None


def price_of(model: str, table: dict[str, Price] | None = None) -> Price | None:
    """The price of a model spec: an exact key first, then the first wildcard key that matches."""
    prices = table if table is not None else load_prices(run_settings().price_table)
    if model in prices:
        return prices[model]
    return next((price for key, price in prices.items() if fnmatchcase(model, key)), None)


def cost_usd(
    model: str, input_tokens: int, output_tokens: int, table: dict[str, Price] | None = None
) -> float:
    """The cost of one call (0.0 for a model the table does not price)."""
    price = price_of(model, table)
    return round(price.cost(input_tokens, output_tokens), 8) if price is not None else 0.0
