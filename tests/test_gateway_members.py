"""Members, owner, settings and presence through the gateway, on real Ray and both stores.

Every frame of ``protocol.members`` over a real WebSocket (invite, remove,
transfer, leave, settings, presence), the same operations over HTTP, and two
gateway apps on one store standing for two gateway processes: what one does
reaches the other's clients through the store.
"""

from __future__ import annotations

import asyncio
import io
from typing import Any

from coordinator.commands import WaitIdle
from gateway.auth import issue_token
from gateway.chat_screen import Screen, render
from tests.fixtures.gateway import Gateway, StartGateway, WsClient


async def _group(gw: Gateway, owner: str, *members: str) -> str:
    made = await gw.http.post(
        "/api/groups", json={"name": "crew", "roster": ["steve", "linus"]}, headers=gw.auth(owner)
    )
    assert made.status_code == 201, made.text
    gid = str(made.json()["id"])
    assert made.json()["owner"] == owner
    for member in members:
        added = await gw.http.post(
            f"/api/groups/{gid}/members", json={"username": member}, headers=gw.auth(owner)
        )
        assert added.status_code == 200, added.text
    return gid


async def _watch(gw: Gateway, user: str, gid: str) -> tuple[WsClient, dict[str, Any]]:
    client = await WsClient.open(gw, user)
    reply = await client.request({"type": "subscribe", "groupId": gid})
    assert reply["action"] == "subscribed", reply
    return client, reply


def _token(gw: Gateway, user: str) -> str:
    return issue_token(gw.settings, user)


def _update(action: str) -> Any:
    return lambda f: f["type"] == "group_update" and f.get("action") == action and "seq" in f


async def test_invite_remove_transfer_and_leave_over_the_websocket(
    start_gateway: StartGateway,
) -> None:
    gw = await start_gateway()
    for name in ("ann", "bob", "cat"):
        await gw.user(name)
    gid = await _group(gw, "ann")
    ann, _ = await _watch(gw, "ann", gid)
    # bob is online but not in the group yet: the invitation reaches him live.
    bob_lobby = await WsClient.open(gw, "bob")
    await gw.ctx.people.started()

    unknown = await ann.request(
        {"type": "invite_member", "groupId": gid, "username": "zed", "requestId": "i0"}
    )
    assert unknown["code"] == "not_found" and unknown["field"] == "username"
    assert unknown["requestId"] == "i0" and unknown["detail"]["reason"] == "unknown_user"

    invited = await ann.request(
        {"type": "invite_member", "groupId": gid, "username": "bob", "requestId": "i1"}
    )
    assert invited["action"] == "invited" and invited["requestId"] == "i1"
    assert invited["group"]["members"] == ["ann", "bob"]
    added = await bob_lobby.seen(lambda f: f.get("action") == "added")
    assert added["group"]["id"] == gid and added["group"]["name"] == "crew"
    # Every subscriber sees the change in the group's stream, in order, with its seq.
    live = await ann.seen(_update("members"))
    assert live["group"]["members"] == ["ann", "bob"] and live["by"] == "ann"

    bob, subscribed = await _watch(gw, "bob", gid)
    assert subscribed["group"]["owner"] == "ann"
    # A member is not the owner: invitations, removals, settings are refused.
    for frame in (
        {"type": "invite_member", "groupId": gid, "username": "cat"},
        {"type": "remove_member", "groupId": gid, "username": "ann"},
        {"type": "transfer_ownership", "groupId": gid, "username": "bob"},
        {"type": "update_group_settings", "groupId": gid, "name": "mine"},
        {"type": "delete_group", "groupId": gid},
    ):
        refused = await bob.request(frame)
        assert refused["code"] == "forbidden", (frame, refused)
    # The owner cannot leave while others remain.
    stay = await ann.request({"type": "leave_group", "groupId": gid})
    assert stay["code"] == "conflict" and stay["detail"]["reason"] == "owner_leaving"
    stranger = await ann.request({"type": "transfer_ownership", "groupId": gid, "username": "cat"})
    assert stranger["code"] == "not_found" and stranger["detail"]["reason"] == "not_member"

    handed = await ann.request({"type": "transfer_ownership", "groupId": gid, "username": "bob"})
    assert handed["action"] == "owner" and handed["group"]["owner"] == "bob"
    owner_change = await bob.seen(_update("owner"))
    assert owner_change["group"]["owner"] == "bob"

    # The new owner removes ann: her subscription ends at once, with a frame saying so.
    removed = await bob.request({"type": "remove_member", "groupId": gid, "username": "ann"})
    assert removed["action"] == "removed" and removed["group"]["members"] == ["bob"]
    ended = await ann.seen(lambda f: f["type"] == "removed")
    assert ended["groupId"] == gid and ended["reason"] == "removed"
    assert "removed" in ended["message"]
    await ann.seen(lambda f: f.get("action") == "removed" and f["group"] == {"id": gid})
    assert not [s for s in gw.ctx.hub.group_subscriptions(gid) if s.sink.username == "ann"]
    gone = await ann.request({"type": "subscribe", "groupId": gid})
    assert gone["code"] == "not_found"

    # cat joins and leaves on her own.
    await bob.request({"type": "invite_member", "groupId": gid, "username": "cat"})
    cat, _ = await _watch(gw, "cat", gid)
    await cat.send({"type": "leave_group", "groupId": gid, "requestId": "l1"})
    left = await cat.seen(lambda f: f.get("requestId") == "l1")
    assert left["action"] == "left" and left["group"] == {"id": gid}
    bye = await cat.seen(lambda f: f["type"] == "removed")
    assert bye["reason"] == "left"
    last = await bob.request({"type": "leave_group", "groupId": gid})
    assert last["code"] == "conflict"

    # Each change left a notice in the history.
    page = (await gw.http.get(f"/api/groups/{gid}/messages", headers=gw.auth("bob"))).json()
    notices = [m["text"] for m in page["messages"] if m["role"] == "system"]
    assert notices == [
        "ann added bob to the group",
        "ann made bob the owner of the group",
        "bob removed ann from the group",
        "bob added cat to the group",
        "cat left the group",
    ]
    for client in (ann, bob, cat, bob_lobby):
        await client.close()


