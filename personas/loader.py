"""Load persona files: the built-in ones, then the user's own on top.

Built-in personas ship in ``personas/builtin/<id>.md``. A user adds or
replaces personas by dropping ``<id>.md`` files into their persona directory;
a user file with a built-in's id replaces that built-in. Every mistake is
reported as a :class:`PersonaError` naming the file and the field, and one
broken file never keeps the others from loading: :func:`load_personas`
collects the errors on the returned library unless asked to be strict.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterable, Iterator
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from personas.front_matter import FrontMatterError, split_front_matter
from personas.model import Persona, PersonaError, PersonaMeta, id_problem

log = logging.getLogger(__name__)

DEFAULT_VP_ID = "omni"
FRONT_MATTER_KEYS = tuple(field.alias or name for name, field in PersonaMeta.model_fields.items())


def _builtin_dir() -> Traversable:
    return resources.files("personas").joinpath("builtin")


def persona_hash(text: str) -> str:
    """The first 8 hex digits of the sha256 of a persona file's text."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:8]


def _split_front_matter(text: str, source: str) -> tuple[dict[str, Any], str]:
    try:
        return split_front_matter(
            text,
            "missing front matter: the file must start with a '---' line, "
            "the YAML fields, and a closing '---' line",
        )
    except FrontMatterError as exc:
        raise PersonaError(source, str(exc)) from exc


def _describe(error: Any) -> tuple[str | None, str]:
    """Turn one pydantic error into (field as written in the file, message)."""
    loc = error.get("loc", ())
    field = str(loc[0]) if loc else None
    if field is not None and len(loc) > 1:
        field += "".join(f"[{part}]" for part in loc[1:])
    kind = error.get("type", "")
    message = str(error.get("msg", "is invalid"))
    if kind == "extra_forbidden":
        message = "unknown field (allowed: " + ", ".join(FRONT_MATTER_KEYS) + ")"
    elif kind == "missing":
        message = "is required"
    elif kind in ("tuple_type", "list_type"):
        message = "must be a list"
    elif kind == "value_error":
        message = message.removeprefix("Value error, ")
    else:
        message = message.replace("Input should be", "must be", 1)
    return field, message


def parse_persona(
    text: str, source: str | Path, *, builtin: bool = False, expected_id: str | None = None
) -> Persona:
    """Parse and validate the text of one persona file.

    ``expected_id`` is the id the file name promises; a file whose front
    matter says otherwise is rejected, because the name is how a user finds
    the file to edit it. Raises :class:`PersonaError` on the first mistake.
    """
    source = str(source)
    text = text.removeprefix("\ufeff")
    data, body = _split_front_matter(text, source)
    try:
        meta = PersonaMeta.model_validate(data)
    except ValidationError as exc:
        field, message = _describe(exc.errors()[0])
        raise PersonaError(source, message, field) from None
    if expected_id is not None and meta.id != expected_id:
        raise PersonaError(
            source, f"'{meta.id}' does not match the file name '{expected_id}.md'", "id"
        )
    body = body.strip()
    if not body:
        raise PersonaError(source, "the persona text after the front matter is empty", "body")
    return Persona(
        **meta.model_dump(),
        body=body,
        source=source,
        builtin=builtin,
        persona_hash=persona_hash(text),
    )


class PersonaLibrary:
    """Every persona known to this process, looked up by id or alias.

    Ids and aliases are matched case-insensitively, as mentions are, so no two
    personas may share a name even in a different case. ``errors`` holds the
    mistakes found while loading, for the CLI and the UI to show.
    """

    def __init__(self) -> None:
        self._by_id: dict[str, Persona] = {}
        self._owner: dict[str, str] = {}  # lower-case id or alias -> lower-case id
        self.errors: list[PersonaError] = []

    def add(self, persona: Persona) -> None:
        """Add ``persona``, replacing one with the same id.

        Raises :class:`PersonaError` when one of its names already belongs to
        another persona; the library is left unchanged in that case.
        """
        key = persona.id.lower()
        for name in persona.names():
            owner = self._owner.get(name.lower())
            if owner is None or owner == key:
                continue
            other = self._by_id[owner].id
            if name == persona.id:
                raise PersonaError(
                    persona.source, f"'{name}' is already a name of persona '{other}'", "id"
                )
            raise PersonaError(
                persona.source, f"alias '{name}' is already used by persona '{other}'", "aliases"
            )
        replaced = self._by_id.get(key)
        if replaced is not None:
            for name in replaced.names():
                self._owner.pop(name.lower(), None)
        self._by_id[key] = persona
        for name in persona.names():
            self._owner[name.lower()] = key

    def get(self, persona_id: str) -> Persona | None:
        """The persona with this id (any case), or None."""
        return self._by_id.get(persona_id.lower())

    def resolve(self, name: str) -> Persona | None:
        """The persona a person means by ``name``: an id, an alias, or ``vp-<id>``.

        A leading ``@`` is ignored so text copied from a mention also works.
        """
        wanted = name.strip().removeprefix("@").lower()
        key = self._owner.get(wanted)
        if key is None and wanted.startswith("vp-"):
            key = self._owner.get(wanted[3:])
        return self._by_id[key] if key is not None else None

    def all(self) -> list[Persona]:
        """All personas, sorted by id."""
        return [self._by_id[key] for key in sorted(self._by_id)]

    def ids(self) -> list[str]:
        """All persona ids, sorted."""
        return [persona.id for persona in self.all()]

    def default(self) -> Persona | None:
        """The default VP (``omni``), or the first persona if it was removed."""
        return self.get(DEFAULT_VP_ID) or next(iter(self.all()), None)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.resolve(name) is not None

    def __len__(self) -> int:
        return len(self._by_id)

    def __iter__(self) -> Iterator[Persona]:
        return iter(self.all())


