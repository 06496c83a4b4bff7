"""Persona files: the built-ins, user overrides, validation messages and lookup."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest

from personas import (
    DEFAULT_VP_ID,
    PersonaError,
    PersonaLibrary,
    id_problem,
    load_personas,
    new_persona_file,
    persona_detail,
    persona_summary,
)
from personas.directory import PersonaDirectory

BUILTIN_DIR = Path(__file__).resolve().parent.parent / "personas" / "builtin"
NAMED = {
    "steve": "product strategist",
    "linus": "systems engineer",
    "martin": "refactoring and design reviewer",
    "dieter": "designer",
    "kent": "test-first engineer",
    "omni": "generalist",
}


def persona_text(
    persona_id: str, *, body: str = "You are a careful colleague.", **fields: str
) -> str:
    """A valid persona file, with any front matter line replaced via ``fields``."""
    front = {"id": persona_id, "name": persona_id.title(), "role": "tester"} | fields
    lines = "\n".join(f"{key}: {value}" for key, value in front.items())
    return f"---\n{lines}\n---\n{body}\n"


def write(directory: Path, name: str, text: str) -> Path:
    path = directory / name
    path.write_text(text, encoding="utf-8")
    return path


# --- built-ins --------------------------------------------------------------


def test_all_builtins_load_without_errors() -> None:
    library = load_personas(None, strict=True)
    assert library.errors == []
    assert len(library) >= 12
    assert all(p.builtin for p in library.all())
    assert library.ids() == sorted(library.ids())


@pytest.mark.parametrize(("persona_id", "role"), sorted(NAMED.items()))
def test_named_builtins_exist_with_their_fields(persona_id: str, role: str) -> None:
    persona = load_personas(None).get(persona_id)
    assert persona is not None
    assert persona.id == persona_id
    assert role in persona.role
    assert persona.name and persona.name_zh
    assert persona.model_hint in ("primary", "fast")
    assert persona.aliases and persona.traits
    source = Path(persona.source)
    assert source.name == f"{persona_id}.md"
    expected = hashlib.sha256(source.read_text(encoding="utf-8").encode()).hexdigest()[:8]
    assert persona.persona_hash == expected


def test_builtin_bodies_are_distinct_and_substantive() -> None:
    personas = load_personas(None).all()
    bodies = [p.body for p in personas]
    assert len(set(bodies)) == len(bodies)
    for persona in personas:
        words = len(persona.body.split())
        assert 150 <= words <= 380, f"{persona.id}: {words} words"
        assert "Questions you always ask" in persona.body, persona.id


def test_no_builtin_alias_is_shared_or_invalid() -> None:
    names = [name.lower() for p in load_personas(None).all() for name in p.names()]
    assert len(names) == len(set(names))
    assert all(id_problem(name) is None for name in names)


def test_default_vp_is_omni() -> None:
    library = load_personas(None)
    default = library.default()
    assert default is not None and default.id == DEFAULT_VP_ID == "omni"


# --- user files -------------------------------------------------------------


def test_user_file_overrides_builtin(tmp_path: Path) -> None:
    write(tmp_path, "steve.md", persona_text("steve", body="A quieter Steve.", aliases="[sj]"))
    library = load_personas(tmp_path, strict=True)
    steve = library.get("steve")
    assert steve is not None
    assert not steve.builtin
    assert steve.body == "A quieter Steve."
    assert steve.source == str(tmp_path / "steve.md")
    assert library.resolve("sj") is steve
    # The built-in's aliases went with it.
    assert library.resolve("jobs") is None
    assert len(library) == len(load_personas(None))


def test_user_file_adds_persona(tmp_path: Path) -> None:
    text = persona_text(
        "bob", aliases="[builder]", modelHint="fast", tools="[recall, remember]", model="m-1"
    )
    write(tmp_path, "bob.md", text)
    library = load_personas(tmp_path, strict=True)
    bob = library.get("bob")
    assert bob is not None
    assert not bob.builtin
    assert bob.model_hint == "fast"
    assert bob.tools == ("recall", "remember")
    assert bob.model == "m-1"
    assert bob.persona_hash == hashlib.sha256(text.encode()).hexdigest()[:8]
    assert library.get("steve") is not None
    assert len(library) == len(load_personas(None)) + 1


def test_missing_user_dir_is_not_an_error(tmp_path: Path) -> None:
    library = load_personas(tmp_path / "nothing-here")
    assert library.errors == []


def test_user_dir_that_is_a_file_is_reported(tmp_path: Path) -> None:
    not_a_dir = write(tmp_path, "personas", "oops")
    library = load_personas(not_a_dir)
    assert [str(e) for e in library.errors] == [f"{not_a_dir}: is not a directory"]
    assert library.get("steve") is not None
    with pytest.raises(PersonaError):
        load_personas(not_a_dir, strict=True)


def test_hidden_and_non_markdown_files_are_ignored(tmp_path: Path) -> None:
    write(tmp_path, ".draft.md", "not a persona")
    write(tmp_path, "notes.txt", "not a persona")
    assert load_personas(tmp_path).errors == []


BAD_FILES = [
    ("no_front_matter", "bob.md", "You are Bob.\n", None, "missing front matter"),
    ("unclosed_front_matter", "bob.md", "---\nid: bob\nname: Bob\n", None, "missing front"),
    ("bad_yaml", "bob.md", "---\nid: bob\nname: [Bob\n---\nBody\n", None, "not valid YAML"),
    ("not_a_mapping", "bob.md", "---\n- bob\n---\nBody\n", None, "must be a mapping"),
    ("unknown_field", "bob.md", persona_text("bob", colour="red"), "colour", "unknown field"),
    ("missing_name", "bob.md", "---\nid: bob\nrole: x\n---\nBody\n", "name", "is required"),
    ("missing_id", "bob.md", "---\nname: Bob\nrole: x\n---\nBody\n", "id", "is required"),
    ("reserved_id", "all.md", persona_text("all"), "id", "reserved"),
    ("digit_id", "123.md", persona_text("'123'"), "id", "all digits"),
    ("underscore_id", "_bob.md", persona_text("_bob"), "id", "must not start with '_'"),
    ("numeric_yaml_id", "123.md", persona_text("123"), "id", "must be a valid string"),
    ("mismatched_id", "bob.md", persona_text("robert"), "id", "does not match the file name"),
    ("bad_alias", "bob.md", persona_text("bob", aliases="[everyone]"), "aliases", "reserved"),
    ("alias_not_list", "bob.md", persona_text("bob", aliases="builder"), "aliases", "a list"),
    ("duplicate_alias", "bob.md", persona_text("bob", aliases="[JOBS]"), "aliases", "'steve'"),
    ("id_is_alias", "jobs.md", persona_text("jobs"), "id", "already a name of persona 'steve'"),
    ("empty_body", "bob.md", persona_text("bob", body="  \n"), "body", "empty"),
    ("bad_tools", "bob.md", persona_text("bob", tools="recall"), "tools", "a list"),
]


@pytest.mark.parametrize(
    ("file_name", "text", "field", "fragment"),
    [case[1:] for case in BAD_FILES],
    ids=[case[0] for case in BAD_FILES],
)
def test_mistakes_are_reported_with_file_and_field(
    tmp_path: Path, file_name: str, text: str, field: str | None, fragment: str
) -> None:
    path = write(tmp_path, file_name, text)
    library = load_personas(tmp_path)
    assert len(library.errors) == 1
    error = library.errors[0]
    assert error.path == str(path)
    assert error.field == field
    assert fragment in error.message
    assert str(error).startswith(f"{path}: field '{field}': " if field else f"{path}: ")
    with pytest.raises(PersonaError, match=re.escape(fragment)):
        load_personas(tmp_path, strict=True)


def test_model_hint_message_reads_plainly(tmp_path: Path) -> None:
    path = write(tmp_path, "bob.md", persona_text("bob", modelHint="huge"))
    (error,) = load_personas(tmp_path).errors
    assert str(error) == f"{path}: field 'modelHint': must be 'primary' or 'fast'"


def test_broken_file_does_not_stop_the_others(tmp_path: Path) -> None:
    write(tmp_path, "alpha.md", persona_text("alpha"))
    write(tmp_path, "beta.md", persona_text("beta", modelHint="slow"))
    write(tmp_path, "gamma.md", persona_text("gamma"))
    write(tmp_path, "steve.md", "no front matter")
    library = load_personas(tmp_path)
    assert [e.field for e in library.errors] == ["modelHint", None]
    assert library.get("alpha") and library.get("gamma")
    assert library.get("beta") is None
    # The broken override leaves the built-in in place.
    steve = library.get("steve")
    assert steve is not None and steve.builtin


def test_two_user_files_for_one_id_are_reported(tmp_path: Path) -> None:
    write(tmp_path, "Bob.md", persona_text("Bob"))
    second = write(tmp_path, "bob.md", persona_text("bob"))
    if len(list(tmp_path.iterdir())) < 2:
        pytest.skip("case-insensitive file system")
    (error,) = load_personas(tmp_path).errors
    assert (error.path, error.field) == (str(second), "id")
    assert "also defined in" in error.message


def test_not_utf8_is_reported(tmp_path: Path) -> None:
    (tmp_path / "bob.md").write_bytes(b"---\nid: bob\nname: \xff\n---\nBody\n")
    (error,) = load_personas(tmp_path).errors
    assert "UTF-8" in error.message


# --- lookup -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("steve", "steve"),
        ("STEVE", "steve"),
        ("Jobs", "steve"),
        ("vp-steve", "steve"),
        ("VP-Linus", "linus"),
        ("vp-torvalds", "linus"),
        ("@kent", "kent"),
        ("tdd", "kent"),
        ("nobody", None),
        ("vp-", None),
    ],
)
def test_resolve(name: str, expected: str | None) -> None:
    persona = load_personas(None).resolve(name)
    assert (persona.id if persona else None) == expected


def test_get_matches_ids_only() -> None:
    library = load_personas(None)
    assert library.get("Linus") is library.get("linus") is not None
    assert library.get("torvalds") is None
    assert "jobs" in library and "nobody" not in library


# --- new persona files ------------------------------------------------------


def test_new_persona_file_loads(tmp_path: Path) -> None:
    directory = tmp_path / "personas"
    path = new_persona_file(directory, "bob", name="Bob: the {builder}", role="site lead")
    assert path == directory / "bob.md"
    library = load_personas(directory, strict=True)
    bob = library.get("bob")
    assert bob is not None
    assert bob.name == "Bob: the {builder}"
    assert bob.role == "site lead"
    assert "Questions you always ask" in bob.body


def test_new_persona_file_defaults(tmp_path: Path) -> None:
    new_persona_file(tmp_path, "data-bot")
    bot = load_personas(tmp_path, strict=True).get("data-bot")
    assert bot is not None and bot.name == "Data Bot" and bot.role == "team member"


def test_new_persona_file_refuses_to_overwrite(tmp_path: Path) -> None:
    path = new_persona_file(tmp_path, "bob")
    path.write_text(persona_text("bob", body="Edited by hand."), encoding="utf-8")
    with pytest.raises(FileExistsError):
        new_persona_file(tmp_path, "bob")
    assert "Edited by hand." in path.read_text(encoding="utf-8")


@pytest.mark.parametrize("bad_id", ["", "all", "User", "123", "_x", "a b", "x" * 41, "../x"])
def test_new_persona_file_refuses_bad_ids(tmp_path: Path, bad_id: str) -> None:
    with pytest.raises(PersonaError) as caught:
        new_persona_file(tmp_path, bad_id)
    assert caught.value.field == "id"
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("good_id", ["a", "Bob", "x" * 40, "vp-2", "kent_beck", "1a"])
def test_valid_ids(good_id: str) -> None:
    assert id_problem(good_id) is None


# --- views for the CLI and HTTP layers --------------------------------------


def test_summary_and_detail() -> None:
    steve = load_personas(None).get("steve")
    assert steve is not None
    summary = persona_summary(steve)
    assert summary == {
        "id": "steve",
        "name": steve.name,
        "nameZh": steve.name_zh,
        "role": steve.role,
        "area": steve.area,
        "aliases": list(steve.aliases),
        "modelHint": steve.model_hint,
        "builtin": True,
    }
    detail = persona_detail(steve)
    assert detail.items() >= summary.items()
    assert detail["body"] == steve.body
    assert detail["personaHash"] == steve.persona_hash
    assert detail["tools"] is None


# --- the directory: lookups that notice new files ----------------------------


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def counting_directory(user_dir: Path, clock: Clock) -> tuple[PersonaDirectory, list[int]]:
    """A directory over ``user_dir`` and a list that grows by one per read of the files."""
    reads: list[int] = []

    def load() -> PersonaLibrary:
        reads.append(1)
        return load_personas(user_dir)

    return PersonaDirectory(load, clock=clock, reload_after_s=1.0), reads


def test_directory_resolves_ids_and_aliases_without_reloading(tmp_path: Path) -> None:
    clock = Clock()
    directory, reads = counting_directory(tmp_path, clock)
    clock.t += 60
    assert directory.resolve("LINUS") == "linus"
    assert directory.resolve("torvalds") == "linus"
    assert directory.resolve("vp-steve") == "steve"
    assert reads == [1]


def test_unknown_name_reloads_the_files_at_most_once_per_interval(tmp_path: Path) -> None:
    clock = Clock()
    directory, reads = counting_directory(tmp_path, clock)
    write(tmp_path, "zed.md", persona_text("zed", aliases="[zee]"))
    # Loaded just now: a miss does not read the files again yet.
    assert directory.resolve("zed") is None and reads == [1]
    clock.t += 1.0
    assert directory.resolve("zed") is None and reads == [1]  # not *more* than 1 s
    clock.t += 0.01
    assert directory.resolve("zee") == "zed" and reads == [1, 1]
    # Misses within the next second share that one read.
    for name in ("nobody", "ghost", "nobody"):
        assert directory.lookup(name) is None
    assert reads == [1, 1]
    clock.t += 1.5
    assert directory.lookup("nobody") is None and reads == [1, 1, 1]
    assert "zed" in directory.ids()


def test_forced_reload_sees_removed_files_and_restarts_the_interval(tmp_path: Path) -> None:
    clock = Clock()
    path = write(tmp_path, "zed.md", persona_text("zed"))
    directory, reads = counting_directory(tmp_path, clock)
    assert directory.resolve("zed") == "zed"
    path.unlink()
    clock.t += 5
    assert directory.resolve("zed") == "zed"  # a hit never reloads
    assert directory.reload() is directory.library and reads == [1, 1]
    assert directory.resolve("zed") is None and reads == [1, 1]


def test_directory_open_reads_builtins_and_user_files(tmp_path: Path) -> None:
    write(tmp_path, "zed.md", persona_text("zed"))
    assert PersonaDirectory.open(tmp_path).resolve("zed") == "zed"
    assert PersonaDirectory.open(None).resolve("steve") == "steve"
    assert PersonaDirectory.open(None).resolve("zed") is None
