"""Memory recall as a turn hook, with the recent tier of the active memory set.

Before each turn the hook recalls memories for the trigger (``engine.memory``)
within a budget that follows the model's context window
(:func:`recall_budget`). The **recent tier** comes first: items recalled for
this group's last turns stay in front of the VP for a while, so a thread of
conversation keeps the memories it was built on even when the next message
does not name them.

After each turn the **post-turn adjustment** updates the tier: an item the
reply drew on (it shares a word with the reply) stays for
:data:`RECENT_TURNS` more turns; an item recalled but not drawn on stays one
more turn; an item in the tier that this turn did not draw on fades by one
turn, and leaves when it reaches zero. The tier lives in the VP actor (it is
a working set, rebuilt by use after a restart) and only ever shows an item
to turns that may read its scope.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from actors.hooks import AfterTurn, BeforeTurn
from engine.memory import allowed_scopes, recall, render_line, render_memory, scopes_for
from engine.messages import estimate_tokens
from store.memory import MemoryBackend, MemoryItem
from store.memory.text import query_terms

log = logging.getLogger(__name__)

# How many turns an item the reply drew on stays in the recent tier.
RECENT_TURNS = 3
# The recall budget: this share of the window, at least the configured floor,
# never more than MAX_SHARE of the window (a small model keeps room to answer).
WINDOW_SHARE = 0.01
MAX_SHARE = 0.05


def recall_budget(context_window: int, floor: int) -> int:
    """Tokens of memory a turn gets for a model with this window."""
    return max(
        0, min(max(floor, int(context_window * WINDOW_SHARE)), int(context_window * MAX_SHARE))
    )


@dataclass(slots=True)
class _Resident:
    item: MemoryItem
    turns_left: int


class RecallHook:
    """Recall before each turn (recent tier first); adjust the tier after it."""

    name = "memory-recall"

    def __init__(self, memory: Callable[[], MemoryBackend], limit: int, budget_floor: int) -> None:
        # Looked up at each turn: the backend the actor's services hold now.
        self.memory = memory
        self.limit = limit
        self.budget_floor = budget_floor
        self.recent: dict[str, dict[str, _Resident]] = {}
        self._used: dict[str, list[MemoryItem]] = {}

    async def before_turn(self, turn: BeforeTurn) -> list[str]:
        budget = recall_budget(turn.context_window, self.budget_floor)
        scopes = scopes_for(turn.user_id, turn.group_id, turn.vp_id)
        readable = set(allowed_scopes(scopes, turn.vp_id))
        found = await recall(
            self.memory(),
            scopes,
            turn.query,
            now=time.time(),
            vp_id=turn.vp_id,
            limit=self.limit,
            budget_tokens=budget,
        )
        tier = self.recent.get(turn.group_id, {})
        resident = sorted(
            (r for r in tier.values() if r.item.scope in readable),
            key=lambda r: -r.turns_left,
        )
        picked: list[MemoryItem] = []
        seen: set[str] = set()
        left = budget
        for item in [*(r.item for r in resident), *found]:
            cost = estimate_tokens(render_line(item))
            if item.id in seen or cost > left or len(picked) >= self.limit:
                continue
            picked.append(item)
            seen.add(item.id)
            left -= cost
        self._used[turn.turn_id] = picked
        return render_memory(picked)

    async def after_turn(self, turn: AfterTurn) -> None:
        used = self._used.pop(turn.turn_id, [])
        tier = self.recent.setdefault(turn.group_id, {})
        for resident in tier.values():
            resident.turns_left -= 1
        said = set(query_terms(turn.text)) if used else set()
        for item in used:
            drawn_on = bool(said & set(query_terms(item.text)))
            current = tier.get(item.id)
            if drawn_on:
                tier[item.id] = _Resident(item, RECENT_TURNS)
            elif current is None:
                tier[item.id] = _Resident(item, 1)
        for item_id in [i for i, r in tier.items() if r.turns_left <= 0]:
            del tier[item_id]
        if not tier:
            self.recent.pop(turn.group_id, None)
