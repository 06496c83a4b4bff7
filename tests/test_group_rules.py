"""Mention parsing, dispatch selection and the loop guard, without Ray."""

from __future__ import annotations

from coordinator.loop_guard import LoopGuard
from coordinator.mentions import extract_mentions, select_targets
from store.base import GroupSettings

ROSTER = ["steve", "linus", "martin"]
ALIASES = {"jobs": "steve", "torvalds": "linus", "vp-linus": "linus"}


def resolve(name: str) -> str | None:
    return ALIASES.get(name.lower(), name.lower())


def select(text: str, **kw: object):  # type: ignore[no-untyped-def]
    args = {"sender": None, "resolve": resolve, "cap": 16, **kw}
    return select_targets(extract_mentions(text), ROSTER, **args)  # type: ignore[arg-type]


def test_extract_only_at_start_or_after_whitespace() -> None:
    assert extract_mentions("@linus hi @Steve, mail a@b.com @linus") == ["linus", "Steve"]
    assert extract_mentions("x@linus (@steve)") == []
    assert extract_mentions("@-bad @_ok") == ["_ok"]


def test_mention_selects_and_is_case_insensitive_with_aliases() -> None:
    sel = select("@LINUS and @jobs please")
    assert (sel.targets, sel.trigger, sel.unknown) == (["linus", "steve"], "mention", [])


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


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_chain_depth_allows_eight_and_refuses_the_ninth() -> None:
    guard = LoopGuard(GroupSettings(max_pair_exchanges=16, throttle_hits=32))
    chain = guard.start_chain("m1")
    vps = ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j"]
    for depth in range(1, 9):
        assert guard.admit(chain, source=vps[depth - 1], target=vps[depth], depth=depth).ok
    verdict = guard.admit(chain, source="i", target="j", depth=9)
    assert not verdict.ok and verdict.rule == "chain_depth_exceeded"
    # The chain stays stopped; a new user message starts a fresh one.
    assert guard.admit(chain, source=None, target="a", depth=0).rule == "chain_depth_exceeded"
    assert guard.admit(guard.start_chain("m2"), source=None, target="a", depth=0).ok


def test_throttle_trips_at_eight_per_window_and_recovers() -> None:
    clock = Clock()
    guard = LoopGuard(GroupSettings(max_pair_exchanges=16), clock)
    for i in range(8):
        chain = guard.start_chain(f"m{i}")
        assert guard.admit(chain, source="a", target="b", depth=1).ok
        clock.t += 0.1
    verdict = guard.admit(guard.start_chain("m9"), source="a", target="b", depth=1)
    assert verdict.rule == "throttled" and verdict.detail["hits"] == 8
    clock.t += 5.0
    assert guard.admit(guard.start_chain("m10"), source="a", target="b", depth=1).ok
    # People are never throttled by the loop guard.
    for i in range(20):
        assert guard.admit(guard.start_chain(f"u{i}"), source=None, target="b", depth=0).ok


def test_ping_pong_limit_per_pair() -> None:
    guard = LoopGuard(GroupSettings(throttle_hits=32))
    chain = guard.start_chain("m")
    for i in range(4):
        src, dst = ("a", "b") if i % 2 == 0 else ("b", "a")
        assert guard.admit(chain, source=src, target=dst, depth=i + 1).ok
    assert guard.admit(chain, source="b", target="a", depth=5).rule == "ping_pong"


def test_turn_budget_counts_every_turn_of_the_message() -> None:
    guard = LoopGuard(GroupSettings(max_turns_per_message=3))
    chain = guard.start_chain("m")
    assert all(guard.admit(chain, source=None, target=t, depth=0).ok for t in "abc")
    assert guard.admit(chain, source=None, target="d", depth=0).rule == "turn_budget"


def test_stop_all_and_unknown_chains_refuse() -> None:
    guard = LoopGuard(GroupSettings())
    chain = guard.start_chain("m")
    guard.stop_all()
    assert guard.admit(chain, source="a", target="b", depth=1).rule == "cancelled"
    assert guard.chain("never-seen").stopped == "cancelled"
