"""Sign-in sessions in the store (``store.sessions``), on both backends, with a moved clock.

Two store instances on one store stand for two gateway processes: a session
one records or ends, the other sees.
"""

from __future__ import annotations

from store.sessions import SessionRecord, SignIn
from tests.fixtures.stores import StoreFactory

NOW = 1_000_000.0


def session(
    sid: str, user: str = "ann", *, created: float = NOW, ttl: float = 3600
) -> SessionRecord:
    return SessionRecord(
        id=sid,
        username=user,
        created=created,
        expires=created + ttl,
        last_seen=created,
        how=SignIn.PASSWORD,
        user_agent="pytest",
        address="10.0.0.1",
    )


async def test_sessions_are_recorded_listed_touched_and_ended_across_processes(
    store_factory: StoreFactory,
) -> None:
    one, two = store_factory(), store_factory()
    await one.record_session(session("s1"))
    await one.record_session(session("s2", created=NOW + 10))
    await two.record_session(session("s3", user="bob"))
    mine = await two.user_sessions("ann", NOW + 20)
    assert [s.id for s in mine] == ["s2", "s1"]  # newest first
    assert mine[1] == session("s1")
    got = await two.get_session("s1")
    assert got is not None and got.how is SignIn.PASSWORD and got.address == "10.0.0.1"

    # A touch moves last_seen and (for a renewed token) the expiry, never back.
    await two.touch_session("s1", NOW + 100, NOW + 9000)
    await two.touch_session("s1", NOW + 50)
    got = await one.get_session("s1")
    assert got is not None and got.last_seen == NOW + 100 and got.expires == NOW + 9000

    # Another user's id is never ended; the kept one stays.
    assert await one.end_sessions("ann", ["s3", "s2"], NOW + 30) == ["s2"]
    assert [s.id for s in await two.user_sessions("ann", NOW + 30)] == ["s1"]
    ended = await two.get_session("s2")
    assert ended is not None and ended.ended == NOW + 30 and not ended.live(NOW + 30)
    # A touch does not bring an ended session back.
    await two.touch_session("s2", NOW + 40, NOW + 9000)
    again = await one.get_session("s2")
    assert again is not None and again.ended == NOW + 30 and again.expires == NOW + 3610
    assert await one.end_sessions("ann", ["s2"], NOW + 50) == []

    await one.record_session(session("s4", created=NOW + 60))
    assert await two.end_sessions("ann", None, NOW + 70, keep="s4") == ["s1"]
    assert [s.id for s in await one.user_sessions("ann", NOW + 70)] == ["s4"]
    assert [s.id for s in await one.user_sessions("bob", NOW + 70)] == ["s3"]


async def test_expired_sessions_are_dropped(store_factory: StoreFactory) -> None:
    store = store_factory()
    await store.record_session(session("old", ttl=60))
    await store.record_session(session("new", ttl=3600))
    assert [s.id for s in await store.user_sessions("ann", NOW + 120)] == ["new"]
    assert await store.prune_sessions(NOW + 120) == 1
    assert await store.get_session("old") is None
    assert await store.get_session("new") is not None
    # Recording a session drops the expired ones as well.
    await store.record_session(session("later", created=NOW + 4000))
    assert await store.get_session("new") is None
