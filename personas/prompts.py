"""System prompts: templates in English and Chinese, and the builder that joins them.

Templates live in ``personas/templates/<language>/<name>.md`` and use
``{{name}}`` placeholders. They are filled in one pass by :func:`fill`, which
never re-reads what it has inserted: a persona body, a memory or a project
document that happens to contain ``{{roster}}`` or ``{braces}`` comes out
exactly as written. ``str.format`` is never used, because user text full of
braces would break it or, worse, be interpreted.

:func:`build_system_prompt` assembles, in this order: base identity, the
persona's own text, common rules, the mode's instructions (group roster,
mentions, ``route_forward``, the skip token; or chat; or dream), the session
(where, who writes, the model, the channel), tool guidance
and tool-failure guidance when tools are offered, recalled memories, and the
project document. When the result is over ``budget_tokens`` it gives way in a
fixed order:

1. the project document is cut at a line boundary and marked ``[…truncated]``,
   or dropped when not even a line of it fits;
2. memory items are dropped from the end, which is the least relevant end
   because recall hands them over most relevant first;
3. identity, persona, rules, mode and tool sections are never cut. If they
   alone exceed the budget the prompt is returned over budget with a warning,
   because a VP without its rules is worse than a long prompt.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from functools import lru_cache
from importlib import resources
from typing import Literal, get_args

from personas.model import Persona
from personas.session import Session

log = logging.getLogger(__name__)

SKIP_TOKEN = "[[SKIP]]"
TRUNCATED_MARKER = "[…truncated]"
ROUTE_FORWARD_TOOL = "route_forward"
# Tools with a section of their own, shown when any of them is offered.
WORKSPACE_TOOLS = frozenset({"list_files", "read_file", "write_file", "search_files"})
WEB_FETCH_TOOL = "web_fetch"

Mode = Literal["chat", "group", "dream"]
Language = Literal["en", "zh"]
LANGUAGES: tuple[str, ...] = get_args(Language)
MODES: tuple[str, ...] = get_args(Mode)
TEMPLATE_NAMES = frozenset(
    {
        "base",
        "persona",
        "common_rules",
        "chat_mode",
        "group_mode",
        "route_forward",
        "group_solo",
        "tool_guidance",
        "tool_failure",
        "workspace_tools",
        "web_fetch",
        "memory",
        "project_doc",
        "session",
        "final_answer",
        "dream",
    }
)

_PLACEHOLDER = re.compile(r"\{\{([a-z_]+)\}\}")
_YOU = {"en": " (you)", "zh": "（你）"}
_SECTION_GAP = "\n\n"


def estimate_tokens(text: str) -> int:
    """A rough token count: about 4 ASCII characters per token.

    Characters outside ASCII (Chinese above all) count one token each, since
    tokenizers rarely pack more than one of them into a token; counting them
    at four per token would let a Chinese prompt run several times over its
    budget. Deliberately local and tiny: prompts must not depend on the engine.
    """
    # Counted in C: the ASCII characters are what survives an ASCII encode.
    ascii_chars = len(text) if text.isascii() else len(text.encode("ascii", "ignore"))
    return (ascii_chars + 3) // 4 + (len(text) - ascii_chars)


def _check_language(language: str) -> None:
    if language not in LANGUAGES:
        raise ValueError(f"unknown language {language!r}; expected one of {LANGUAGES}")


@lru_cache(maxsize=64)
def load_template(name: str, language: str = "en") -> str:
    """The text of template ``name`` in ``language``, trailing whitespace removed."""
    _check_language(language)
    if name not in TEMPLATE_NAMES:
        raise ValueError(f"unknown template {name!r}; expected one of {sorted(TEMPLATE_NAMES)}")
    path = resources.files("personas").joinpath("templates", language, f"{name}.md")
    return path.read_text(encoding="utf-8").rstrip()


def fill(template: str, values: Mapping[str, str]) -> str:
    """Replace every ``{{key}}`` in ``template`` with ``values[key]`` in a single pass.

    Inserted values are not scanned again, so they may contain anything. A
    placeholder without a value is a bug in the template or the caller and
    raises ``KeyError`` rather than leaking ``{{key}}`` into a prompt.
    """

    def replace(match: re.Match[str]) -> str:
        key = match.group(1)
        if key not in values:
            raise KeyError(f"no value for template placeholder {{{{{key}}}}}")
        return values[key]

    return _PLACEHOLDER.sub(replace, template)


def final_answer_prompt(language: str = "en") -> str:
    """The instruction for the engine's last, tool-less call once the tool budget is spent."""
    return load_template("final_answer", language)


def _format_now(now: datetime | None) -> str:
    moment = now or datetime.now(UTC)
    # A naive datetime is taken to be UTC already, so tests can pass a plain one.
    moment = moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
    return moment.strftime("%Y-%m-%d %H:%M UTC")


def _roster_lines(persona: Persona, roster: Sequence[Persona] | None, language: str) -> list[str]:
    members = list(roster or [])
    # The prompt must always show the VP itself, even if the caller left it out.
    if all(member.id.lower() != persona.id.lower() for member in members):
        members.insert(0, persona)
    lines: list[str] = []
    seen: set[str] = set()
    for member in members:
        key = member.id.lower()
        if key in seen:
            continue
        seen.add(key)
        you = _YOU[language] if key == persona.id.lower() else ""
        lines.append(f"- @{member.id} — {member.display_role(language)}{you}")
    return lines


