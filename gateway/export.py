"""A group's or a conversation's whole log as a download: Markdown for people,
JSON for programs.

A conversation is a group record of kind ``conversation``, so both are
read and written by the same code; a :class:`Subject` says which one the
document is of (its name, its JSON record and who is in it).

Deleted messages are left out (their text is gone anyway); notices are
kept, marked as such; a superseded reply is kept and says so, because it
was said. The JSON export carries every stored field of every message in
the wire spelling of the history endpoint (its ``reactions`` included), so
it can be read back, and the group's ``pins``; the Markdown export lists a
message's reactions under it and says which messages are pinned. Threads'
replies are marked in the JSON and sit under their root in the Markdown
(``gateway.export_threads``).

Versions (``store.versions``) are exported whole: an edited message with
its earlier texts (JSON: ``edits``, Markdown: "edited", then each earlier
version quoted), and each version of a VP's reply that has several
(JSON: ``replyVersion {rootId, version, of, shown}``, Markdown: "version 1
of 2", and which one the group shows).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from fastapi import Query, Response

from gateway.export_threads import mark_threads, markdown_with_threads
from gateway.views import group_view, message_view
from store.base import Group, GroupLog, GroupMessage, Store
from store.chatviews import UsageTotals
from store.reactions import Pin, Reaction, pin_views, reaction_views
from store.versions import chosen_versions, earlier_texts, family_roots, version_count

# Messages read per store call while exporting, and the most one export holds.
EXPORT_PAGE = 500
EXPORT_MAX_MESSAGES = 200_000

ExportFormat = Annotated[str, Query(pattern="^(markdown|md|json)$")]
"""The ``format`` query parameter of an export route."""


@dataclass(frozen=True, slots=True)
class Marks:
    """What people put on the messages: each one's reactions, and the group's pins."""

    reactions: dict[str, tuple[Reaction, ...]]
    pins: tuple[Pin, ...] = ()


NO_MARKS = Marks({})


@dataclass(frozen=True, slots=True)
class Subject:
    """What an export is of, as its document names it."""

    kind: Literal["group", "conversation"]
    id: str
    name: str
    # The JSON document's entry under ``kind``.
    record: dict[str, Any]
    # The Markdown header's words on who is in it.
    who: str


def group_subject(group: Group) -> Subject:
    return Subject(
        kind="group",
        id=group.id,
        name=group.name,
        record=group_view(group),
        who=f"members: {', '.join(group.members) or '-'}"
        f" · VPs: {', '.join('@' + v for v in group.roster) or '-'}",
    )


def conversation_subject(group: Group, record: dict[str, Any]) -> Subject:
    """A conversation (``record``: its settings view) as the subject of an export."""
    info = group.conversation
    assert info is not None
    return Subject(
        kind="conversation",
        id=group.id,
        name=group.name,
        record=record,
        who=f"conversation of {info.owner} with @{info.vp_id} · workspace: {info.work_dir}",
    )


async def download(store: Store, subject: Subject, format: str) -> Response:
    """The export of ``subject`` as a download in ``format`` (an :data:`ExportFormat`)."""
    messages = await all_messages(store, subject.id)
    usage = await store.group_usage(subject.id)
    reactions = await store.reactions_of(subject.id, [m.id for m in _kept(messages)])
    marks = Marks(reactions, await store.pins_of(subject.id))
    if format == "json":
        body, media, ext = as_json(subject, messages, usage, marks), "application/json", "json"
    else:
        body, media, ext = as_markdown(subject, messages, usage, marks), "text/markdown", "md"
    headers = {"Content-Disposition": f'attachment; filename="{filename(subject, ext)}"'}
    return Response(body, media_type=f"{media}; charset=utf-8", headers=headers)


async def all_messages(log: GroupLog, group_id: str) -> list[GroupMessage]:
    """Every message of the group log, oldest first (at most EXPORT_MAX_MESSAGES)."""
    pages: list[list[GroupMessage]] = []
    count = 0
    async for page in _pages(log, group_id):
        pages.append(page)
        count += len(page)
        if count >= EXPORT_MAX_MESSAGES:
            break
    return [m for page in reversed(pages) for m in page]


async def _pages(log: GroupLog, group_id: str) -> AsyncIterator[list[GroupMessage]]:
    before: str | None = None
    while True:
        page = await log.read_messages(group_id, before=before, limit=EXPORT_PAGE)
        if not page:
            return
        yield page
        if len(page) < EXPORT_PAGE:
            return
        before = page[0].id


def _kept(messages: list[GroupMessage]) -> list[GroupMessage]:
    return [m for m in messages if not m.meta.get("deleted")]


def _when(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def as_json(
    subject: Subject, messages: list[GroupMessage], usage: UsageTotals, marks: Marks = NO_MARKS
) -> str:
    """The export as one JSON document."""
    kept = _kept(messages)
    views = [message_view(m) for m in kept]
    labels = reply_versions(kept)
    for m, view in zip(kept, views, strict=True):
        if m.meta.get("editedAt"):
            view["edits"] = {"version": version_count(m), "earlier": earlier_texts(m)}
        if m.id in labels:
            view["replyVersion"] = labels[m.id].view()
    for view in views:
        found = reaction_views(marks.reactions.get(view["id"], ()))
        view["reactions"] = [r.model_dump(by_alias=True) for r in found]
    mark_threads(views, _kept(messages))
    document: dict[str, Any] = {
        "format": f"yeaft-{subject.kind}-export",
        "version": 1,
        "exportedAt": time.time(),
        subject.kind: subject.record,
        "usage": usage_view(usage),
        "messages": views,
        "pins": [p.model_dump(by_alias=True) for p in pin_views(marks.pins)],
    }
    return json.dumps(document, ensure_ascii=False, indent=2)


def as_markdown(
    subject: Subject, messages: list[GroupMessage], usage: UsageTotals, marks: Marks = NO_MARKS
) -> str:
    """The export as a Markdown document: one section per message, text as written."""
    lines = [
        f"# {subject.name}",
        "",
        f"Exported {_when(time.time())} · {subject.who}",
        f"Usage: {usage.turns} turns, {usage.input_tokens} tokens in,"
        f" {usage.output_tokens} tokens out, ${usage.cost_usd:.4f}",
        "",
    ]
    pinned = {p.message_id for p in marks.pins}
    labels = reply_versions(_kept(messages))

    def section(m: GroupMessage, level: str) -> list[str]:
        heading = _heading(m, labels.get(m.id)) + (" · 📌 pinned" if m.id in pinned else "")
        said = ["---", "", f"{level} {heading}", "", m.text or "_(no text)_", ""]
        for n, earlier in enumerate(earlier_texts(m), start=1):
            quoted = "\n".join(f"> {line}" for line in str(earlier.get("text", "")).splitlines())
            said += [f"Version {n} ({_when(float(earlier.get('ts', m.ts)))}):", "", quoted, ""]
        reactions = marks.reactions.get(m.id, ())
        if reactions:
            listed = " · ".join(f"{r.emoji} {', '.join(r.users)}" for r in reactions)
            said += [f"Reactions: {listed}", ""]
        return said

    # Each thread's replies right under its root (gateway.export_threads).
    lines += markdown_with_threads(_kept(messages), section)
    return "\n".join(lines).rstrip() + "\n"


@dataclass(frozen=True, slots=True)
class ReplyVersion:
    """Where one version of a VP's reply stands among the reply's versions."""

    root_id: str
    version: int
    of: int
    shown: bool

    def view(self) -> dict[str, Any]:
        return {"rootId": self.root_id, "version": self.version, "of": self.of, "shown": self.shown}


def reply_versions(messages: list[GroupMessage]) -> dict[str, ReplyVersion]:
    """Each version of a reply with several among ``messages``, and where it stands."""
    roots = family_roots(messages)
    chosen = chosen_versions(messages)
    members: dict[str, list[str]] = {}
    for m in messages:
        if m.id in roots:
            members.setdefault(roots[m.id], []).append(m.id)
    return {
        member: ReplyVersion(root, n, len(ids), chosen.get(root) == member)
        for root, ids in members.items()
        for n, member in enumerate(ids, start=1)
    }


def _heading(m: GroupMessage, version: ReplyVersion | None = None) -> str:
    meta = m.meta
    if m.role == "system":
        who = "notice"
    elif meta.get("injectedBy") == "route_forward":
        who = f"@{m.author} → @{meta.get('routeForwardTarget', '?')} (hand-off)"
    elif m.role == "assistant":
        who = f"@{m.author}"
    else:
        who = m.author
    extra = []
    usage = meta.get("usage")
    if isinstance(usage, dict) and (usage.get("input_tokens") or usage.get("output_tokens")):
        extra.append(f"{usage.get('input_tokens', 0)} in / {usage.get('output_tokens', 0)} out")
    if version is not None:
        shown = "shown" if version.shown else "not shown"
        extra.append(f"version {version.version} of {version.of}, {shown}")
    elif meta.get("supersededBy"):
        extra.append("superseded by a regenerated reply")
    if meta.get("editedAt"):
        extra.append(f"edited {_when(float(meta['editedAt']))}, version {version_count(m)}")
    tail = f" ({'; '.join(extra)})" if extra else ""
    return f"{who} · {_when(m.ts)}{tail}"


def usage_view(usage: UsageTotals) -> dict[str, Any]:
    """Usage totals in wire spelling."""
    return {
        "turns": usage.turns,
        "inputTokens": usage.input_tokens,
        "outputTokens": usage.output_tokens,
        "costUsd": usage.cost_usd,
    }


def filename(subject: Subject, extension: str) -> str:
    """A safe download name from the group's or conversation's name."""
    stem = re.sub(r"[^A-Za-z0-9_-]+", "-", subject.name).strip("-")[:60] or subject.id
    return f"{stem}.{extension}"
