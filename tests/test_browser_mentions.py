"""People's @mentions in the web UI (real headless Chromium), two people at once.

Ada and Bob share two groups. Bob looks at "Quiet"; Ada opens "Launch",
picks Bob from the composer's @-list (tagged "person", beside the VPs) and
sends. Without asking the server again (every request of Bob's page is
counted: ``GET /api/inbox`` once, when the connection went live), Bob's
group list shows Launch's unread count and an @1 mention badge, and, as his
page is in the background and he allowed notifications from the sidebar's
button, a notification. Opening Launch shows the mention highlighted and
clears both counts. The sidebar's "@ Mentions" lists his mentions across
groups, and one opens its group.

Run: ``.venv/bin/pytest tests/test_browser_mentions.py`` (see tests/fixtures/browser.py).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any

import pytest

from gateway.users import add_user
from tests.browser_helpers import PASSWORD, USER, log_in, watch_page_errors
from tests.fixtures.ray_cluster import MakeRuntime

if TYPE_CHECKING:
    from coordinator.runtime import Runtime
    from tests.fixtures.browser import LiveGateway

pytestmark = [
    pytest.mark.parametrize("store_factory", ["embedded"], indirect=True),
    pytest.mark.timeout(300),
]

# Notifications recorded instead of shown (headless Chromium shows none);
# permission starts undecided, as in a fresh profile.
FAKE_NOTIFICATION = """
window.__notes = [];
window.Notification = class {
  static permission = 'default';
  static requestPermission() {
    window.Notification.permission = 'granted';
    return Promise.resolve('granted');
  }
  constructor(title, options) { window.__notes.push({ title, body: options && options.body }); }
  close() {}
};
"""


def _item(page: Any, group_id: str) -> Any:
    return page.locator(f'[data-testid="group-item"][data-group-id="{group_id}"]')


async def test_ada_mentions_bob_and_his_badge_moves_without_a_poll(
    chromium: Callable[..., AbstractAsyncContextManager[Any]],
    gateway_server: Callable[[Runtime], AbstractAsyncContextManager[LiveGateway]],
    make_runtime: MakeRuntime,
) -> None:
    from playwright.async_api import expect

    runtime = make_runtime()
    store = await runtime.store()
    await add_user(store, USER, PASSWORD)
    await add_user(store, "bob", PASSWORD)
    quiet = await runtime.create_group("Quiet", ["linus"], members=[USER, "bob"])
    launch = await runtime.create_group("Launch", ["linus"], members=[USER, "bob"])
    async with (
        gateway_server(runtime) as gateway,
        chromium() as first,
        chromium("bob-profile") as second,
    ):
        await second.add_init_script(FAKE_NOTIFICATION)
        ada, bob = [b.pages[0] if b.pages else await b.new_page() for b in (first, second)]
        problems = watch_page_errors(ada) + watch_page_errors(bob)
        inbox_reads: list[str] = []
        bob.on("request", lambda r: inbox_reads.append(r.url) if "/api/inbox" in r.url else None)
        async with bob.expect_response(lambda r: "/api/inbox" in r.url):
            await log_in(bob, gateway.url, "bob")
        await expect(bob.get_by_test_id("group-title")).to_have_text("Quiet")
        await expect(_item(bob, launch.id).get_by_test_id("unread")).to_have_count(0)
        # Permission is asked from a click on the sidebar's button, and only then.
        notify = bob.get_by_test_id("notify-mentions")
        await expect(notify).to_be_visible()
        await notify.click()
        await expect(notify).to_be_hidden()
        assert await bob.evaluate("window.Notification.permission") == "granted"

        await log_in(ada, gateway.url)
        await _item(ada, launch.id).click()
        await expect(ada.get_by_test_id("group-title")).to_have_text("Launch")
        composer = ada.get_by_test_id("message-input")
        await composer.fill("@b")
        option = ada.locator('[data-testid="mention-option"][data-person="bob"]')
        await expect(option).to_be_visible()
        await expect(option.get_by_test_id("mention-person-tag")).to_have_text("person")
        # The VPs are offered beside the people, marked apart.
        await composer.fill("@")
        await expect(ada.locator('[data-testid="mention-option"][data-vp="linus"]')).to_be_visible()
        await expect(
            ada.locator('[data-testid="mention-option"][data-vp="linus"]').get_by_test_id(
                "mention-person-tag"
            )
        ).to_have_count(0)
        await composer.fill("@b")
        await expect(option).to_have_attribute("aria-selected", "true")
        await composer.press("Enter")
        await expect(composer).to_have_value("@bob ")
        # Bob's page goes to the background before the mention arrives.
        await bob.evaluate("document.hasFocus = () => false")
        await composer.type("can you check the canary?")
        await composer.press("Enter")
        sent = ada.get_by_test_id("user-message").last
        await expect(sent).to_have_attribute("data-state", "sent")
        await expect(sent.get_by_test_id("mention-person")).to_have_text("@bob")

        # Bob, still on Quiet, sees the counts move: pushed, not polled.
        await expect(_item(bob, launch.id).get_by_test_id("unread")).to_have_text("1")
        await expect(_item(bob, launch.id).get_by_test_id("mention-badge")).to_have_text("@1")
        await expect(_item(bob, quiet.id).get_by_test_id("mention-badge")).to_have_count(0)
        await bob.wait_for_function("window.__notes.length === 1")
        (note,) = await bob.evaluate("window.__notes")
        assert note["title"] == f"@{USER} mentioned you in Launch"
        assert note["body"] == "@bob can you check the canary?"

        # Opening Launch shows the mention of him highlighted and clears both counts.
        await bob.evaluate("delete document.hasFocus")
        await _item(bob, launch.id).click()
        await expect(bob.get_by_test_id("group-title")).to_have_text("Launch")
        await expect(bob.get_by_test_id("mention-me")).to_have_text("@bob")
        await expect(_item(bob, launch.id).get_by_test_id("mention-badge")).to_have_count(0)
        await expect(_item(bob, launch.id).get_by_test_id("unread")).to_have_count(0)
        assert len(inbox_reads) == 1, inbox_reads

        # His mentions are listed in the sidebar; one opens its group at the message.
        await _item(bob, quiet.id).click()
        await expect(bob.get_by_test_id("group-title")).to_have_text("Quiet")
        await bob.get_by_test_id("show-mentions").click()
        hit = bob.get_by_test_id("mention-hit")
        await expect(hit).to_have_count(1)
        await expect(hit).to_contain_text("Launch")
        await expect(hit).to_contain_text("@bob can you check the canary?")
        await hit.click()
        await expect(bob.get_by_test_id("group-title")).to_have_text("Launch")
        # A second click hides the list; Ada, mentioned by nobody, is told so.
        await bob.get_by_test_id("show-mentions").click()
        await expect(bob.get_by_test_id("mention-hit")).to_have_count(0)
        await bob.get_by_test_id("show-mentions").click()
        await expect(hit).to_have_count(1)
        await bob.get_by_test_id("show-mentions").click()
        await expect(bob.get_by_test_id("search-results")).to_be_hidden()
        await ada.get_by_test_id("show-mentions").click()
        await expect(ada.get_by_test_id("mentions-empty")).to_be_visible()
        assert problems == []
