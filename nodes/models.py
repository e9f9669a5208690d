"""One model factory for the CLI, the server, Studio and notebooks; one translation of provider errors."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import aclosing
from pathlib import Path
from typing import Any

from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessageChunk, BaseMessage
from langchain_core.runnables import Runnable, RunnableBinding

from phasegraph.nodes.errors import ConfigurationError, PhasegraphError, ProviderError
from phasegraph.nodes.redact import redactor
from phasegraph.nodes.scripted import ScriptedChatModel, load_script
from phasegraph.nodes.settings import provider_settings, run_settings

logger = logging.getLogger(__name__)

DEMO_DIR = Path(__file__).resolve().parent / "demo"
DEMO_SCRIPT = DEMO_DIR / "script.json"
DEMO_WORKSPACE = DEMO_DIR / "workspace"
DEMO_MODEL = "scripted:demo"

SPEC_HELP = (
    "use 'provider:model' as LangChain's init_chat_model knows it ('openai:<model>' for any "
    "OpenAI-compatible server; 'anthropic:', 'ollama:', ... once their langchain package is installed) "
    "or 'scripted:<path-to-script.json>' ('scripted:demo' is the bundled script)"
)
#: Statuses the provider clients (openai, anthropic) retry with backoff before giving up.
RETRIED_STATUSES = frozenset({408, 409, 429})
#: Longest piece of a provider's own error text kept in a ProviderError message.
DETAIL_CHARS = 300


def make_model(
    spec: str, *, call_index: int = 0, user_turn: int = 0, demo_script: Path = DEMO_SCRIPT
) -> BaseChatModel:
    """Turn a model spec string into a LangChain chat model.

    Args:
        spec: ``provider:model`` (through ``init_chat_model``, with this process's retry and timeout
            settings) or ``scripted:<path>`` (``scripted:demo`` for the bundled script).
        call_index: How many model calls this user message already made; a scripted model starts
            at that turn, so its position comes from the run's state rather than process memory.
        user_turn: Which user message of the thread is being answered (0: the first); a scripted
            model reads its ``follow_ups`` from the second on.
        demo_script: The script ``scripted:demo`` stands for (each protocol bundles its own).

    Raises:
        ConfigurationError: The spec names no known provider, its package is not installed, or
            the provider is not configured.
    """
    provider, _, name = spec.partition(":")
    if not provider or not name:
        raise ConfigurationError(f"unknown model spec {spec!r}: {SPEC_HELP}")
    if provider == "scripted":
        path = demo_script if name == "demo" else Path(name)
        return ScriptedChatModel(
            script=load_script(path), source=path.name, start_at=call_index, user_turn=user_turn
        )
    limits = run_settings()
    options: dict[str, Any] = {
        "timeout": limits.model_timeout_seconds,
        "max_retries": limits.model_max_retries,
    }
    if provider == "openai":
        options.update(_openai_options(name))
    from langchain.chat_models import init_chat_model  # the provider's package is imported from here

    try:
        return init_chat_model(name, model_provider=provider, **options)
    except ImportError as exc:  # langchain names the package: "... requires the langchain-x package"
        raise ConfigurationError(f"model {spec!r} cannot be used here: {exc}") from None
    except ValueError as exc:  # an unknown provider, or the provider's class refused its settings
        detail = redactor().text(str(exc).split("\n", 1)[0])
        raise ConfigurationError(f"model spec {spec!r} does not work ({detail}): {SPEC_HELP}") from None


def _openai_options(name: str) -> dict[str, Any]:
    settings = provider_settings()
    if settings.openai_api_key is None:
        raise ConfigurationError(
            f"model 'openai:{name}' needs OPENAI_API_KEY (any value for a local server) "
            "and, for servers other than OpenAI, OPENAI_BASE_URL"
        )
    return {
        "api_key": settings.openai_api_key,
        "base_url": settings.openai_base_url,
        "streaming": True,
        "stream_usage": True,
    }


async def stream_model(
    model: Runnable[LanguageModelInput, Any], messages: Sequence[BaseMessage]
) -> AsyncIterator[AIMessageChunk]:
    """``model.astream(messages)``, with a provider failure raised as a redacted ``ProviderError``.

    Only the model's own stream is guarded: an error in the code reading it stays what it is.
    """
    stream = model.astream(list(messages))
    async with aclosing(stream):  # type: ignore[type-var]
        try:
            async for chunk in stream:
                yield chunk
        except PhasegraphError:
            raise
        except Exception as exc:
            raise provider_error(exc, model) from None


def provider_error(exc: Exception, model: Runnable[Any, Any]) -> ProviderError:
    """A ``ProviderError`` a person understands: provider, model, status, attempts; secrets masked.

    The chained provider exception is dropped on purpose (``from None`` at the raise sites): its
    text may hold a secret, and checkpointers store what a failed node raised.
    """
    chat = model.bound if isinstance(model, RunnableBinding) else model
    params = chat._get_ls_params() if isinstance(chat, BaseChatModel) else {}
    provider, name = params.get("ls_provider", "model"), params.get("ls_model_name", "?")
    status = getattr(exc, "status_code", None)
    status = status if isinstance(status, int) else None
    kind = type(exc).__name__.lower()
    timed_out = "timeout" in kind
    retried = timed_out or "connection" in kind or status in RETRIED_STATUSES or (status or 0) >= 500
    retries = getattr(chat, "max_retries", None)
    attempts = (retries if isinstance(retries, int) else 0) + 1 if retried else 1
    if timed_out:
        limit = getattr(chat, "request_timeout", None) or getattr(chat, "default_request_timeout", None)
        what = f"timed out (no answer within {limit or '?'} s)"
    elif status is not None:
        what = f"answered HTTP {status}"
    else:
        what = f"could not be reached ({type(exc).__name__})"
    # Operators see the provider's own words in the log (secrets masked by the log filter).
    logger.warning("%s model %r failed: %s: %s", provider, name, type(exc).__name__, exc)
    detail = redactor().text(" ".join(str(exc).split()))[:DETAIL_CHARS]  # masked before cut: no key prefix
    plural = "s" if attempts != 1 else ""
    message = f"{provider} model {name!r} {what} after {attempts} attempt{plural}: {detail}"
    return ProviderError(
        redactor().text(message), provider=provider, model=name, status=status, attempts=attempts
    )


def public_spec(spec: str) -> str:
    """A spec as clients may see it: a script is named by its file name, never its folders."""
    scheme, _, target = spec.partition(":")
    if scheme == "scripted" and target and target != "demo":
        return f"scripted:{Path(target).name}"
    return spec