def _read(entry: Traversable | Path, builtin: bool) -> Persona:
    source = str(entry)
    try:
        text = entry.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise PersonaError(source, f"not UTF-8 text ({exc.reason})") from None
    except OSError as exc:
        raise PersonaError(source, f"cannot be read ({exc.strerror or exc})") from None
    return parse_persona(text, source, builtin=builtin, expected_id=entry.name.removesuffix(".md"))


def _persona_files(directory: Traversable | Path) -> list[Traversable | Path]:
    entries: Iterable[Traversable | Path] = directory.iterdir()
    files = [e for e in entries if e.name.endswith(".md") and not e.name.startswith(".")]
    return sorted(files, key=lambda e: e.name)


def _user_files(user_dir: Path) -> list[Traversable | Path]:
    if not user_dir.exists():
        return []
    if not user_dir.is_dir():
        raise PersonaError(user_dir, "is not a directory")
    try:
        return _persona_files(user_dir)
    except OSError as exc:
        raise PersonaError(user_dir, f"cannot be listed ({exc.strerror or exc})") from None


def load_personas(user_dir: Path | None = None, *, strict: bool = False) -> PersonaLibrary:
    """Load the built-in personas, then ``<user_dir>/*.md`` on top of them.

    A user file adds a persona, or replaces the built-in with the same id. A
    missing ``user_dir`` is not an error (a fresh install has none yet). With
    ``strict=False`` each broken file is skipped and its :class:`PersonaError`
    appended to ``library.errors``; with ``strict=True`` the first one raises.
    """
    library = PersonaLibrary()
    sources: list[tuple[Traversable | Path, bool]] = [
        (entry, True) for entry in _persona_files(_builtin_dir())
    ]
    if user_dir is not None:
        try:
            sources += [(entry, False) for entry in _user_files(Path(user_dir))]
        except PersonaError as error:
            if strict:
                raise
            library.errors.append(error)
    user_files: dict[str, str] = {}  # lower-case id -> the user file that defined it
    for entry, builtin in sources:
        try:
            persona = _read(entry, builtin)
            key = persona.id.lower()
            if not builtin and key in user_files:
                # Only possible on a case-sensitive file system (Bob.md and
                # bob.md); silently letting one win would hide the other.
                raise PersonaError(
                    persona.source, f"'{persona.id}' is also defined in {user_files[key]}", "id"
                )
            library.add(persona)
            if not builtin:
                user_files[key] = persona.source
        except PersonaError as error:
            if strict:
                raise
            log.warning("skipping persona file: %s", error)
            library.errors.append(error)
    return library


def new_persona_file(
    user_dir: Path, persona_id: str, name: str | None = None, role: str | None = None
) -> Path:
    """Write a starter ``<user_dir>/<id>.md`` that loads as it is, and return its path.

    Raises :class:`PersonaError` for an invalid id and :class:`FileExistsError`
    when the file is already there: an existing persona is never overwritten.
    A file named after a built-in's id replaces that built-in once edited.
    """
    problem = id_problem(persona_id)
    if problem:
        raise PersonaError(Path(user_dir) / f"{persona_id}.md", problem, "id")
    name = (name or "").strip() or persona_id.replace("-", " ").replace("_", " ").title()
    role = (role or "").strip() or "team member"
    meta = {
        "id": persona_id,
        "name": name,
        "nameZh": name,
        "role": role,
        "area": "general",
        "aliases": [],
        "traits": [],
        "modelHint": "primary",
    }
    front = yaml.safe_dump(meta, sort_keys=False, allow_unicode=True)
    body = _starter_body(name, role)
    path = Path(user_dir) / f"{persona_id}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    # Mode "x" makes the existence check and the creation one step.
    with path.open("x", encoding="utf-8") as handle:
        handle.write(f"---\n{front}---\n\n{body}")
    return path


def _starter_body(name: str, role: str) -> str:
    return f"""\
You are {name}, the team's {role}. Replace this paragraph: say, in the
second person, who this colleague is, what they care about most and what they
refuse to let slide.

## Voice
- How you talk: sentence length, tone, the words you favour.

## How you work
1. The first thing you do with a new request.
2. How you decide, and what evidence you want before you do.

## Questions you always ask
- What problem are we actually solving?
- How will we know it worked?
"""


def persona_summary(persona: Persona) -> dict[str, Any]:
    """The short form of a persona for lists in the CLI, the API and the UI."""
    return {
        "id": persona.id,
        "name": persona.name,
        "nameZh": persona.name_zh,
        "role": persona.role,
        "area": persona.area,
        "aliases": list(persona.aliases),
        "modelHint": persona.model_hint,
        "builtin": persona.builtin,
    }


def persona_detail(persona: Persona) -> dict[str, Any]:
    """Everything about a persona, including its body, for ``show`` views."""
    return {
        **persona_summary(persona),
        "roleZh": persona.role_zh,
        "traits": list(persona.traits),
        "model": persona.model,
        "tools": None if persona.tools is None else list(persona.tools),
        "mcpServers": list(persona.mcp_servers),
        "body": persona.body,
        "source": persona.source,
        "personaHash": persona.persona_hash,
    }
