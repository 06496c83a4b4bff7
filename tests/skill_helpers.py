"""Helpers shared by the skill tests (``tests/test_skills*.py``)."""

from __future__ import annotations

from protocol.tasks import Skill


def skill(name: str, description: str, content: str = "Do the work.", **kw: object) -> Skill:
    """A skill with a default body; ``kw`` sets its other fields."""
    return Skill(name=name, description=description, content=content, **kw)  # type: ignore[arg-type]
