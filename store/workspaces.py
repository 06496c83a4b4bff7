"""Workspaces: named folders under ``<data dir>/workspaces`` that conversations work in.

A client names a workspace (the seed's ``workDir``); it never gives a path.
Every path to a workspace is made here, from a name checked here, so a name
can never reach outside the workspaces folder: no separators, no ``..``, no
leading dot, nothing but letters, digits, ``.``, ``_`` and ``-``. Code that
gives VPs file tools in a workspace takes its folder from
:func:`workspace_path` and nowhere else.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from store.conversation import GroupKind

if TYPE_CHECKING:
    from store.base import Group

DEFAULT_WORKSPACE = "default"
"""The workspace of a conversation created without a ``workDir``."""

MAX_NAME_LENGTH = 64
_NAME = re.compile(r"[^\W_][\w.-]*")


class WorkspaceNameError(ValueError):
    """A workspace name that is not allowed; the message says why."""


@dataclass(frozen=True, slots=True)
class Workspace:
    """A workspace folder that exists on disk."""

    name: str
    path: Path
    modified: float


def check_name(name: str) -> str:
    """``name`` if it is a valid workspace name; else WorkspaceNameError saying why."""
    if not name or len(name) > MAX_NAME_LENGTH:
        raise WorkspaceNameError(f"a workspace name has 1 to {MAX_NAME_LENGTH} characters")
    if "/" in name or "\\" in name:
        raise WorkspaceNameError("a workspace name is a name, not a path: no slashes")
    if ".." in name:
        raise WorkspaceNameError("a workspace name may not contain '..'")
    if not _NAME.fullmatch(name):
        raise WorkspaceNameError(
            "a workspace name starts with a letter or digit and has only letters, "
            "digits, '.', '_' and '-'"
        )
    return name


def workspaces_root(data_dir: Path) -> Path:
    """The folder every workspace lives in."""
    return data_dir / "workspaces"


def workspace_path(data_dir: Path, name: str) -> Path:
    """The folder of workspace ``name`` (checked; it may not exist yet)."""
    return workspaces_root(data_dir) / check_name(name)


def ensure_workspace(data_dir: Path, name: str) -> Path:
    """The folder of workspace ``name``, created (with its parents) when missing."""
    path = workspace_path(data_dir, name)
    path.mkdir(parents=True, exist_ok=True)
    return path


def list_workspaces(data_dir: Path) -> list[Workspace]:
    """The workspace folders that exist, by name; entries with invalid names are skipped."""
    root = workspaces_root(data_dir)
    if not root.is_dir():
        return []
    found: list[Workspace] = []
    for entry in root.iterdir():
        try:
            check_name(entry.name)
        except WorkspaceNameError:
            continue
        if entry.is_dir() and not entry.is_symlink():
            found.append(Workspace(entry.name, entry, entry.stat().st_mtime))
    return sorted(found, key=lambda w: w.name)


# -- the file areas VP tools work in ------------------------------------------

GROUP_WORKSPACES = "group-workspaces"
"""The folder under the data directory holding one file area per group."""


def folder_key(key: str) -> str:
    """A folder name for a username or a group id: the key itself when it is a plain name.

    Usernames may be ``..`` or start with a dot; such keys are written as ``~``
    and their UTF-8 bytes in hex, which no plain name can be (a plain name
    starts with a letter or digit), so two keys never share a folder.
    """
    try:
        return check_name(key)
    except WorkspaceNameError:
        return "~" + key.encode().hex()


def group_files(data_dir: Path, group_id: str) -> Path:
    """The file area of a group: ``<data dir>/group-workspaces/<group id>``."""
    return data_dir / GROUP_WORKSPACES / folder_key(group_id)


def conversation_files(data_dir: Path, work_dir: str, owner: str) -> Path:
    """The file area of a person's conversations in workspace ``work_dir``.

    It is the owner's own folder inside the workspace, so two people who
    both work in ``default`` never see each other's files, while one person's
    conversations in one workspace share theirs (as sessions in one folder
    do in the seed).
    """
    return workspace_path(data_dir, work_dir) / folder_key(owner)


def files_of(data_dir: Path, group: Group) -> Path:
    """The file area of a group record: a conversation's or a group's own."""
    info = group.conversation
    if group.kind is GroupKind.CONVERSATION and info is not None:
        return conversation_files(data_dir, info.work_dir, info.owner)
    return group_files(data_dir, group.id)


def remove_group_files(data_dir: Path, group_id: str) -> None:
    """Delete a group's file area with everything in it (the group is being deleted)."""
    shutil.rmtree(group_files(data_dir, group_id), ignore_errors=True)


# -- the project document -----------------------------------------------------
PROJECT_DOC_NAMES = ("AGENTS.md", "README.md")
"""What a group's VPs read into their prompts when its settings name no file."""

PROJECT_DOC_MAX_BYTES = 16_384
"""How much of the project document is read; the rest is cut, and marked so."""


@dataclass(frozen=True, slots=True)
class ProjectDoc:
    """The head of a workspace's project document, and whether it was cut."""

    name: str
    text: str
    truncated: bool


def read_project_doc(
    root: Path, name: str = "", max_bytes: int = PROJECT_DOC_MAX_BYTES
) -> ProjectDoc | None:
    """The project document of the file area ``root``; None when there is none.

    ``name`` is the group setting's relative path; empty means ``AGENTS.md``,
    else ``README.md``. A file outside ``root`` (through a symbolic link), a
    folder or an unreadable file counts as none. Read afresh on each call, so
    an edit shows in the next turn. Blocking: callers run it in a thread.
    """
    area = root.resolve()
    for candidate in (name,) if name else PROJECT_DOC_NAMES:
        path = (area / candidate).resolve()
        if not path.is_relative_to(area) or not path.is_file():
            continue
        try:
            with path.open("rb") as file:
                head = file.read(max_bytes + 1)
        except OSError:
            continue
        truncated = len(head) > max_bytes
        text = head[:max_bytes].decode("utf-8", errors="ignore")
        if truncated and "\n" in text:
            text = text[: text.rfind("\n")]
        return ProjectDoc(candidate, text, truncated)
    return None
