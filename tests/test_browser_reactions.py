"""Reactions and pins in the web UI (real headless Chromium), two people at once.

Ada and Bob, each in a browser of their own, look at one group holding a
message of Bob's and a reply of Linus's. Ada reacts to Bob's message from
the picker and Bob sees the chip appear live; Bob's click on the chip adds
his, and Ada sees the count move; Ada reacts to Linus's reply with an emoji
typed in, and a word typed in is refused. Ada pins Bob's message: Bob's
pinned list shows it live, and after a reload his chips and pins are all
still there; an item of the list jumps to its message. Ada's second click
on her chip takes her reaction off, on both screens.

Run: ``.venv/bin/pytest tests/test_browser_reactions.py`` (see tests/fixtures/browser.py).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any

import pytest

from gateway.users import add_user
from store.base import GroupMessage
from tests.browser_helpers import PASSWORD, USER, log_in, watch_page_errors
from tests.fixtures.ray_cluster import MakeRuntime

if TYPE_CHECKING:
    from coordinator.runtime import Runtime
    from tests.fixtures.browser import LiveGateway

pytestmark = [
    pytest.mark.parametrize("store_factory", ["embedded"], indirect=True),
    pytest.mark.timeout(300),
]


def _message(page: Any, message_id: str) -> Any:
    return page.locator(f'[data-message-id="{message_id}"]')


def _chip(page: Any, message_id: str, emoji: str) -> Any:
    return _message(page, message_id).locator(
        f'[data-testid="reaction-chip"][data-emoji="{emoji}"]'
    )


async def test_ada_reacts_and_pins_and_bob_sees_it_live(
    chromium: Callable[..., AbstractAsyncContextManager[Any]],
    gateway_server: Callable[[Runtime], AbstractAsyncContextManager[LiveGateway]],
    make_runtime: MakeRuntime,
) -> None:
    from playwright.async_api import expect

    runtime = make_runtime()
    store = await runtime.store()
    await add_user(store, USER, PASSWORD)
    await add_user(store, "bob", PASSWORD)
    group = await runtime.create_group("Launch", ["linus"], members=[USER, "bob"])
    asked, _ = await store.append_message(
        group.id, GroupMessage(author="bob", role="user", text="Ship on Friday?")
    )
    answered, _ = await store.append_message(
        group.id, GroupMessage(author="linus", role="assistant", text="Yes, behind a canary.")
    )
    async with (
        gateway_server(runtime) as gateway,
        chromium() as first,
        chromium("bob-profile") as second,
    ):
        ada, bob = [b.pages[0] if b.pages else await b.new_page() for b in (first, second)]
        problems = watch_page_errors(ada) + watch_page_errors(bob)
        await log_in(ada, gateway.url)
        await log_in(bob, gateway.url, "bob")
        for page in (ada, bob):
            await expect(page.get_by_test_id("group-title")).to_have_text("Launch")
            await expect(_message(page, answered.id)).to_have_count(1)
            await expect(page.get_by_test_id("pins-toggle")).to_have_text("📌 0")

        # Ada reacts to Bob's message from the picker: Bob's screen shows it at once.
        await _message(ada, asked.id).get_by_test_id("add-reaction").click()
        picker = ada.get_by_test_id("reaction-picker")
        await expect(picker).to_be_visible()
        await picker.locator('[data-testid="picker-emoji"][data-emoji="👍"]').click()
        await expect(picker).to_be_hidden()
        await expect(_chip(ada, asked.id, "👍")).to_have_attribute("data-mine", "true")
        thumbs = _chip(bob, asked.id, "👍")
        await expect(thumbs.get_by_test_id("reaction-count")).to_have_text("1")
        await expect(thumbs).to_have_attribute("data-mine", "false")
        await expect(thumbs).to_have_attribute("title", f"{USER} reacted with 👍")

        # Bob adds his by clicking the chip: both see two.
        await thumbs.click()
        await expect(thumbs).to_have_attribute("data-mine", "true")
        for page in (ada, bob):
            await expect(_chip(page, asked.id, "👍").get_by_test_id("reaction-count")).to_have_text(
                "2"
            )

        # Ada reacts to Linus's reply with an emoji she types; a word is refused.
        await _message(ada, answered.id).get_by_test_id("add-reaction").click()
        await picker.get_by_test_id("picker-input").fill("lol")
        await picker.get_by_test_id("picker-add").click()
        await expect(ada.get_by_test_id("toast").last).to_contain_text("Could not react")
        await expect(_message(ada, answered.id).get_by_test_id("reaction-chip")).to_have_count(0)
        await _message(ada, answered.id).get_by_test_id("add-reaction").click()
        await picker.get_by_test_id("picker-input").fill("🦄")
        await picker.get_by_test_id("picker-add").click()
        await expect(_chip(bob, answered.id, "🦄").get_by_test_id("reaction-count")).to_have_text(
            "1"
        )

        # Ada pins Bob's message: Bob's pinned list follows live.
        await _message(ada, asked.id).get_by_test_id("pin-message").click()
        await expect(_message(ada, asked.id).get_by_test_id("pin-message")).to_have_text("Unpin")
        await expect(bob.get_by_test_id("pins-toggle")).to_have_text("📌 1")
        await expect(_message(bob, asked.id)).to_have_attribute("data-pinned", "true")
        await bob.get_by_test_id("pins-toggle").click()
        item = bob.get_by_test_id("pinned-item")
        await expect(item).to_have_count(1)
        await expect(item).to_contain_text("Ship on Friday?")

        # After a reload Bob's screen is the same; an item of the list jumps to its message.
        await bob.reload()
        await expect(bob.get_by_test_id("connection")).to_have_attribute("data-state", "live")
        await expect(_chip(bob, asked.id, "👍").get_by_test_id("reaction-count")).to_have_text("2")
        await expect(_chip(bob, asked.id, "👍")).to_have_attribute("data-mine", "true")
        await expect(_chip(bob, answered.id, "🦄")).to_have_attribute("data-mine", "false")
        await expect(bob.get_by_test_id("pins-toggle")).to_have_text("📌 1")
        await bob.get_by_test_id("pins-toggle").click()
        await bob.get_by_test_id("pinned-item").click()
        await expect(_message(bob, asked.id)).to_have_attribute("data-focused", "true")
        await expect(bob.get_by_test_id("pins-list")).to_be_hidden()

        # Ada's second click on her chip takes only hers off, on both screens.
        await _chip(ada, asked.id, "👍").click()
        for page in (ada, bob):
            chip = _chip(page, asked.id, "👍")
            await expect(chip.get_by_test_id("reaction-count")).to_have_text("1")
        await expect(_chip(ada, asked.id, "👍")).to_have_attribute("data-mine", "false")
        assert not [p for p in problems if "Could not react" not in p and "422" not in p], problems

    stored = await store.reactions_of(group.id, [asked.id, answered.id])
    assert {m: [(r.emoji, r.users) for r in rs] for m, rs in stored.items()} == {
        asked.id: [("👍", ("bob",))],
        answered.id: [("🦄", (USER,))],
    }
