"""LangChain's own standard unit suite for chat models, run against the scripted model."""

from __future__ import annotations

from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_tests.unit_tests import ChatModelUnitTests

from phasegraph.nodes.scripted import ScriptedChatModel


class TestScriptedChatModelStandard(ChatModelUnitTests):
    @property
    def chat_model_class(self) -> type[BaseChatModel]:
        return ScriptedChatModel

    @property
    def chat_model_params(self) -> dict[str, Any]:
        return {"script": {"turns": [{"content": "hello"}]}, "source": "standard.json"}
