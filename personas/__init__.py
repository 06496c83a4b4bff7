"""Personas (the VPs) and the system prompts built from them.

``load_personas`` reads the built-in persona files and the user's own;
``build_system_prompt`` turns a persona, a mode, the roster, recalled memory
and an optional project document into one system prompt.
"""

from personas.loader import (
    DEFAULT_VP_ID,
    PersonaLibrary,
    load_personas,
    new_persona_file,
    parse_persona,
    persona_detail,
    persona_summary,
)
from personas.model import Persona, PersonaError, id_problem
from personas.prompts import (
    SKIP_TOKEN,
    build_system_prompt,
    estimate_tokens,
    final_answer_prompt,
    load_template,
)

__all__ = [
    "DEFAULT_VP_ID",
    "SKIP_TOKEN",
    "Persona",
    "PersonaError",
    "PersonaLibrary",
    "build_system_prompt",
    "estimate_tokens",
    "final_answer_prompt",
    "id_problem",
    "load_personas",
    "load_template",
    "new_persona_file",
    "parse_persona",
    "persona_detail",
    "persona_summary",
]
