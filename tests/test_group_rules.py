"""Mention parsing, dispatch selection and the loop guard, without Ray."""

from __future__ import annotations

import pytest

from coordinator.loop_guard import (
    Dispatch,
    GuardRule,
    LoopGuard,
    LoopRule,
    Verdict,
    default_rules,
)
from personas.mentions import extract_mentions
from personas.routing import Selection, Source, Trigger, select_targets
from store.base import GroupSettings

ROSTER = ["steve", "linus", "martin"]
ALIASES = {"jobs": "steve", "torvalds": "linus", "vp-linus": "linus"}


def resolve(name: str) -> str | None:
    return ALIASES.get(name.lower(), name.lower())


def select(text: str, source: Source = Source.PERSON, **kw: object) -> Selection:
    args: dict[str, object] = {"sender": None, "resolve": resolve, "cap": 16, **kw}
    return select_targets(extract_mentions(text), ROSTER, source=source, **args)  # type: ignore[arg-type]


def forward(to: str, sender: str = "steve", **kw: object) -> Selection:
    args: dict[str, object] = {"resolve": resolve, "cap": 16, **kw}
    return select_targets([to], ROSTER, source=Source.FORWARD, sender=sender, **args)  # type: ignore[arg-type]


# --- mentions -----------------------------------------------------------------


def test_extract_only_at_start_or_after_whitespace() -> None:
    assert extract_mentions("@linus hi @Steve, mail a@b.com @linus") == ["linus", "Steve"]
    assert extract_mentions("x@linus (@steve)") == []
    assert extract_mentions("@-bad @_ok") == ["_ok"]


# --- a person's message ---------------------------------------------------------


def test_mention_selects_and_is_case_insensitive_with_aliases() -> None:
    sel = select("@LINUS and @jobs please")
    assert (sel.targets, sel.trigger, sel.unknown) == (["linus", "steve"], "mention", [])
    assert sel.trigger is Trigger.MENTION


def test_unknown_names_are_reported_and_all_unknown_dispatches_nothing() -> None:
    sel = select("@linus @bob")
    assert sel.targets == ["linus"] and sel.unknown == ["bob"]
    sel = select("@bob @carol")
    assert sel.targets == [] and sel.unknown == ["bob", "carol"] and sel.trigger == "none"


def test_all_is_everyone_but_the_sender_and_capped() -> None:
    assert select("@all go", sender="linus").targets == ["steve", "martin"]
    sel = select("@all", cap=2)
    assert sel.targets == ["steve", "linus"] and sel.truncated


def test_no_mention_is_everyone_or_the_default_vp() -> None:
    assert select("hello").targets == ROSTER
    sel = select("hello", broadcast_when_unmentioned=False, default_vp="martin")
    assert (sel.targets, sel.trigger) == (["martin"], "default")
    sel = select("hello", broadcast_when_unmentioned=False, default_vp=None)
    assert sel.targets == ["steve"]
    sel = select("hello", broadcast_when_unmentioned=False, default_vp="gone")
    assert (sel.targets, sel.trigger) == (["steve"], Trigger.DEFAULT)


def test_broadcast_keeps_the_unknown_names() -> None:
    sel = select("@all @bob")
    assert (sel.targets, sel.trigger, sel.unknown) == (ROSTER, Trigger.BROADCAST, ["bob"])


# --- a VP's reply -----------------------------------------------------------------


def test_reply_without_mention_goes_nowhere() -> None:
    assert select("done, thanks", Source.VP_REPLY, sender="steve") == Selection()
    # Even when the group would broadcast a person's unmentioned message.
    sel = select("ok", Source.VP_REPLY, sender="steve", broadcast_when_unmentioned=False)
    assert sel.targets == [] and sel.trigger is Trigger.NONE


def test_reply_mentions_resolve_like_a_persons_and_never_the_sender() -> None:
    sel = select("@Torvalds look, cc @steve @bob", Source.VP_REPLY, sender="steve")
    assert (sel.targets, sel.trigger, sel.unknown) == (["linus"], Trigger.MENTION, ["bob"])
    assert sel.named_self
    sel = select("note to @jobs", Source.VP_REPLY, sender="steve")
    assert (sel.targets, sel.trigger, sel.named_self) == ([], Trigger.NONE, True)


def test_all_in_a_reply_is_everyone_but_the_sender_like_a_forward_to_all() -> None:
    reply = select("@all thoughts?", Source.VP_REPLY, sender="linus")
    assert (reply.targets, reply.trigger) == (["steve", "martin"], Trigger.BROADCAST)
    assert forward("all", sender="linus") == reply
    assert forward("ALL", sender="linus").targets == ["steve", "martin"]


def test_cap_applies_to_replies_and_forwards() -> None:
    reply = select("@all @linus", Source.VP_REPLY, sender="steve", cap=1)
    assert (reply.targets, reply.truncated) == (["linus"], True)
    sel = select("@martin @linus", Source.VP_REPLY, sender="steve", cap=1)
    assert (sel.targets, sel.truncated) == (["martin"], True)
    fwd = forward("all", cap=1)
    assert (fwd.targets, fwd.truncated) == (["linus"], True)


