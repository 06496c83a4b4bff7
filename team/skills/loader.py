"""Skill files: parse, render, and the library a process selects from.

A skill is a markdown file: a front matter block fenced by two ``---``
lines holding ``name`` (a slug), ``description`` (required: it is what the
selectors read first) and ``tools`` (optional tool names), then the body, the
procedure a VP follows once the skill is activated.

:class:`SkillLibrary` gathers three sources, each replacing a skill of the
same name from the one before: the files shipped in ``team/skills/builtin``,
the ``.md`` files of the data directory's ``skills`` folder, and the learned
skills (published drafts) the store keeps. A data file that does not parse is
logged and skipped, recorded in :attr:`SkillLibrary.errors`, and never stops
the others from loading.

Invariant: :func:`render_skill` and :func:`parse_skill` round-trip, so a
published draft can be written out as a file and read back unchanged.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Iterable, Sequence
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

import yaml

from personas.front_matter import FRONT_MATTER, FrontMatterError, split_front_matter
from protocol.tasks import Skill, SkillSource

__all__ = [
    "NAME_MAX",
    "SkillFileError",
    "SkillLibrary",
    "is_slug",
    "parse_skill",
    "render_skill",
    "skill_version",
    "slugify",
    "strip_front_matter",
]

log = logging.getLogger(__name__)

NAME_MAX = 64
_SLUG = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")


class SkillFileError(ValueError):
    """A skill file's text is not a valid skill; the message says what to fix."""


def is_slug(name: str) -> bool:
    """True when ``name`` is lowercase letters and digits joined by single hyphens, ≤ 64."""
    return len(name) <= NAME_MAX and _SLUG.match(name) is not None


def slugify(text: str) -> str:
    """``text`` made into a slug (ASCII letters and digits, hyphens); "" if nothing is left.

    Characters outside ASCII are dropped rather than transliterated, so a
    Chinese title gives "" and the caller picks its own fallback name.
    """
    words = re.findall(r"[a-z0-9]+", text.lower())
    slug = "-".join(words)[:NAME_MAX]
    return slug.strip("-")


def skill_version(text: str) -> str:
    """The first 8 hex digits of the sha256 of a skill file's text: changes when it is edited."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:8]


def _split(text: str) -> tuple[dict[str, Any], str]:
    try:
        return split_front_matter(
            text,
            "missing front matter: the file must start with a '---' line, "
            "the YAML fields (name, description, tools) and a closing '---' line",
        )
    except FrontMatterError as exc:
        raise SkillFileError(str(exc)) from exc


def strip_front_matter(text: str) -> str:
    """The body of a skill text: everything after its front matter block, trimmed.

    A text without front matter is returned trimmed, unchanged otherwise.
    """
    text = text.removeprefix("\ufeff")
    match = FRONT_MATTER.match(text)
    body = text[match.end() :] if match else text
    return body.strip()


def _field_name(data: dict[str, Any]) -> str:
    name = data.get("name")
    if not isinstance(name, str) or not name.strip():
        raise SkillFileError("'name' is required: a slug such as 'launch-plan'")
    name = name.strip()
    if not is_slug(name):
        raise SkillFileError(
            f"'name' {name!r} must be lowercase letters, digits and single hyphens, "
            f"at most {NAME_MAX} characters"
        )
    return name


def _field_description(data: dict[str, Any]) -> str:
    description = data.get("description")
    if not isinstance(description, str) or not description.strip():
        raise SkillFileError("'description' is required: one or two sentences on when to use it")
    return " ".join(description.split())


def _field_tools(data: dict[str, Any]) -> list[str]:
    tools = data.get("tools")
    if tools is None:
        return []
    if not isinstance(tools, list) or not all(isinstance(t, str) and t.strip() for t in tools):
        raise SkillFileError("'tools' must be a list of tool names, such as [web_fetch]")
    return list(dict.fromkeys(t.strip() for t in tools))


def parse_skill(text: str, source: SkillSource, version: str = "1") -> Skill:
    """Parse the text of one skill file; raises :class:`SkillFileError` on the first mistake.

    Front matter fields other than name, description and tools are ignored,
    so files written for other tools (with a licence or a model field) load.
    """
    data, body = _split(text.removeprefix("\ufeff"))
    name = _field_name(data)
    description = _field_description(data)
    tools = _field_tools(data)
    body = body.strip()
    if not body:
        raise SkillFileError(f"skill {name!r} has no text after its front matter")
    return Skill(
        name=name,
        description=description,
        tools=tools,
        content=body,
        source=source,
        version=version,
    )


def render_skill(skill: Skill) -> str:
    """A skill as file text: front matter, then the body; :func:`parse_skill` reads it back."""
    meta = {"name": skill.name, "description": skill.description, "tools": list(skill.tools)}
    front = yaml.safe_dump(meta, sort_keys=False, allow_unicode=True, width=1_000)
    return f"---\n{front}---\n\n{strip_front_matter(skill.content)}\n"


def _builtin_files() -> list[Traversable]:
    folder = resources.files("team.skills").joinpath("builtin")
    found = [entry for entry in folder.iterdir() if entry.name.endswith(".md")]
    return sorted(found, key=lambda entry: entry.name)


class SkillLibrary:
    """Every skill this process can activate, by name; a later one replaces an earlier.

    ``errors`` holds one line per file that could not be read, for logs and UIs.
    """

    def __init__(self, skills: Iterable[Skill] = ()) -> None:
        self._by_name: dict[str, Skill] = {}
        self.errors: list[str] = []
        for skill in skills:
            self.add(skill)

    @classmethod
    def load(cls, data_dir: Path | None, learned: Sequence[Skill] = ()) -> SkillLibrary:
        """Built-ins, then ``<data_dir>/skills/*.md``, then ``learned``, later replacing earlier."""
        library = cls()
        for entry in _builtin_files():
            # A broken built-in is a bug in this package, but it still must not
            # keep the server from starting: it is reported like a data file.
            library._add_file(entry.name, entry.read_text(encoding="utf-8"), SkillSource.BUILTIN)
        if data_dir is not None:
            folder = Path(data_dir) / "skills"
            if folder.is_dir():
                for path in sorted(folder.glob("*.md")):
                    library._read_data_file(path)
        for skill in learned:
            library.add(skill)
        return library

    def _read_data_file(self, path: Path) -> None:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            self._skip(str(path), f"cannot be read: {exc}")
            return
        self._add_file(str(path), text, SkillSource.DATA)

    def _add_file(self, where: str, text: str, source: SkillSource) -> None:
        try:
            skill = parse_skill(text, source, version=skill_version(text))
        except SkillFileError as exc:
            self._skip(where, str(exc))
            return
        self.add(skill)

    def _skip(self, where: str, problem: str) -> None:
        log.warning("skill file %s skipped: %s", where, problem)
        self.errors.append(f"{where}: {problem}")

    def add(self, skill: Skill) -> None:
        """Add ``skill``, replacing the one of the same name if there is one."""
        self._by_name[skill.name] = skill

    def all(self) -> list[Skill]:
        """Every skill, ordered by name."""
        return [self._by_name[name] for name in self.names()]

    def get(self, name: str) -> Skill | None:
        """The skill called ``name``, or None."""
        return self._by_name.get(name)

    def names(self) -> list[str]:
        """Every skill's name, sorted."""
        return sorted(self._by_name)

    def __len__(self) -> int:
        return len(self._by_name)

    def __contains__(self, name: object) -> bool:
        return name in self._by_name
