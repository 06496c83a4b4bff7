"""YAML front matter: the block of fields that opens a persona file and a skill file.

The block is fenced by two lines of three dashes at the very top of the text.
:func:`split_front_matter` parses it; each kind of file wraps its
:class:`FrontMatterError` in its own error, which names the file.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

# libyaml's safe loader where PyYAML was built with it (its wheels are): the
# same documents, about eight times faster than the pure-Python one, which
# took 15 ms for the built-in personas.
YAML_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

FRONT_MATTER = re.compile(r"\A---[ \t]*\r?\n(.*?)^---[ \t]*(?:\r?\n|\Z)", re.DOTALL | re.MULTILINE)


class FrontMatterError(ValueError):
    """The front matter is missing, is not YAML, or is not a mapping; the message says which."""


def split_front_matter(text: str, missing: str) -> tuple[dict[str, Any], str]:
    """The fields of ``text``'s front matter and the body after it.

    ``missing`` is the message when there is no front matter (it says what
    the kind of file should start with).
    """
    match = FRONT_MATTER.match(text)
    if match is None:
        raise FrontMatterError(missing)
    try:
        data = yaml.load(match.group(1), Loader=YAML_LOADER)
    except yaml.YAMLError as exc:
        # PyYAML's message carries the line and column of the problem.
        detail = " ".join(str(exc).split())
        raise FrontMatterError(f"front matter is not valid YAML: {detail}") from exc
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise FrontMatterError("front matter must be a mapping of 'field: value' lines")
    return data, text[match.end() :]
