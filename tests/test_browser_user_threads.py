"""User threads in the web UI (real headless Chromium), two people at once.

Ada and Bob, each in a browser of their own, look at one group holding a
question of Bob's. Ada opens a thread under it and asks Linus there: her
message and Linus's streamed answer show in the side panel, not on the main
timeline, and Bob's main timeline shows the thread's summary under his
question live ("2 replies", who wrote them). Bob opens the thread, sees
both, and answers in it; Ada's open panel shows his reply live and both
summaries move on (Linus, the group's default VP, answers Bob there too).
After a reload the summary is still there and the main
timeline still holds none of the thread's messages. (Not thread.js's reply
rows: those group a VP's replies under a main-timeline message.)

Run: ``.venv/bin/pytest tests/test_browser_user_threads.py`` (see tests/fixtures/browser.py).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any

import pytest

from gateway.users import add_user
from store.base import GroupMessage
from tests.browser_helpers import PASSWORD, TURN_TIMEOUT_MS, USER, log_in, watch_page_errors
from tests.fixtures.ray_cluster import MakeRuntime

if TYPE_CHECKING:
    from coordinator.runtime import Runtime
    from tests.fixtures.browser import LiveGateway

pytestmark = [
    pytest.mark.parametrize("store_factory", ["embedded"], indirect=True),
    pytest.mark.timeout(300),
]


def _main(page: Any) -> Any:
    return page.get_by_test_id("timeline").first


def _summary(page: Any, message_id: str) -> Any:
    return _main(page).locator(f'[data-message-id="{message_id}"] [data-testid="thread-summary"]')


async def test_ada_asks_in_a_thread_and_bob_follows_it_live(
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
            await expect(page.get_by_test_id("connection")).to_have_attribute("data-state", "live")
            root = _main(page).locator(f'[data-message-id="{asked.id}"]')
            await expect(root.get_by_test_id("thread-start")).to_have_text("Reply in thread")

        # Ada opens a thread under Bob's question and asks Linus there.
        await (
            _main(ada)
            .locator(f'[data-message-id="{asked.id}"]')
            .get_by_test_id("thread-start")
            .click()
        )
        panel = ada.get_by_test_id("thread-panel")
        await expect(panel).to_be_visible()
        await expect(panel.get_by_test_id("user-text")).to_have_text(["Ship on Friday?"])
        await panel.get_by_test_id("thread-input").fill("@linus what about the canary?")
        await panel.get_by_test_id("thread-send").click()
        await expect(panel.get_by_test_id("user-text")).to_have_text(
            ["Ship on Friday?", "@linus what about the canary?"]
        )
        answer = panel.get_by_test_id("vp-bubble")
        await expect(answer).to_have_count(1, timeout=TURN_TIMEOUT_MS)
        await expect(answer).to_have_attribute("data-state", "complete", timeout=TURN_TIMEOUT_MS)

        # Neither shows on a main timeline; Bob's shows the thread's summary, live.
        for page in (ada, bob):
            await expect(_main(page).get_by_test_id("user-message")).to_have_count(1)
            await expect(_main(page).get_by_test_id("vp-bubble")).to_have_count(0)
            await expect(_summary(page, asked.id).get_by_test_id("thread-count")).to_contain_text(
                "2 replies"
            )
        people = _summary(bob, asked.id).get_by_test_id("thread-people")
        await expect(people).to_contain_text(USER)
        await expect(people).to_contain_text("@Linus")

        # Bob opens the thread, sees both, and answers; Ada's open panel follows.
        await _summary(bob, asked.id).click()
        bob_panel = bob.get_by_test_id("thread-panel")
        await expect(bob_panel.get_by_test_id("user-text")).to_have_text(
            ["Ship on Friday?", "@linus what about the canary?"]
        )
        await expect(bob_panel.get_by_test_id("vp-bubble")).to_have_count(1)
        await bob_panel.get_by_test_id("thread-input").fill("Canary it is.")
        await bob_panel.get_by_test_id("thread-input").press("Enter")
        await expect(panel.get_by_test_id("user-text").last).to_have_text("Canary it is.")
        for page in (ada, bob):
            await expect(_summary(page, asked.id).get_by_test_id("thread-count")).to_contain_text(
                "4 replies · last just now"
            )
        # Linus, the group's default VP, answered Bob in the thread too.
        await expect(panel.get_by_test_id("vp-bubble")).to_have_count(2)

        # After a reload: the summary from the history, the main timeline still clear.
        await ada.reload()
        await expect(ada.get_by_test_id("connection")).to_have_attribute("data-state", "live")
        await expect(_summary(ada, asked.id).get_by_test_id("thread-count")).to_contain_text(
            "4 replies"
        )
        await expect(_main(ada).get_by_test_id("user-message")).to_have_count(1)
        await expect(_main(ada).get_by_test_id("vp-bubble")).to_have_count(0)
        await _summary(ada, asked.id).click()
        await expect(ada.get_by_test_id("thread-panel").get_by_test_id("user-text")).to_have_count(
            3
        )
        await ada.get_by_test_id("thread-close").click()
        await expect(ada.get_by_test_id("thread-panel")).to_be_hidden()
        assert problems == [], problems

    replies = await store.thread_replies(group.id, asked.id)
    assert [m.author for m in replies] == [USER, "linus", "bob", "linus"]