def test_a_vp_source_needs_a_sender() -> None:
    with pytest.raises(ValueError, match="sending VP"):
        select("@linus", Source.VP_REPLY)
    with pytest.raises(ValueError, match="sending VP"):
        select_targets(["linus"], ROSTER, source=Source.FORWARD, resolve=resolve, cap=16)


# --- route_forward ------------------------------------------------------------------


def test_forward_to_one_name_or_alias() -> None:
    sel = forward("Torvalds")
    assert (sel.targets, sel.trigger, sel.unknown, sel.named_self) == (
        ["linus"],
        Trigger.MENTION,
        [],
        False,
    )


def test_forward_reports_unknown_and_self_for_the_caller_to_refuse() -> None:
    sel = forward("bob")
    assert (sel.targets, sel.unknown, sel.named_self) == ([], ["bob"], False)
    # A known persona outside the roster is just as unknown here.
    assert select_targets(
        ["kent"], ROSTER, source=Source.FORWARD, sender="steve", resolve=resolve, cap=16
    ).unknown == ["kent"]
    sel = forward("jobs", sender="steve")
    assert (sel.targets, sel.unknown, sel.named_self) == ([], [], True)


def test_forward_to_all_alone_in_the_roster_goes_nowhere() -> None:
    sel = select_targets(
        ["all"], ["steve"], source=Source.FORWARD, sender="steve", resolve=resolve, cap=16
    )
    assert sel == Selection()


# --- the loop guard -------------------------------------------------------------------


class Clock:
    """A clock the test moves by hand: no test in this file sleeps."""

    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def guard_for(clock: Clock | None = None, **settings: object) -> LoopGuard:
    return LoopGuard(GroupSettings.model_validate(settings), clock or Clock())


def test_chain_depth_allows_eight_and_refuses_the_ninth() -> None:
    guard = guard_for(max_pair_exchanges=16, throttle_hits=32)
    chain = guard.start_chain("m1")
    vps = ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j"]
    for depth in range(1, 9):
        assert guard.admit(chain, source=vps[depth - 1], target=vps[depth], depth=depth).ok
    verdict = guard.admit(chain, source="i", target="j", depth=9)
    assert not verdict.ok and verdict.rule == "chain_depth_exceeded"
    assert verdict.detail == {"depth": 9, "limit": 8}
    # The chain stays stopped; a new user message starts a fresh one.
    assert guard.admit(chain, source=None, target="a", depth=0).rule == "chain_depth_exceeded"
    assert guard.admit(guard.start_chain("m2"), source=None, target="a", depth=0).ok


def test_throttle_trips_at_eight_per_window_and_recovers() -> None:
    clock = Clock()
    guard = guard_for(clock, max_pair_exchanges=16)
    for i in range(8):
        chain = guard.start_chain(f"m{i}")
        assert guard.admit(chain, source="a", target="b", depth=1).ok
        clock.t += 0.1
    verdict = guard.admit(guard.start_chain("m9"), source="a", target="b", depth=1)
    assert verdict.rule == "throttled" and verdict.detail["hits"] == 8
    assert verdict.detail == {"target": "b", "hits": 8, "limit": 8, "window_s": 5.0}
    # The first hit was at t+0.0: the window is [now - 5 s, now), so at t+4.9
    # all eight are still inside it, and at t+5.0 the first has left.
    clock.t = 1000.0 + 4.9
    assert guard.admit(guard.start_chain("m9b"), source="a", target="b", depth=1).rule == (
        "throttled"
    )
    clock.t = 1000.0 + 5.0
    assert guard.admit(guard.start_chain("m10"), source="a", target="b", depth=1).ok
    # People are never throttled by the loop guard.
    for i in range(20):
        assert guard.admit(guard.start_chain(f"u{i}"), source=None, target="b", depth=0).ok


def test_throttle_is_per_target() -> None:
    guard = guard_for(throttle_hits=2, max_pair_exchanges=16)
    for target in ("b", "c"):
        for i in range(2):
            assert guard.admit(
                guard.start_chain(f"{target}{i}"), source="a", target=target, depth=1
            ).ok
    assert guard.admit(guard.start_chain("x"), source="a", target="b", depth=1).rule == "throttled"
    assert guard.admit(guard.start_chain("y"), source="b", target="d", depth=1).ok


def test_ping_pong_limit_per_pair() -> None:
    guard = guard_for(throttle_hits=32)
    chain = guard.start_chain("m")
    for i in range(4):
        src, dst = ("a", "b") if i % 2 == 0 else ("b", "a")
        assert guard.admit(chain, source=src, target=dst, depth=i + 1).ok
    verdict = guard.admit(chain, source="b", target="a", depth=5)
    assert verdict.rule == "ping_pong"
    assert verdict.detail == {"pair": ["a", "b"], "limit": 4}


