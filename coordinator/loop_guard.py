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

Each rule is a small :class:`GuardRule` object: ``check`` may refuse a
dispatch, ``record`` counts one the guard admitted. Adding a rule is adding
one class to :func:`default_rules`. Only the refusal that stops a chain has
``stopped_chain`` set, so a caller that notices on that flag tells people
once per chain, however many follow-ups the stopped chain refuses later.
"""

from __future__ import annotations

import time
from collections import Counter, OrderedDict, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum

from store.base import GroupSettings

MAX_CHAINS = 512
MAX_THROTTLE_KEYS = 1000

Clock = Callable[[], float]


class LoopRule(StrEnum):
    """Why a dispatch was refused; the values are the wire codes clients see."""

    CHAIN_DEPTH = "chain_depth_exceeded"
    THROTTLED = "throttled"
    PING_PONG = "ping_pong"
    TURN_BUDGET = "turn_budget"
    CANCELLED = "cancelled"


RULE_TEXT = {
    LoopRule.CHAIN_DEPTH: "loop guard: the chain of VP hand-offs is too deep",
    LoopRule.THROTTLED: "loop guard: too many hand-offs to the same VP in a short time",
    LoopRule.PING_PONG: "loop guard: two VPs kept answering each other",
    LoopRule.TURN_BUDGET: "loop guard: this message has used its budget of VP turns",
    LoopRule.CANCELLED: "the conversation was cancelled",
}


@dataclass(slots=True)
class Chain:
    """What one user message has caused so far; ``stopped`` names the rule that ended it."""

    root: str
    turns: int = 0
    pairs: Counter[tuple[str, str]] = field(default_factory=Counter)
    stopped: LoopRule | None = None
    # A spent budget stopped some of its turns, and the group was told (once).
    quota_noticed: bool = False


@dataclass(frozen=True, slots=True)
class Dispatch:
    """One proposed dispatch: ``source`` caused a turn of ``target`` (None: a person)."""

    chain: Chain
    source: str | None
    target: str
    depth: int

    @property
    def pair(self) -> tuple[str, str] | None:
        """The two VPs in sorted order, or None when a person caused it."""
        if self.source is None:
            return None
        return (min(self.source, self.target), max(self.source, self.target))

    def refuse(self, rule: LoopRule, **detail: object) -> Verdict:
        """A refusal of this dispatch by ``rule``, for a rule's ``check`` to return."""
        return Verdict(False, rule, detail, source=self.source, target=self.target)


@dataclass(frozen=True, slots=True)
class Verdict:
    """The guard's answer to one dispatch.

    A refusal names its ``rule`` and the numbers behind it in ``detail``
    (always a ``limit`` for the four rules), plus the dispatch's ``source``
    and ``target``. ``stopped_chain`` is True only on the refusal that
    stopped its chain; later refusals in that chain repeat the rule with it
    False, and so does every refusal in a cancelled chain.
    """

    ok: bool
    rule: LoopRule | None = None
    detail: dict[str, object] = field(default_factory=dict)
    source: str | None = None
    target: str | None = None
    stopped_chain: bool = False

    @property
    def message(self) -> str:
        """The rule in words, without the particulars ("" when admitted)."""
        return RULE_TEXT.get(self.rule, str(self.rule)) if self.rule else ""

    @property
    def summary(self) -> str:
        """The notice for a refusal, naming the rule, the pair and the limit."""
        particulars = [f"@{self.source} to @{self.target}" if self.source else f"to @{self.target}"]
        if "limit" in self.detail:
            particulars.append(f"limit {self.detail['limit']}")
        return f"{self.message} ({', '.join(particulars)}); the chain was stopped."


class GuardRule:
    """One loop-guard rule. Subclasses set ``rule`` and override ``check``.

    ``check`` must not count anything, since a later rule may still refuse
    the dispatch (forgetting expired state is fine); ``record`` runs once for
    every dispatch the guard admits, in rule order.
    """

    rule: LoopRule

    def check(self, d: Dispatch, settings: GroupSettings) -> Verdict | None:
        """A refusal of ``d``, or None to let it through."""
        raise NotImplementedError

    def record(self, d: Dispatch, settings: GroupSettings) -> None:
        """Count an admitted dispatch (most rules count nothing)."""


class ChainDepth(GuardRule):
    """VP-caused hops may be at most ``max_chain_depth`` deep."""

    rule = LoopRule.CHAIN_DEPTH

    def check(self, d: Dispatch, settings: GroupSettings) -> Verdict | None:
        if d.source is None or d.depth <= settings.max_chain_depth:
            return None
        return d.refuse(self.rule, depth=d.depth, limit=settings.max_chain_depth)


class Throttle(GuardRule):
    """At most ``throttle_hits`` VP-caused dispatches to one target per window, any chain."""

    rule = LoopRule.THROTTLED

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._hits: OrderedDict[str, deque[float]] = OrderedDict()

    def check(self, d: Dispatch, settings: GroupSettings) -> Verdict | None:
        if d.source is None:
            return None
        hits = self._recent(d.target, settings.throttle_window_s)
        if len(hits) < settings.throttle_hits:
            return None
        return d.refuse(
            self.rule,
            target=d.target,
            hits=len(hits),
            limit=settings.throttle_hits,
            window_s=settings.throttle_window_s,
        )

    def record(self, d: Dispatch, settings: GroupSettings) -> None:
        if d.source is not None:
            self._recent(d.target, settings.throttle_window_s).append(self._clock())

    def _recent(self, target: str, window: float) -> deque[float]:
        """``target``'s hits inside the window, oldest first; also prunes the map."""
        now = self._clock()
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


