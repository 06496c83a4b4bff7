"""The docs: the generated pages match the code."""

from __future__ import annotations

from pathlib import Path

import pytest

from docs.gen import COMMAND, DOCS_DIR, pages

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("name", sorted(pages()))
def test_generated_page_is_up_to_date(name: str) -> None:
    path = DOCS_DIR / name
    assert path.is_file(), f"docs/{name} is missing: run {COMMAND}"
    expected = pages()[name]()
    assert path.read_text(encoding="utf-8") == expected, (
        f"docs/{name} is out of date: run {COMMAND}"
    )