def _mode_sections(
    persona: Persona,
    mode: str,
    language: str,
    roster: Sequence[Persona] | None,
    tools: Sequence[str],
) -> list[str]:
    if mode == "chat":
        return [load_template("chat_mode", language)]
    if mode == "dream":
        return [fill(load_template("dream", language), {"id": persona.id})]
    lines = _roster_lines(persona, roster, language)
    group = fill(
        load_template("group_mode", language),
        {"roster": "\n".join(lines), "id": persona.id, "skip_token": SKIP_TOKEN},
    )
    sections = [group]
    if ROUTE_FORWARD_TOOL in tools:
        sections.append(load_template("route_forward", language))
    elif len(lines) == 1:
        sections.append(load_template("group_solo", language))
    return sections


def _core_sections(
    persona: Persona,
    mode: str,
    language: str,
    roster: Sequence[Persona] | None,
    tools: Sequence[str],
    now: datetime | None,
    session: Session | None = None,
) -> list[str]:
    identity = {
        "name": persona.display_name(language),
        "id": persona.id,
        "role": persona.display_role(language),
        "now": _format_now(now),
    }
    sections = [
        fill(load_template("base", language), identity),
        fill(load_template("persona", language), {"body": persona.body.strip()}),
        load_template("common_rules", language),
        *_mode_sections(persona, mode, language, roster, tools),
    ]
    if session is not None:
        sections.append(fill(load_template("session", language), session.values(language)))
    # Tool advice in a prompt without tools only invites the model to
    # pretend it has some, so both tool sections depend on there being tools.
    if tools:
        listed = ", ".join(f"`{name}`" for name in tools)
        sections.append(fill(load_template("tool_guidance", language), {"tools": listed}))
        if WORKSPACE_TOOLS.intersection(tools):
            sections.append(load_template("workspace_tools", language))
        if WEB_FETCH_TOOL in tools:
            sections.append(load_template("web_fetch", language))
        sections.append(load_template("tool_failure", language))
    return sections


def _memory_section(items: Sequence[str], language: str) -> str | None:
    if not items:
        return None
    # Continuation lines are indented so a multi-line memory stays one item.
    bullets = "\n".join("- " + item.replace("\n", "\n  ") for item in items)
    return fill(load_template("memory", language), {"items": bullets})


def _document_section(document: str | None, language: str) -> str | None:
    if not document:
        return None
    return fill(load_template("project_doc", language), {"document": document})


def _join(core: str, items: Sequence[str], document: str | None, language: str) -> str:
    parts = [core, _memory_section(items, language), _document_section(document, language)]
    return _SECTION_GAP.join(part for part in parts if part)


def _truncate_document(
    core: str, items: Sequence[str], document: str, language: str, budget: int
) -> str | None:
    """The longest head of ``document`` that fits the budget, marked as cut; or None."""

    def fits(length: int) -> bool:
        head = f"{document[:length].rstrip()}\n{TRUNCATED_MARKER}"
        return estimate_tokens(_join(core, items, head, language)) <= budget

    # Binary search for the longest prefix that fits: the estimate is not
    # additive across sections, so measuring the whole prompt is the only
    # exact check, and it costs a handful of joins.
    low, high = 0, len(document)
    while low < high:
        middle = (low + high + 1) // 2
        if fits(middle):
            low = middle
        else:
            high = middle - 1
    head = document[:low]
    # End on a whole line when that keeps most of what fits, so the cut is clean.
    newline = head.rfind("\n")
    if newline > len(head) // 2:
        head = head[:newline]
    head = head.rstrip()
    if not head.strip():
        return None
    return f"{head}\n{TRUNCATED_MARKER}"


def build_system_prompt(
    *,
    persona: Persona,
    mode: Mode,
    language: Language = "en",
    roster: list[Persona] | None = None,
    memory: list[str] | None = None,
    project_doc: str | None = None,
    tools: list[str] | None = None,
    budget_tokens: int = 6000,
    now: datetime | None = None,
    session: Session | None = None,
) -> str:
    """Assemble the system prompt for ``persona`` in ``mode`` within ``budget_tokens``.

    ``roster`` is the group's VPs (the persona itself is marked "you", and
    added if missing); ``memory`` is recalled items, most relevant first;
    ``tools`` is the names of the tools offered this turn; ``session`` is
    where the VP is, who writes, its model and the channel. See the module
    docstring for what gives way when the prompt is over budget.
    """
    _check_language(language)
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; expected one of {MODES}")
    tool_names = list(tools or [])
    core = _SECTION_GAP.join(
        _core_sections(persona, mode, language, roster, tool_names, now, session)
    )
    items = [item.strip() for item in memory or [] if item.strip()]
    document = project_doc.strip() if project_doc else None

    prompt = _join(core, items, document, language)
    if estimate_tokens(prompt) <= budget_tokens:
        return prompt
    if document:
        document = _truncate_document(core, items, document, language, budget_tokens)
        log.debug("project document trimmed to fit %s tokens", budget_tokens)
    while items and estimate_tokens(_join(core, items, document, language)) > budget_tokens:
        items.pop()
    prompt = _join(core, items, document, language)
    if estimate_tokens(prompt) > budget_tokens:
        log.warning(
            "system prompt for %s is %s tokens, over its budget of %s, with nothing left to cut",
            persona.id,
            estimate_tokens(prompt),
            budget_tokens,
        )
    return prompt