async def test_settings_change_is_live_noticed_validated_and_used_for_the_next_message(
    start_gateway: StartGateway,
) -> None:
    gw = await start_gateway()
    await gw.user("ann")
    await gw.user("bob")
    gid = await _group(gw, "ann", "bob")
    ann, _ = await _watch(gw, "ann", gid)
    bob, _ = await _watch(gw, "bob", gid)

    bad = await ann.request(
        {
            "type": "update_group_settings",
            "groupId": gid,
            "settings": {"maxChainDepth": 0},
            "requestId": "s0",
        }
    )
    assert bad["code"] == "invalid_frame" and bad["field"] == "settings.maxChainDepth"
    assert bad["requestId"] == "s0"
    bad_model = await ann.request(
        {"type": "update_group_settings", "groupId": gid, "settings": {"model": "acme:x"}}
    )
    assert bad_model["field"] == "settings.model"
    not_in_roster = await ann.request(
        {"type": "update_group_settings", "groupId": gid, "defaultVpId": "martin"}
    )
    assert not_in_roster["code"] == "invalid_frame"
    assert not_in_roster["detail"]["reason"] == "default_not_in_roster"

    changed = await ann.request(
        {
            "type": "update_group_settings",
            "groupId": gid,
            "name": "crew two",
            "defaultVpId": "linus",
            "settings": {
                "broadcastWhenUnmentioned": False,
                "language": "zh",
                "model": "offline:group-model",
                "maxChainDepth": 3,
            },
            "requestId": "s1",
        }
    )
    assert changed["action"] == "settings" and changed["requestId"] == "s1"
    group = changed["group"]
    assert group["name"] == "crew two" and group["defaultVpId"] == "linus"
    assert group["settings"]["language"] == "zh" and group["settings"]["maxChainDepth"] == 3
    # The other member sees it live, and a notice saying what changed.
    live = await bob.seen(_update("settings"))
    assert live["group"]["settings"]["model"] == "offline:group-model" and live["by"] == "ann"
    notice = await bob.seen(
        lambda f: f["type"] == "yeaft_output" and f["vpId"] == "system" and "data" in f
    )
    text = notice["data"]["message"]
    assert text.startswith("ann changed the group settings: ")
    assert "name → crew two" in text and "model → offline:group-model" in text
    # Nothing changed: no update, no notice.
    same = await ann.request({"type": "update_group_settings", "groupId": gid, "name": "crew two"})
    assert same["action"] == "settings"

    # The next message follows the new settings: no mention → only the default VP,
    # answering with the group's model.
    ack = await bob.request(
        {"type": "yeaft_session_chat", "groupId": gid, "text": "hello", "clientMessageId": "m1"}
    )
    assert ack["type"] == "ack"
    result = await bob.seen(lambda f: f["type"] == "yeaft_output" and f["data"]["type"] == "result")
    assert result["vpId"] == "linus" and result["data"]["model"] == "offline:group-model"
    assert await gw.runtime.send(WaitIdle(gid))
    page = (await gw.http.get(f"/api/groups/{gid}/messages", headers=gw.auth("bob"))).json()
    assert [m["author"] for m in page["messages"] if m["role"] == "assistant"] == ["linus"]
    notices = [m["text"] for m in page["messages"] if m["role"] == "system"]
    assert len(notices) == 2 and notices[1].startswith("ann changed the group settings")
    await ann.close()
    await bob.close()


