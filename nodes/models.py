"""One model factory for the CLI, the server, Studio and notebooks."""

from __future__ import annotations

from pathlib import Path

from langchain_core.language_models import BaseChatModel

from nodes.errors import ConfigurationError
from nodes.scripted import ScriptedChatModel, load_script
from nodes.settings import provider_settings

DEMO_DIR = Path(__file__).parent / "demo"
DEMO_SCRIPT = DEMO_DIR / "script.json"
DEMO_WORKSPACE = DEMO_DIR / "workspace"
DEMO_MODEL = "scripted:demo"

SPEC_HELP = "use 'openai:<model>' or 'scripted:<path-to-script.json>' ('scripted:demo' is the bundled script)"


def make_model(spec: str, *, call_index: int = 0) -> BaseChatModel:
    """Turn a model spec string into a LangChain chat model.

    Args:
        spec: ``openai:<model>`` or ``scripted:<path>`` (``scripted:demo`` for the bundled script).
        call_index: How many model calls this run already made; a scripted model starts at
            that turn, so its position comes from the run's state rather than process memory.

    Raises:
        ConfigurationError: The spec names no known provider, or the provider is not configured.
    """
    scheme, _, target = spec.partition(":")
    if scheme == "scripted" and target:
        path = DEMO_SCRIPT if target == "demo" else Path(target)
        return ScriptedChatModel(script=load_script(path), source=path.name, start_at=call_index)
    if scheme == "openai" and target:
        return _openai_model(target)
    raise ConfigurationError(f"unknown model spec {spec!r}: {SPEC_HELP}")


def _openai_model(name: str) -> BaseChatModel:
    from langchain_openai import ChatOpenAI

    settings = provider_settings()
    if settings.openai_api_key is None:
        raise ConfigurationError(
            f"model 'openai:{name}' needs OPENAI_API_KEY (any value for a local server) "
            "and, for servers other than OpenAI, OPENAI_BASE_URL"
        )
    return ChatOpenAI(
        model=name,
        api_key=settings.openai_api_key,
        base_url=settings.openai_base_url,
        streaming=True,
        stream_usage=True,
    )


def public_spec(spec: str) -> str:
    """A spec as clients may see it: a script is named by its file name, never its folders."""
    scheme, _, target = spec.partition(":")
    if scheme == "scripted" and target and target != "demo":
        return f"scripted:{Path(target).name}"
    return spec
