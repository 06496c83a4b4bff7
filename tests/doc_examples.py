"""Running a copy-paste example from docs/web-api.md against a test's gateway."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

WEB_API = Path(__file__).resolve().parents[1] / "docs" / "web-api.md"
MAKE_RUN_URL = "http://127.0.0.1:8765"


def python_example(section: str, needs: str) -> str:
    """The first Python block under the heading ``section``; it must contain ``needs``."""
    text = WEB_API.read_text().split(f"## {section}", 1)[1]
    code = text.split("```python\n", 1)[1].split("```", 1)[0]
    assert needs in code, f"the example under {section!r} no longer says {needs!r}"
    return code


async def run_example(code: str, base_url: str, env: dict[str, str]) -> str:
    """Run ``code`` with the gateway at ``base_url`` for ``make run``'s; its output.

    ``env`` adds to the process's environment (the token, a group id).
    """
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        code.replace(MAKE_RUN_URL, base_url),
        env={**os.environ, **env},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 120)
    assert process.returncode == 0, err.decode()
    return out.decode()
