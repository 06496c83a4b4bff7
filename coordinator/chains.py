"""A loop-guard chain rebuilt from the store, for a coordinator that starts again.

The loop guard keeps its chains in the coordinator's memory, so a coordinator
that Ray restarts (or a deployment started again on the same store) would
otherwise meet the chains of its unfinished turns with fresh counts: a chain
that had used its whole budget of turns, or whose two VPs had already
answered each other four times, would get its allowance again.

Everything a chain counts is in the store already. Every message of a chain
after the person's message names it in ``meta.chainId`` (VP replies,
``route_forward`` hand-offs and loop-guard notices), every turn is recorded
under the message that triggered it, and that message's author is the VP
that caused the turn (none for the person's message). So the chain's turns
are the turn records of its messages, each pair of VPs is counted from a
turn's trigger author and its VP, and a loop-guard notice in the chain means
the chain was stopped by that rule (and is not reported again).

The per-target throttle is not rebuilt: it counts hand-offs in the last few
seconds (5 by default) on the coordinator's monotonic clock, so a restart
forgets at most one window of it.
"""

from __future__ import annotations

from coordinator.loop_guard import Chain, LoopRule
from store.base import GroupMessage, Store

# Messages read per page while looking back for the chain's first message,
# and how many pages at most: chains are short-lived, and one older than
# this is counted from what was read.
PAGE = 200
MAX_PAGES = 10

_GUARD_RULES = frozenset(r.value for r in LoopRule if r is not LoopRule.CANCELLED)


async def chain_messages(store: Store, group_id: str, root_id: str) -> list[GroupMessage]:
    """The chain's messages, its first (the person's) included when still in reach."""
    found: list[GroupMessage] = []
    before: str | None = None
    for _ in range(MAX_PAGES):
        page = await store.read_messages(group_id, before=before, limit=PAGE)
        found = [m for m in page if m.id == root_id or m.meta.get("chainId") == root_id] + found
        # Message ids grow with time: nothing of the chain is older than its root.
        if len(page) < PAGE or any(m.id <= root_id for m in page):
            break
        before = page[0].id
    return found


async def rebuild_chain(store: Store, group_id: str, root_id: str) -> Chain:
    """The chain ``root_id`` as the loop guard had counted it (throttle aside)."""
    chain = Chain(root_id)
    for message in await chain_messages(store, group_id, root_id):
        notice = message.meta.get("notice")
        if isinstance(notice, dict) and notice.get("rule") in _GUARD_RULES:
            chain.stopped = chain.stopped or LoopRule(notice["rule"])
            continue
        # A turn's cause is the author of the message it answers; a person's
        # message (the chain's root) has none.
        source = None if message.id == root_id else message.author
        for record in await store.turns_of(group_id, message.id):
            chain.turns += 1
            if source is not None and source != record.vp_id:
                chain.pairs[(min(source, record.vp_id), max(source, record.vp_id))] += 1
    return chain