def test_turn_budget_counts_every_turn_of_the_message() -> None:
    guard = guard_for(max_turns_per_message=3)
    chain = guard.start_chain("m")
    assert all(guard.admit(chain, source=None, target=t, depth=0).ok for t in "abc")
    assert guard.admit(chain, source=None, target="d", depth=0).rule == "turn_budget"


def test_turn_budget_is_asked_after_the_vp_rules() -> None:
    guard = guard_for(max_turns_per_message=1, max_chain_depth=1)
    chain = guard.start_chain("m")
    assert guard.admit(chain, source=None, target="a", depth=0).ok
    assert guard.admit(chain, source="a", target="b", depth=2).rule == "chain_depth_exceeded"


def test_refused_dispatches_are_not_counted() -> None:
    guard = guard_for(max_pair_exchanges=1, throttle_hits=1)
    chain = guard.start_chain("m")
    assert guard.admit(chain, source="a", target="b", depth=1).ok
    assert guard.admit(chain, source="b", target="a", depth=2).rule == "ping_pong"
    assert chain.turns == 1 and chain.pairs[("a", "b")] == 1
    # "a" was never reached, so it has no throttle hit yet.
    assert guard.admit(guard.start_chain("n"), source="c", target="a", depth=1).ok


def test_stop_all_and_unknown_chains_refuse() -> None:
    guard = guard_for()
    chain = guard.start_chain("m")
    guard.stop_all()
    assert guard.admit(chain, source="a", target="b", depth=1).rule == "cancelled"
    assert guard.chain("never-seen").stopped == "cancelled"
    with pytest.raises(ValueError):
        guard.stop_all("bogus")


def test_a_stopped_chain_is_reported_once() -> None:
    guard = guard_for(throttle_hits=32)
    chain = guard.start_chain("m")
    for i in range(4):
        src, dst = ("a", "b") if i % 2 == 0 else ("b", "a")
        assert guard.admit(chain, source=src, target=dst, depth=i + 1).ok
    refusals = [
        guard.admit(chain, source=src, target=dst, depth=5)
        for src, dst in [("b", "a"), ("a", "b"), ("b", "c"), ("a", "c")]
    ]
    assert [v.rule for v in refusals] == [LoopRule.PING_PONG] * 4
    assert [v.stopped_chain for v in refusals] == [True, False, False, False]
    first = refusals[0]
    assert (first.source, first.target) == ("b", "a")
    assert first.summary == (
        "loop guard: two VPs kept answering each other (@b to @a, limit 4); the chain was stopped."
    )
    # Another chain trips on its own, and is reported on its own.
    other = guard.start_chain("n")
    assert guard.admit(other, source="a", target="b", depth=9).stopped_chain


def test_cancelled_chains_are_not_reported_by_the_guard() -> None:
    guard = guard_for()
    chain = guard.start_chain("m")
    guard.stop_all()
    verdict = guard.admit(chain, source="a", target="b", depth=1)
    assert verdict.rule is LoopRule.CANCELLED and not verdict.stopped_chain
    assert not guard.admit(guard.chain("evicted"), source="a", target="b", depth=1).stopped_chain


def test_every_rule_has_a_name_and_a_text() -> None:
    assert {str(r) for r in LoopRule} == {
        "chain_depth_exceeded",
        "throttled",
        "ping_pong",
        "turn_budget",
        "cancelled",
    }
    assert {r.rule for r in default_rules(Clock())} == set(LoopRule) - {LoopRule.CANCELLED}
    for rule in LoopRule:
        assert Verdict(False, rule).message and Verdict(False, rule).message != rule
    assert Verdict(True).message == ""


class NoSelfTalk(GuardRule):
    """A rule written in a test: one class is all a new rule needs."""

    rule = LoopRule.PING_PONG

    def __init__(self) -> None:
        self.recorded: list[str] = []

    def check(self, d: Dispatch, settings: GroupSettings) -> Verdict | None:
        return d.refuse(self.rule, limit=0) if d.source == d.target else None

    def record(self, d: Dispatch, settings: GroupSettings) -> None:
        self.recorded.append(d.target)


def test_a_new_rule_is_one_class() -> None:
    rule = NoSelfTalk()
    guard = LoopGuard(GroupSettings(), Clock(), rules=[*default_rules(Clock()), rule])
    assert guard.admit(guard.start_chain("m"), source="a", target="b", depth=1).ok
    verdict = guard.admit(guard.start_chain("n"), source="a", target="a", depth=1)
    assert (verdict.rule, verdict.stopped_chain, rule.recorded) == ("ping_pong", True, ["b"])


def test_new_settings_apply_at_once() -> None:
    guard = guard_for(max_turns_per_message=1)
    chain = guard.start_chain("m")
    assert guard.admit(chain, source=None, target="a", depth=0).ok
    guard.settings = GroupSettings(max_turns_per_message=2)
    assert guard.admit(chain, source=None, target="b", depth=0).ok
    assert guard.admit(chain, source=None, target="c", depth=0).rule == "turn_budget"
