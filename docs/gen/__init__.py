"""The reference pages written from the code: settings, wire protocol and HTTP routes.

``python -m docs.gen`` writes them; ``python -m docs.gen --check`` says
which ones differ from what the code would write now (``tests/test_docs.py``
fails the same way). Each page has a module with a ``render() -> str``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

DOCS_DIR = Path(__file__).resolve().parents[1]
COMMAND = ".venv/bin/python -m docs.gen"


def pages() -> dict[str, Callable[[], str]]:
    """Each generated page (its file name under docs/) and the function that writes it."""
    # Imported here: the HTTP page builds the gateway app, which imports Ray.
    from docs.gen import config_doc, http_doc, protocol_doc

    return {
        "configuration.md": config_doc.render,
        "protocol.md": protocol_doc.render,
        "http-api.md": http_doc.render,
    }


def stale(names: list[str] | None = None) -> list[str]:
    """The generated pages whose committed text differs from what the code writes now."""
    found = []
    for name, render in pages().items():
        if names is None or name in names:
            path = DOCS_DIR / name
            if not path.is_file() or path.read_text(encoding="utf-8") != render():
                found.append(name)
    return found


def write() -> list[str]:
    """Write every generated page; returns the names of those that changed."""
    changed = []
    for name, render in pages().items():
        path = DOCS_DIR / name
        text = render()
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
            changed.append(name)
    return changed