class PingPong(GuardRule):
    """At most ``max_pair_exchanges`` hops between the same two VPs in a chain."""

    rule = LoopRule.PING_PONG

    def check(self, d: Dispatch, settings: GroupSettings) -> Verdict | None:
        pair = d.pair
        if pair is None or d.chain.pairs[pair] < settings.max_pair_exchanges:
            return None
        return d.refuse(self.rule, pair=list(pair), limit=settings.max_pair_exchanges)

    def record(self, d: Dispatch, settings: GroupSettings) -> None:
        if d.pair is not None:
            d.chain.pairs[d.pair] += 1


class TurnBudget(GuardRule):
    """At most ``max_turns_per_message`` turns in a chain, whoever caused them."""

    rule = LoopRule.TURN_BUDGET

    def check(self, d: Dispatch, settings: GroupSettings) -> Verdict | None:
        if d.chain.turns < settings.max_turns_per_message:
            return None
        return d.refuse(self.rule, limit=settings.max_turns_per_message)

    def record(self, d: Dispatch, settings: GroupSettings) -> None:
        d.chain.turns += 1


def default_rules(clock: Clock) -> list[GuardRule]:
    """The four rules of DESIGN.md, in the order they are asked."""
    return [ChainDepth(), Throttle(clock), PingPong(), TurnBudget()]


class LoopGuard:
    """Admits or refuses every dispatch in one group, and remembers its chains.

    Invariants: a chain, once stopped, refuses everything after it; a
    dispatch is admitted only when every rule lets it through, and only then
    is it recorded by every rule; exactly one refusal per chain (the first,
    unless the chain was cancelled) has ``stopped_chain`` set. Every time
    reading goes through ``clock``. At most ``MAX_CHAINS`` chains are kept;
    an evicted one counts as cancelled. Not thread-safe: one coordinator
    event loop owns it.
    """

    def __init__(
        self,
        settings: GroupSettings,
        clock: Clock = time.monotonic,
        rules: Sequence[GuardRule] | None = None,
    ) -> None:
        # The coordinator replaces ``settings`` when the group's change; the
        # rules read them on every check, so new limits apply at once.
        self.settings = settings
        self.rules = list(rules) if rules is not None else default_rules(clock)
        self._chains: OrderedDict[str, Chain] = OrderedDict()

    def start_chain(self, root_id: str) -> Chain:
        """A fresh chain for a user message (replacing one with the same root)."""
        chain = Chain(root_id)
        self._chains[root_id] = chain
        while len(self._chains) > MAX_CHAINS:
            self._chains.popitem(last=False)
        return chain

    def resume_chain(self, root_id: str) -> Chain:
        """The chain for ``root_id``, made afresh when unknown.

        A restarted coordinator knows no chain; the turns it recovers carry
        theirs on, counted from here.
        """
        found = self._chains.get(root_id)
        return found if found is not None else self.start_chain(root_id)

    def known(self, root_id: str) -> bool:
        """Whether the guard holds the chain ``root_id`` (a restarted one holds none)."""
        return root_id in self._chains

    def adopt(self, chain: Chain) -> Chain:
        """Hold ``chain`` (rebuilt from the store) unless its root is held; returns the held one."""
        found = self._chains.get(chain.root)
        if found is not None:
            return found
        self._chains[chain.root] = chain
        while len(self._chains) > MAX_CHAINS:
            self._chains.popitem(last=False)
        return chain

    def chain(self, root_id: str) -> Chain:
        """The chain for ``root_id``; an evicted or unknown one counts as stopped."""
        found = self._chains.get(root_id)
        if found is None:
            found = Chain(root_id, stopped=LoopRule.CANCELLED)
        return found

    def admit(self, chain: Chain, *, source: str | None, target: str, depth: int) -> Verdict:
        """Decide one dispatch. ``source`` is the VP that caused it (None: a person).

        An accepted dispatch is counted; a refused one stops the chain.
        """
        d = Dispatch(chain, source, target, depth)
        if chain.stopped:
            return Verdict(False, chain.stopped, source=source, target=target)
        for rule in self.rules:
            verdict = rule.check(d, self.settings)
            if verdict is not None:
                chain.stopped = verdict.rule or rule.rule
                return replace(verdict, ok=False, rule=chain.stopped, stopped_chain=True)
        for rule in self.rules:
            rule.record(d, self.settings)
        return Verdict(True, source=source, target=target)

    def reopen(self, chain: Chain) -> None:
        """Lift a cancel from ``chain``: a person asks it to go on (Regenerate after Stop all).

        Stop all ends what is running, not what a person asks for next; a
        chain a loop rule stopped stays stopped, and its counts hold.
        """
        if chain.stopped is LoopRule.CANCELLED:
            chain.stopped = None

    def stop_all(self, rule: LoopRule | str = LoopRule.CANCELLED) -> None:
        """Stop every chain not stopped yet (a cancel); their refusals are not reported.

        Raises ValueError for a ``rule`` that is not a :class:`LoopRule` value.
        """
        stopped = LoopRule(rule)
        for chain in self._chains.values():
            chain.stopped = chain.stopped or stopped
