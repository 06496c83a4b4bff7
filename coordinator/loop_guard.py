"""The loop guard: one per group, shared by every turn in it.

A chain is everything caused by one user message. Four rules keep VP-to-VP
traffic (``route_forward`` and ``@mentions`` in replies) from running away:

- chain depth: hops from the user message (default 8 allowed, the 9th refused);
- per-target throttle: at most N VP-caused dispatches to one VP per window
  (8 per 5 s), kept across chains so a loop cannot dodge it by restarting;
- ping-pong: at most N exchanges between the same two VPs in a chain (4);
- turn budget: at most N VP turns per user message (32).

When a rule trips the chain stops: nothing more is dispatched in it. A user
message always starts a fresh chain. The throttle applies to VP-caused hops
only; people are not rate-limited by the loop guard (the gateway does that).
"""

from __future__ import annotations

import time
from collections import Counter, OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field

from store.base import GroupSettings

MAX_CHAINS = 512
MAX_THROTTLE_KEYS = 1000


@dataclass(slots=True)
class Chain:
    root: str
    turns: int = 0
    pairs: Counter[tuple[str, str]] = field(default_factory=Counter)
    stopped: str | None = None


@dataclass(frozen=True, slots=True)
class Verdict:
    ok: bool
    rule: str | None = None
    detail: dict[str, object] = field(default_factory=dict)

    @property
    def message(self) -> str:
        return RULE_TEXT.get(self.rule or "", self.rule or "")


RULE_TEXT = {
    "chain_depth_exceeded": "loop guard: the chain of VP hand-offs is too deep",
    "throttled": "loop guard: too many hand-offs to the same VP in a short time",
    "ping_pong": "loop guard: two VPs kept answering each other",
    "turn_budget": "loop guard: this message has used its budget of VP turns",
    "cancelled": "the conversation was cancelled",
}


class LoopGuard:
    def __init__(
        self, settings: GroupSettings, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.settings = settings
        self._clock = clock
        self._chains: OrderedDict[str, Chain] = OrderedDict()
        self._hits: OrderedDict[str, deque[float]] = OrderedDict()

    def start_chain(self, root_id: str) -> Chain:
        chain = Chain(root_id)
        self._chains[root_id] = chain
        while len(self._chains) > MAX_CHAINS:
            self._chains.popitem(last=False)
        return chain

    def chain(self, root_id: str) -> Chain:
        """The chain for ``root_id``; an evicted or unknown one counts as stopped."""
        found = self._chains.get(root_id)
        if found is None:
            found = Chain(root_id, stopped="cancelled")
        return found

    def admit(self, chain: Chain, *, source: str | None, target: str, depth: int) -> Verdict:
        """Decide one dispatch. ``source`` is the VP that caused it (None: a person).

        An accepted dispatch is counted; a refused one stops the chain.
        """
        s = self.settings
        if chain.stopped:
            return Verdict(False, chain.stopped)
        verdict = Verdict(True)
        if source is not None:
            pair = (min(source, target), max(source, target))
            hits = self._recent_hits(target)
            if depth > s.max_chain_depth:
                verdict = Verdict(
                    False, "chain_depth_exceeded", {"depth": depth, "limit": s.max_chain_depth}
                )
            elif len(hits) >= s.throttle_hits:
                verdict = Verdict(
                    False,
                    "throttled",
                    {
                        "target": target,
                        "hits": len(hits),
                        "limit": s.throttle_hits,
                        "window_s": s.throttle_window_s,
                    },
                )
            elif chain.pairs[pair] >= s.max_pair_exchanges:
                verdict = Verdict(
                    False, "ping_pong", {"pair": list(pair), "limit": s.max_pair_exchanges}
                )
        if verdict.ok and chain.turns >= s.max_turns_per_message:
            verdict = Verdict(False, "turn_budget", {"limit": s.max_turns_per_message})
        if not verdict.ok:
            chain.stopped = verdict.rule
            return verdict
        chain.turns += 1
        if source is not None:
            chain.pairs[(min(source, target), max(source, target))] += 1
            self._recent_hits(target).append(self._clock())
        return verdict

    def stop_all(self, rule: str = "cancelled") -> None:
        for chain in self._chains.values():
            chain.stopped = chain.stopped or rule

    def _recent_hits(self, target: str) -> deque[float]:
        now = self._clock()
        window = self.settings.throttle_window_s
        hits = self._hits.get(target)
        if hits is None:
            hits = self._hits[target] = deque()
        self._hits.move_to_end(target)
        while hits and now - hits[0] >= window:
            hits.popleft()
        # Forget targets idle for two windows, and cap the map's size.
        for key in [k for k, v in self._hits.items() if v and now - v[-1] >= 2 * window]:
            if key != target:
                del self._hits[key]
        while len(self._hits) > MAX_THROTTLE_KEYS:
            self._hits.popitem(last=False)
        return hits
