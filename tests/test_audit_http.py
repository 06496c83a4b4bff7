"""The administrators' audit routes: filters, paging by cursor, the JSON-lines export, refusals.

The log is filled with entries of known times through the store (the
recording itself is ``tests/test_audit_recording.py``'s), then read back
over HTTP from a real gateway. Both store backends.
"""

from __future__ import annotations

import json
from typing import Any

import httpx

from store.audit import AuditAction, AuditEntry
from tests.fixtures.gateway import Gateway, StartGateway

ROUTE = "/api/admin/audit"
EXPORT = "/api/admin/audit.jsonl"


async def filled(start_gateway: StartGateway) -> tuple[Gateway, list[str]]:
    """A gateway whose log holds 25 entries at t=1000..1024 after the admin's own sign-in."""
    gw = await start_gateway()
    await gw.user("admin")
    await gw.user("bob")
    store = await gw.store()
    ids = []
    for i in range(25):
        entry = AuditEntry(
            at=1000.0 + i,
            actor="ann" if i % 2 else "cat",
            action=AuditAction.MEMBER_ADDED if i % 5 else AuditAction.GROUP_SETTINGS_CHANGED,
            target="grp_a" if i < 10 else "grp_b",
            address="10.1.1.1",
            detail={"n": i},
        )
        ids.append(await store.append_audit(entry))
    return gw, ids


async def get(gw: Gateway, path: str = ROUTE, **params: Any) -> httpx.Response:
    return await gw.http.get(path, params=params, headers=gw.auth("admin"))


def numbers(body: dict[str, Any]) -> list[int]:
    return [e["detail"]["n"] for e in body["entries"]]


async def test_filters_and_paging_newest_first(start_gateway: StartGateway) -> None:
    gw, ids = await filled(start_gateway)
    everything = await get(gw)
    assert everything.status_code == 200, everything.text
    body = everything.json()
    assert body["next"] is None
    # In the order they were appended, whatever their times: the sign-ins of
    # admin and bob came first.
    assert [e["action"] for e in body["entries"][-2:]] == ["sign_in", "sign_in"]
    assert numbers({"entries": body["entries"][:-2]}) == list(range(24, -1, -1))
    first = body["entries"][-3]
    assert first == {
        "id": ids[0],
        "at": 1000.0,
        "actor": "cat",
        "action": "group_settings_changed",
        "target": "grp_a",
        "address": "10.1.1.1",
        "detail": {"n": 0},
    }

    by_ann = (await get(gw, actor="ann", target="grp_b")).json()
    assert numbers(by_ann) == [23, 21, 19, 17, 15, 13, 11]
    kind = (await get(gw, action="group_settings_changed", until=1019.5)).json()
    assert numbers(kind) == [15, 10, 5, 0]
    window = (await get(gw, since=1003, until=1006)).json()
    assert numbers(window) == [6, 5, 4, 3]

    # Pages of 4 of grp_a's 10 entries: 4, 4, then 2 and no next.
    seen: list[int] = []
    cursor: str | None = None
    pages = 0
    while True:
        params: dict[str, Any] = {"target": "grp_a", "limit": 4}
        if cursor is not None:
            params["before"] = cursor
        page = (await get(gw, **params)).json()
        seen += numbers(page)
        pages += 1
        cursor = page["next"]
        if cursor is None:
            break
        assert cursor == page["entries"][-1]["id"]
    assert seen == list(range(9, -1, -1)) and pages == 3


async def test_the_export_is_json_lines_with_the_same_filters(start_gateway: StartGateway) -> None:
    gw, _ = await filled(start_gateway)
    export = await get(gw, EXPORT, target="grp_b")
    assert export.status_code == 200, export.text
    assert export.headers["content-type"].startswith("application/x-ndjson")
    assert export.headers["content-disposition"] == 'attachment; filename="yeaft-audit.jsonl"'
    lines = export.text.splitlines()
    rows = [json.loads(line) for line in lines]
    assert [r["detail"]["n"] for r in rows] == list(range(24, 9, -1))
    assert set(rows[0]) == {"id", "at", "actor", "action", "target", "address", "detail"}
    assert export.text.endswith("\n")
    # The same entries as the pages give, and a limit on how many.
    limited = await get(gw, EXPORT, target="grp_b", limit=3, before=rows[0]["id"])
    assert [json.loads(line)["detail"]["n"] for line in limited.text.splitlines()] == [23, 22, 21]
    assert (await get(gw, EXPORT, actor="nobody")).text == ""


async def test_the_export_goes_past_one_store_page(start_gateway: StartGateway) -> None:
    gw = await start_gateway()
    await gw.user("admin")
    store = await gw.store()
    for i in range(1205):
        await store.append_audit(
            AuditEntry(at=5000.0 + i, actor="x", action=AuditAction.SIGN_IN, detail={"n": i})
        )
    export = await get(gw, EXPORT, actor="x")
    rows = [json.loads(line) for line in export.text.splitlines()]
    assert [r["detail"]["n"] for r in rows] == list(range(1204, -1, -1))
    assert len({r["id"] for r in rows}) == 1205


async def test_bad_filters_are_typed_422s(start_gateway: StartGateway) -> None:
    gw, _ = await filled(start_gateway)
    for path in (ROUTE, EXPORT):
        for params, field in (
            ({"before": "not-an-id"}, "before"),
            ({"action": "coffee_made"}, "action"),
            ({"since": "yesterday"}, "since"),
            ({"limit": 0}, "limit"),
        ):
            reply = await get(gw, path, **params)
            assert reply.status_code == 422, (path, params, reply.text)
            error = reply.json()["error"]
            assert error["code"] == "invalid_request" and error["field"] == field
    assert (await get(gw, limit=1001)).status_code == 422


async def test_a_member_gets_403_and_a_stranger_401(start_gateway: StartGateway) -> None:
    gw, _ = await filled(start_gateway)
    for path in (ROUTE, EXPORT):
        member = await gw.http.get(path, headers=gw.auth("bob"))
        assert member.status_code == 403, member.text
        error = member.json()["error"]
        assert error["code"] == "forbidden" and "read the audit log" in error["message"]
        async with httpx.AsyncClient(base_url=gw.base_url) as stranger:
            refused = await stranger.get(path)
        assert refused.status_code == 401
        assert refused.json()["error"]["code"] == "unauthorized"
        assert "grp_a" not in member.text + refused.text
