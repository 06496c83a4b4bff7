"""How groups and their messages look on the wire (camelCase, like every wire name).

Kept apart from ``gateway.groups`` (the operations) so that the tail, the
WebSocket and the HTTP API can build these frames without importing the
group service.
"""

from __future__ import annotations

from typing import Any

from protocol import GroupUpdate
from protocol.attachments import attachment_dicts
from store.base import Group, GroupMessage, Store
from store.membership import group_view as store_group_view
from store.reactions import reaction_views
from store.threads import thread_of


def group_view(group: Group) -> dict[str, Any]:
    """A group as clients see it (camelCase, like every wire name), its owner included."""
    return store_group_view(group)


def group_update(group: dict[str, Any], action: str, **extra: Any) -> GroupUpdate:
    """A ``group_update`` frame; ``action`` says what happened, extras ride along.

    Actions: created, renamed, deleted, roster, default_vp, subscribed, list;
    members, owner, settings (from the event log, with ``seq``); invited,
    removed, left, added (see ``gateway.ws_members`` and ``gateway.people``).
    Extra keys are given in their wire spelling (``requestId``, ``groups``).
    """
    return GroupUpdate.model_validate({"group": group, "action": action, **extra})


def message_view(message: GroupMessage, group_id: str | None = None) -> dict[str, Any]:
    """A stored group message as the history endpoint returns it.

    With ``group_id`` its files are listed as ``attachments``, each with its
    download ``url`` (as in the live ``group_message`` frame).
    """
    view: dict[str, Any] = {
        "id": message.id,
        "ts": message.ts,
        "author": message.author,
        "role": message.role,
        "text": message.text,
        "mentions": list(message.mentions),
        "people": list(message.people),
        "meta": dict(message.meta),
    }
    files = attachment_dicts(group_id, message.meta.get("attachments")) if group_id else None
    if files:
        view["attachments"] = files
    return view


async def with_reactions(store: Store, group_id: str, views: list[dict[str, Any]]) -> None:
    """Give each message view of a history page its ``reactions`` (an empty list for none).

    Each as the ``message_reactions`` frame has them: the emoji and its
    users, in the order they reacted (``protocol.reactions``).
    """
    found = await store.reactions_of(group_id, [v["id"] for v in views])
    for view in views:
        reactions = reaction_views(found.get(view["id"], ()))
        view["reactions"] = [r.model_dump(by_alias=True) for r in reactions]


async def with_threads(store: Store, group_id: str, views: list[dict[str, Any]]) -> None:
    """Give each message view of a history page that has replies its ``thread`` summary."""
    roots = [v["id"] for v in views if thread_of(v.get("meta") or {}) is None]
    summaries = await store.thread_summaries(group_id, roots)
    for view in views:
        summary = summaries.get(view["id"])
        if summary is not None:
            view["thread"] = summary.view()
