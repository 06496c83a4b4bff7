"""The audit log's store part (``store.audit``) on both backends: append, filters, paging."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from store import Store
from store.audit import AuditAction, AuditEntry, AuditQuery, BadAuditCursor
from store.embedded import DB_FILENAME
from tests.fixtures.stores import StoreFactory


def entry(
    at: float,
    action: AuditAction = AuditAction.SIGN_IN,
    actor: str | None = "ann",
    target: str | None = "ann",
    **detail: object,
) -> AuditEntry:
    return AuditEntry(
        at=at, actor=actor, action=action, target=target, address="10.0.0.1", detail=detail
    )


async def fill(store: Store) -> list[str]:
    """Six entries, a second apart from t=1000, oldest first; their ids."""
    made = [
        entry(1000.0, AuditAction.SIGN_IN, "ann", "ann", method="password"),
        entry(1001.0, AuditAction.SIGN_IN_FAILED, None, "bob", reason="wrong_password"),
        entry(1002.0, AuditAction.MEMBER_ADDED, "ann", "grp_1", username="bob"),
        entry(1003.0, AuditAction.GROUP_SETTINGS_CHANGED, "ann", "grp_1", name="Ops"),
        entry(1004.0, AuditAction.SIGN_IN, "bob", "bob", method="password"),
        entry(1005.0, AuditAction.MEMBER_REMOVED, "ann", "grp_1", username="bob"),
    ]
    return [await store.append_audit(e) for e in made]


async def test_entries_come_back_newest_first_with_every_field(store: Store) -> None:
    ids = await fill(store)
    assert len(set(ids)) == 6
    page = await store.read_audit(AuditQuery())
    assert [e.id for e in page.entries] == ids[::-1]
    assert page.next is None
    failed = page.entries[4]
    assert failed.at == 1001.0 and failed.actor is None and failed.target == "bob"
    assert failed.action is AuditAction.SIGN_IN_FAILED
    assert failed.address == "10.0.0.1" and failed.detail == {"reason": "wrong_password"}


async def test_filters_apply_together(store: Store) -> None:
    ids = await fill(store)

    async def found(**filters: object) -> list[str]:
        return [e.id for e in (await store.read_audit(AuditQuery(**filters))).entries]  # type: ignore[arg-type]

    assert await found(actor="bob") == [ids[4]]
    assert await found(action=AuditAction.SIGN_IN) == [ids[4], ids[0]]
    assert await found(target="grp_1") == [ids[5], ids[3], ids[2]]
    assert await found(target="grp_1", action=AuditAction.MEMBER_ADDED) == [ids[2]]
    assert await found(since=1002.0, until=1004.0) == [ids[4], ids[3], ids[2]]
    assert await found(since=1004.5) == [ids[5]]
    assert await found(until=999.0) == []
    assert await found(actor="nobody") == []


async def test_pages_follow_the_cursor_to_the_end(store: Store) -> None:
    ids = await fill(store)
    seen: list[str] = []
    before: str | None = None
    pages = 0
    while True:
        page = await store.read_audit(AuditQuery(limit=4 if pages == 0 else 1, before=before))
        seen += [e.id for e in page.entries]
        pages += 1
        if page.next is None:
            break
        before = page.next
    assert seen == ids[::-1] and pages == 3
    # A cursor with a filter: only older entries that match.
    query = AuditQuery(target="grp_1", limit=1)
    first = await store.read_audit(query)
    assert [e.id for e in first.entries] == [ids[5]] and first.next == ids[5]
    rest = await store.read_audit(AuditQuery(target="grp_1", before=first.next))
    assert [e.id for e in rest.entries] == [ids[3], ids[2]] and rest.next is None


async def test_a_cursor_that_is_no_id_is_refused(store: Store) -> None:
    await fill(store)
    for bad in ("x", "1-2-3", "--", "12abc"):
        with pytest.raises(BadAuditCursor):
            await store.read_audit(AuditQuery(before=bad))


async def test_another_instance_reads_what_one_appended(store_factory: StoreFactory) -> None:
    one, two = store_factory(), store_factory()
    ids = await fill(one)
    await two.append_audit(entry(1006.0, AuditAction.LOCKOUT_LIFTED, "admin", "bob"))
    page = await one.read_audit(AuditQuery(limit=2))
    assert [e.action for e in page.entries] == [
        AuditAction.LOCKOUT_LIFTED,
        AuditAction.MEMBER_REMOVED,
    ]
    assert page.next == ids[5]


async def test_the_embedded_table_refuses_updates_and_deletes(tmp_path: Path) -> None:
    # The embedded backend's own guard (its table's triggers); Redis has no such table.
    store_factory = StoreFactory("embedded", tmp_path / "data", None, "unused")
    store = store_factory()
    await fill(store)
    conn = sqlite3.connect(store_factory.data_dir / DB_FILENAME)
    try:
        for sql in ("UPDATE audit_log SET actor = 'eve'", "DELETE FROM audit_log"):
            with pytest.raises(sqlite3.IntegrityError, match="append-only"):
                conn.execute(sql)
        assert conn.execute("SELECT count(*) FROM audit_log").fetchone()[0] == 6
    finally:
        conn.close()
        await store.close()


def test_an_entry_is_immutable_and_its_detail_json() -> None:
    made = entry(1.0, reason="x")
    with pytest.raises(ValueError):
        made.actor = "eve"  # type: ignore[misc]
    with pytest.raises(TypeError):
        entry(1.0, bad=object())


async def test_an_entry_from_a_clock_behind_keeps_its_place_and_time(store: Store) -> None:
    later = await store.append_audit(entry(2000.0))
    behind = await store.append_audit(entry(1500.0, AuditAction.SIGN_IN_FAILED))
    page = await store.read_audit(AuditQuery())
    assert [(e.id, e.at) for e in page.entries] == [(behind, 1500.0), (later, 2000.0)]
    since = await store.read_audit(AuditQuery(since=1400.0, until=1600.0))
    assert [e.id for e in since.entries] == [behind]
