"""The docs: generated pages match the code, and the README is a short front door."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from docs.gen import COMMAND, DOCS_DIR, pages

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
README_MAX_LINES = 300


@pytest.mark.parametrize("name", sorted(pages()))
def test_generated_page_is_up_to_date(name: str) -> None:
    path = DOCS_DIR / name
    assert path.is_file(), f"docs/{name} is missing: run {COMMAND}"
    expected = pages()[name]()
    assert path.read_text(encoding="utf-8") == expected, (
        f"docs/{name} is out of date: run {COMMAND}"
    )


def test_readme_is_a_front_door() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, (
        f"README.md has {len(lines)} lines; keep it under {README_MAX_LINES} and move "
        "the rest to docs/"
    )


def _local_links(path: Path) -> list[str]:
    """The relative link targets of a Markdown file (anchors and URLs left out)."""
    targets = re.findall(r"\]\(([^)\s]+)\)", path.read_text(encoding="utf-8"))
    return [t.split("#")[0] for t in targets if not re.match(r"[a-z]+:|#", t)]


def test_readme_links_resolve() -> None:
    links = _local_links(README)
    assert any(link.startswith("docs/") for link in links), "README.md links no page in docs/"
    missing = [link for link in links if not (ROOT / link).exists()]
    assert missing == [], f"README.md links to files that do not exist: {missing}"


def test_docs_links_resolve() -> None:
    missing = [
        f"docs/{page.name} -> {link}"
        for page in sorted(DOCS_DIR.glob("*.md"))
        for link in _local_links(page)
        if not (page.parent / link).exists()
    ]
    assert missing == [], f"links to files that do not exist: {missing}"
