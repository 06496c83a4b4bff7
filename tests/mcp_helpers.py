"""Helpers shared by the MCP tests (``tests/test_mcp*.py``)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

# The fixture server, written with the MCP SDK's server API.
SERVER = str(Path(__file__).resolve().parent / "fixtures" / "mcp_server.py")


def stdio(**extra: Any) -> dict[str, Any]:
    """The configuration of the fixture server over stdio, with ``extra`` settings."""
    return {"command": sys.executable, "args": [SERVER, "stdio"], **extra}
