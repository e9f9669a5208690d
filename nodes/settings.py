"""Environment settings, read in this one place and nowhere else."""

from __future__ import annotations

from functools import lru_cache

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict


class ProviderSettings(BaseSettings):
    """Credentials and endpoint of the OpenAI-compatible provider behind ``openai:`` specs."""

    model_config = SettingsConfigDict(env_prefix="", extra="ignore")

    openai_api_key: SecretStr | None = Field(
        default=None, description="API key (any value for local servers)."
    )
    openai_base_url: str | None = Field(
        default=None,
        description="Base URL of an OpenAI-compatible server (vLLM, Ollama, llama.cpp, DeepSeek).",
    )


@lru_cache(maxsize=1)
def provider_settings() -> ProviderSettings:
    """The provider settings of this process (read once)."""
    return ProviderSettings()
