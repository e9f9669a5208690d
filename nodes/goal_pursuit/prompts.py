"""Phase templates (jinja2, one per phase and language) and the variables every template receives.

Templates are looked up in ``<folder>/<template_lang>/`` and then ``<folder>/en/``: a language may
translate only some of them. A phase template missing from both is a configuration error when the
run's Context is made, before anything runs. Shared pieces (``_blocks.jinja2``, the macros that
render the context, the tools and the assessment) are also found in the bundled templates, so a
folder of your own holds the four phase templates and may import the bundled blocks.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from jinja2 import ChoiceLoader, FileSystemLoader, StrictUndefined, TemplateError
from jinja2.sandbox import SandboxedEnvironment

from phasegraph.nodes.errors import ConfigurationError

PhaseName = Literal["context_discovery", "context_refinement", "action_decision", "refinement_analysis"]

BUNDLED_TEMPLATES = Path(__file__).resolve().parent / "templates"
FALLBACK_LANG = "en"
#: The template of each phase (the file names the seed gives them).
TEMPLATE_FILES: dict[PhaseName, str] = {
    "context_discovery": "context_discovery.jinja2",
    "context_refinement": "context_relevance.jinja2",
    "action_decision": "action_decision.jinja2",
    "refinement_analysis": "refinement_analysis.jinja2",
}


@dataclass(frozen=True)
class PhaseTemplates:
    """The four templates of one folder and language, checked to exist."""

    env: SandboxedEnvironment
    #: The language each template was found in (``en`` where the chosen language lacks it).
    languages: dict[str, str]

    def render(self, phase: PhaseName, variables: dict[str, Any]) -> str:
        """The phase's system prompt."""
        try:
            return self.env.get_template(TEMPLATE_FILES[phase]).render(variables).strip()
        except TemplateError as exc:
            raise ConfigurationError(f"template {TEMPLATE_FILES[phase]} failed: {exc}") from exc


@lru_cache(maxsize=32)
def phase_templates(folder: str, lang: str) -> PhaseTemplates:
    """The templates of ``folder`` (bundled when empty) in ``lang``, falling back to ``en``.

    Raises:
        ConfigurationError: The folder does not exist, the language name is not a plain name, or
            a template exists in neither language.
    """
    if not lang.replace("-", "").replace("_", "").isalnum():
        raise ConfigurationError(f"template_lang {lang!r} is not a language name such as 'en' or 'de'")
    root = Path(folder) if folder else BUNDLED_TEMPLATES
    if not root.is_dir():
        raise ConfigurationError(f"template folder {root.name!r} does not exist or is not a folder")
    chain = [lang, FALLBACK_LANG] if lang != FALLBACK_LANG else [FALLBACK_LANG]
    languages, missing = {}, []
    for name in TEMPLATE_FILES.values():
        found = next((code for code in chain if (root / code / name).is_file()), None)
        if found is None:
            missing.append(name)
        else:
            languages[name] = found
    if missing:
        where = "the bundled templates" if not folder else f"template folder {root.name!r}"
        tried = " and ".join(repr(code) for code in chain)  # 'en' once when it was the language asked for
        raise ConfigurationError(
            f"{where} lack(s) {', '.join(missing)} in {'both ' * (len(chain) > 1)}{tried} "
            f"(looked in {' and '.join(code + '/' for code in chain)})"
        )
    env = SandboxedEnvironment(
        loader=ChoiceLoader(
            [
                FileSystemLoader(base / code)
                for base in dict.fromkeys([root, BUNDLED_TEMPLATES])
                for code in chain
            ]
        ),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=False,
        autoescape=False,  # prompts, not HTML
    )
    env.filters["tojson"] = lambda value: json.dumps(value, ensure_ascii=False)
    return PhaseTemplates(env=env, languages=languages)