async def test_presence_on_subscribe_and_as_people_come_and_go(
    start_gateway: StartGateway,
) -> None:
    gw = await start_gateway()
    await gw.user("ann")
    await gw.user("bob")
    gid = await _group(gw, "ann", "bob")
    ann, subscribed = await _watch(gw, "ann", gid)
    assert subscribed["online"] == ["ann"]
    await gw.ctx.people.started()

    bob = await WsClient.open(gw, "bob")
    came = await ann.seen(lambda f: f["type"] == "presence" and f.get("user") == "bob")
    assert came == {
        "type": "presence",
        "groupId": gid,
        "online": ["ann", "bob"],
        "user": "bob",
        "state": "online",
    }
    # A second tab of bob is no news; the last one closing is.
    bob_tab = await WsClient.open(gw, "bob")
    # Its pong comes after the server counted the tab among bob's connections.
    assert (await bob_tab.request({"type": "ping"}))["type"] == "pong"
    await bob.close()
    await bob_tab.close()
    went = await ann.seen(
        lambda f: f["type"] == "presence" and f.get("state") == "offline", within=15
    )
    assert went["online"] == ["ann"] and went["user"] == "bob"
    # One frame for his coming, one for his going (a renewal may add a bare list,
    # and ann's own arrival may reach her group after her subscription).
    frames = [f for f in ann.received if f["type"] == "presence" and f.get("user") == "bob"]
    assert frames == [came, went]
    listed = await gw.http.get(f"/api/groups/{gid}/presence", headers=gw.auth("ann"))
    assert listed.json() == {"groupId": gid, "online": ["ann"]}
    await ann.close()


async def test_members_and_settings_over_http(start_gateway: StartGateway) -> None:
    gw = await start_gateway()
    for name in ("ann", "bob"):
        await gw.user(name)
    gid = await _group(gw, "ann", "bob")
    ann, bob = gw.auth("ann"), gw.auth("bob")
    url = f"/api/groups/{gid}"

    patched = await gw.http.patch(
        f"{url}/settings",
        json={"name": "renamed", "settings": {"vpMentionsDispatch": False, "fanoutCap": 2}},
        headers=ann,
    )
    assert patched.status_code == 200, patched.text
    body = patched.json()
    assert body["name"] == "renamed" and body["settings"]["vpMentionsDispatch"] is False
    invalid = await gw.http.patch(
        f"{url}/settings", json={"settings": {"throttleWindowS": 100}}, headers=ann
    )
    assert (
        invalid.status_code == 422
        and invalid.json()["error"]["field"] == "settings.throttleWindowS"
    )
    forbidden = await gw.http.patch(f"{url}/settings", json={"name": "x"}, headers=bob)
    assert forbidden.status_code == 403 and forbidden.json()["error"]["code"] == "forbidden"
    # Renaming is a setting too: the owner's.
    assert (await gw.http.patch(url, json={"name": "x"}, headers=bob)).status_code == 403
    unknown = await gw.http.post(f"{url}/members", json={"username": "nobody"}, headers=ann)
    assert unknown.status_code == 404 and unknown.json()["error"]["field"] == "username"

    handed = await gw.http.put(f"{url}/owner", json={"username": "bob"}, headers=ann)
    assert handed.status_code == 200 and handed.json()["owner"] == "bob"
    assert (await gw.http.post(f"{url}/leave", headers=ann)).status_code == 204
    assert (await gw.http.get(url, headers=ann)).status_code == 404
    gone = await gw.http.post(f"{url}/leave", headers=bob)
    assert gone.status_code == 409 and gone.json()["error"]["detail"]["reason"] == "last_member"
    group = await (await gw.store()).get_group(gid)
    assert group is not None and group.members == ["bob"] and group.owner == "bob"


