"""Workspace file tools: ``list_files``, ``read_file``, ``write_file``, ``search_files``.

Each turn's tool context carries the folder of its group's or conversation's
workspace (``ctx.services["workspace"]``, a :class:`~pathlib.Path` the VP
actor takes from the group record and the store's data directory); the tools
are offered only when it does. Every path a model gives is relative to that
folder and is checked by :meth:`FileArea.locate` before anything touches the
disk: an absolute path, a ``..`` part or a path whose resolved form (symbolic
links followed) lies outside the folder is refused. What goes wrong comes back
to the model as an error result that says why.
"""

from __future__ import annotations

import asyncio
import mimetypes
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath, PureWindowsPath

from pydantic import BaseModel, Field

from engine.tools.registry import CONVERSATION_MODES, Handler, Tool, ToolContext, ToolOutcome

WORKSPACE_SERVICE = "workspace"
"""The key of the workspace folder in ``ToolContext.services``."""

# How much of a file is sniffed for NUL bytes to call it binary.
_SNIFF = 8192


@dataclass(frozen=True, slots=True)
class FileLimits:
    """Size limits of the file tools (bytes)."""

    # Largest file write_file writes and search_files reads.
    max_file_bytes: int = 1_000_000
    # Most one read_file call returns; a longer file is read in pieces.
    max_read_bytes: int = 100_000
    # Most entries list_files returns and hits search_files returns.
    max_entries: int = 500
    max_hits: int = 100


class FileToolError(Exception):
    """A file operation the tools refuse; the message is for the model."""


@dataclass(frozen=True, slots=True)
class Entry:
    """One file or folder of a workspace, by its path relative to the workspace."""

    path: str
    is_dir: bool
    size: int
    modified: float


class FileArea:
    """A folder that paths may not leave, and the file operations inside it."""

    def __init__(self, root: Path, limits: FileLimits | None = None) -> None:
        self.root = root
        self.limits = limits or FileLimits()

    def locate(self, path: str) -> Path:
        """The absolute path of ``path`` inside the area; FileToolError when it would leave it."""
        if "\x00" in path:
            raise FileToolError("a path may not contain NUL characters")
        text = path.strip() or "."
        if PurePosixPath(text).is_absolute() or PureWindowsPath(text).is_absolute():
            raise FileToolError(f"{path!r} is absolute; give a path relative to the workspace")
        if PureWindowsPath(text).drive or ".." in PurePosixPath(text.replace("\\", "/")).parts:
            raise FileToolError(f"{path!r} leaves the workspace: '..' is not allowed")
        root = self.root.resolve()
        # resolve() follows every symbolic link on the way, so a link that
        # points outside the workspace is caught here, whatever its depth.
        target = (root / text).resolve()
        if not target.is_relative_to(root):
            raise FileToolError(f"{path!r} leads outside the workspace (through a symbolic link)")
        return target

    def relative(self, target: Path) -> str:
        return target.relative_to(self.root.resolve()).as_posix()

    # -- operations (blocking; the tools run them in a thread) -----------------
    def listing(self, path: str = ".", recursive: bool = False) -> tuple[list[Entry], bool]:
        """The entries under ``path`` (sorted) and whether the list was cut at the limit."""
        folder = self.locate(path)
        if not folder.exists():
            if path.strip() in ("", "."):
                return [], False
            raise FileToolError(f"{path!r} does not exist")
        if not folder.is_dir():
            raise FileToolError(f"{path!r} is a file, not a folder")
        entries: list[Entry] = []
        for item in self._walk(folder, recursive):
            if len(entries) >= self.limits.max_entries:
                return entries, True
            entries.append(item)
        return entries, False

    def _walk(self, folder: Path, recursive: bool) -> Iterator[Entry]:
        root = self.root.resolve()
        for child in sorted(folder.iterdir(), key=lambda p: p.name):
            if child.is_symlink() and not child.resolve().is_relative_to(root):
                continue  # a link out of the workspace is not shown
            try:
                info = child.stat()
            except OSError:
                continue  # a broken link, or a file removed meanwhile
            is_dir = child.is_dir()
            yield Entry(self.relative(child), is_dir, 0 if is_dir else info.st_size, info.st_mtime)
            if recursive and is_dir and not child.is_symlink():
                yield from self._walk(child, recursive)

    def read(self, path: str, offset: int = 0) -> tuple[str, int, int]:
        """Text of ``path`` from byte ``offset``: (text, bytes read, file size)."""
        target = self._file(path)
        size = target.stat().st_size
        with target.open("rb") as f:
            head = f.read(_SNIFF)
            if is_binary(head):
                raise FileToolError(describe_binary(path, size))
            f.seek(offset)
            data = f.read(self.limits.max_read_bytes)
        # A piece may end inside a character; the replacement shows the cut.
        return data.decode("utf-8", errors="replace"), len(data), size

    def write(self, path: str, content: str, append: bool = False) -> int:
        """Write (or append) ``content``; returns the file's size afterwards."""
        data = content.encode("utf-8")
        target = self.locate(path)
        if target == self.root.resolve():
            raise FileToolError("give the path of a file to write")
        if target.is_dir():
            raise FileToolError(f"{path!r} is a folder")
        existing = target.stat().st_size if append and target.exists() else 0
        if existing + len(data) > self.limits.max_file_bytes:
            raise FileToolError(
                f"the file would be {existing + len(data)} bytes; the limit is "
                f"{self.limits.max_file_bytes} bytes per file"
            )
        target.parent.mkdir(parents=True, exist_ok=True)
        flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if append else os.O_TRUNC)
        # O_NOFOLLOW: a link put in place after the check is not written through.
        fd = os.open(target, flags | getattr(os, "O_NOFOLLOW", 0), 0o644)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        return existing + len(data)

    def search(self, query: str, path: str = ".") -> tuple[list[str], bool]:
        """``path:line: text`` for each line containing ``query`` (any case); cut at the limit."""
        needle = query.lower()
        hits: list[str] = []
        entries, _ = self.listing(path, recursive=True)
        for entry in entries:
            if entry.is_dir or entry.size > self.limits.max_file_bytes:
                continue
            data = (self.root.resolve() / entry.path).read_bytes()
            if is_binary(data[:_SNIFF]):
                continue
            for number, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
                if needle in line.lower():
                    if len(hits) >= self.limits.max_hits:
                        return hits, True
                    hits.append(f"{entry.path}:{number}: {line.strip()[:300]}")
        return hits, False

    def _file(self, path: str) -> Path:
        target = self.locate(path)
        if not target.exists():
            raise FileToolError(f"{path!r} does not exist")
        if target.is_dir():
            raise FileToolError(f"{path!r} is a folder; use list_files")
        return target