async def test_concurrent_invitations_and_settings_changes_all_land(
    start_gateway: StartGateway,
) -> None:
    gw = await start_gateway()
    await gw.user("ann")
    names = [f"u{i}" for i in range(12)]
    for name in names:
        await gw.user(name)
    gid = await _group(gw, "ann")
    invitations = [
        gw.http.post(f"/api/groups/{gid}/members", json={"username": name}, headers=gw.auth("ann"))
        for name in names
    ]
    # Settings changes at the same time must not write an older member list back.
    edits = [
        gw.http.patch(
            f"/api/groups/{gid}/settings",
            json={"settings": {"maxChainDepth": depth}},
            headers=gw.auth("ann"),
        )
        for depth in (2, 3, 4)
    ]
    replies = await asyncio.gather(*invitations, *edits)
    assert all(r.status_code == 200 for r in replies), [r.text for r in replies]
    group = await (await gw.store()).get_group(gid)
    assert group is not None and sorted(group.members) == sorted(["ann", *names])
    assert group.settings.max_chain_depth in (2, 3, 4)


async def test_a_second_gateway_process_sees_removals_deletions_and_presence(
    start_gateway: StartGateway,
) -> None:
    """Two gateway apps on one store and one Ray deployment: nothing shared but the store."""
    first = await start_gateway()
    second = await start_gateway(first.runtime)
    for name in ("ann", "bob", "cat"):
        await first.user(name)
    # The same users (one store); each app signs its own tokens.
    second.tokens = {name: _token(second, name) for name in ("ann", "bob", "cat")}
    gid = await _group(first, "ann", "bob", "cat")
    await first.ctx.people.started()
    await second.ctx.people.started()
    ann, _ = await _watch(first, "ann", gid)
    bob, _ = await _watch(second, "bob", gid)
    cat_lobby = await WsClient.open(second, "cat")
    # Bob's arrival on the second gateway shows on the first.
    await ann.seen(
        lambda f: f["type"] == "presence" and f.get("user") == "bob" and "bob" in f["online"]
    )

    # A settings change on the first reaches a subscriber of the second.
    await ann.request({"type": "update_group_settings", "groupId": gid, "name": "moved"})
    live = await bob.seen(_update("settings"))
    assert live["group"]["name"] == "moved"

    # Bob is removed through the first gateway: his subscription on the second ends.
    await ann.request({"type": "remove_member", "groupId": gid, "username": "bob"})
    ended = await bob.seen(lambda f: f["type"] == "removed")
    assert ended["groupId"] == gid and ended["reason"] == "removed"
    assert not second.ctx.hub.group_subscriptions(gid)

    # Deleting the group on the first tells the second's clients, watching or not.
    cat, _ = await _watch(second, "cat", gid)
    deleted = await ann.request({"type": "delete_group", "groupId": gid})
    assert deleted["action"] == "deleted"
    told = await cat.seen(lambda f: f.get("action") == "deleted")
    assert told["group"] == {"id": gid}
    await cat_lobby.seen(lambda f: f.get("action") == "deleted")
    assert gid not in second.ctx.hub.tails
    for client in (ann, bob, cat, cat_lobby):
        await client.close()


def test_the_terminal_client_says_when_a_group_is_no_longer_yours() -> None:
    out = io.StringIO()
    screen = Screen(out, colour=False)
    render(screen, {"type": "removed", "groupId": "g", "reason": "removed", "message": "bye"})
    render(screen, {"type": "group_update", "action": "deleted", "group": {"id": "g"}})
    render(screen, {"type": "presence", "groupId": "g", "online": ["ann"]})
    assert out.getvalue().splitlines() == ["  bye", "  this group was deleted"]