def is_binary(head: bytes) -> bool:
    """Whether bytes look like a binary file: a NUL byte, or not UTF-8 at all."""
    if b"\x00" in head:
        return True
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        # A multi-byte character cut at the end of the sample is still text.
        return exc.start < len(head) - 4
    return False


def describe_binary(path: str, size: int) -> str:
    kind = mimetypes.guess_type(path)[0] or "unknown type"
    return f"{path!r} is a binary file ({kind}, {size} bytes); it cannot be read as text"


# -- the tools ------------------------------------------------------------------
class ListFilesParams(BaseModel):
    path: str = Field(default=".", description="Folder relative to the workspace.")
    recursive: bool = Field(default=False, description="Also list what is inside sub-folders.")


class ReadFileParams(BaseModel):
    path: str = Field(min_length=1, description="File relative to the workspace.")
    offset: int = Field(default=0, ge=0, description="Byte to start at (for long files).")


class WriteFileParams(BaseModel):
    path: str = Field(min_length=1, description="File relative to the workspace.")
    content: str = Field(description="The text to write (UTF-8).")
    append: bool = Field(default=False, description="Add to the end instead of replacing.")


class SearchFilesParams(BaseModel):
    query: str = Field(min_length=1, max_length=500, description="Text to look for (any case).")
    path: str = Field(default=".", description="Folder to search, relative to the workspace.")


def _area(ctx: ToolContext, limits: FileLimits) -> FileArea:
    root = ctx.services.get(WORKSPACE_SERVICE)
    if not isinstance(root, Path):
        raise FileToolError("this conversation has no workspace")
    return FileArea(root, limits)


def _has_workspace(ctx: ToolContext) -> bool:
    return isinstance(ctx.services.get(WORKSPACE_SERVICE), Path)


def file_tools(limits: FileLimits | None = None) -> list[Tool]:
    """The four workspace tools, sharing ``limits``; registered by name like any tool."""
    lim = limits or FileLimits()

    async def list_files(p: ListFilesParams, ctx: ToolContext) -> ToolOutcome:
        def run() -> str:
            entries, cut = _area(ctx, lim).listing(p.path, p.recursive)
            if not entries:
                return "the folder is empty"
            lines = [f"{e.path}/" if e.is_dir else f"{e.path}  ({e.size} bytes)" for e in entries]
            if cut:
                lines.append(f"[only the first {lim.max_entries} entries are listed]")
            return "\n".join(lines)

        return await _run(run)

    async def read_file(p: ReadFileParams, ctx: ToolContext) -> ToolOutcome:
        def run() -> str:
            text, count, size = _area(ctx, lim).read(p.path, p.offset)
            end = p.offset + count
            if p.offset == 0 and end >= size:
                return text
            note = f"[bytes {p.offset}-{end} of {size}"
            more = f"; read on with offset={end}]" if end < size else "]"
            return f"{text}\n{note}{more}"

        return await _run(run)

    async def write_file(p: WriteFileParams, ctx: ToolContext) -> ToolOutcome:
        def run() -> str:
            size = _area(ctx, lim).write(p.path, p.content, p.append)
            return f"{'appended to' if p.append else 'wrote'} {p.path} ({size} bytes)"

        return await _run(run)

    async def search_files(p: SearchFilesParams, ctx: ToolContext) -> ToolOutcome:
        def run() -> str:
            hits, cut = _area(ctx, lim).search(p.query, p.path)
            if not hits:
                return f"no line contains {p.query!r}"
            if cut:
                hits.append(f"[only the first {lim.max_hits} matches are shown]")
            return "\n".join(hits)

        return await _run(run)

    def tool(name: str, doc: str, params: type[BaseModel], handler: Handler) -> Tool:
        return Tool(
            name,
            doc,
            params,
            handler,
            modes=CONVERSATION_MODES,
            available=_has_workspace,
            timeout=30.0,
        )

    return [
        tool("list_files", "List the files of your workspace (or of one folder).",
             ListFilesParams, list_files),
        tool("read_file", "Read a text file of your workspace.", ReadFileParams, read_file),
        tool("write_file", "Write a text file in your workspace; people here can open it.",
             WriteFileParams, write_file),
        tool("search_files", "Find the lines of the workspace's text files containing a text.",
             SearchFilesParams, search_files),
    ]  # fmt: skip


async def _run(work: Callable[[], str]) -> ToolOutcome:
    """Run a blocking file operation in a thread; refusals become error results."""
    try:
        return ToolOutcome(await asyncio.to_thread(work))
    except FileToolError as exc:
        return ToolOutcome(str(exc), is_error=True)
    except OSError as exc:
        return ToolOutcome(f"the file operation failed: {exc.strerror or exc}", is_error=True)
