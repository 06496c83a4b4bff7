"""A search hit on a reply in a thread opens the thread (real headless Chromium).

Ada searches the sidebar for a word said only in a thread: the hit opens
the group at the thread's root and the thread's side panel at the reply,
flashed; a hit on a main-timeline message opens no panel.

Run: ``.venv/bin/pytest tests/test_browser_thread_search.py`` (see tests/fixtures/browser.py).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any

import pytest

from gateway.users import add_user
from store.base import GroupMessage
from store.threads import THREAD_KEY
from tests.browser_helpers import PASSWORD, USER, log_in, watch_page_errors
from tests.fixtures.ray_cluster import MakeRuntime

if TYPE_CHECKING:
    from coordinator.runtime import Runtime
    from tests.fixtures.browser import LiveGateway

pytestmark = [
    pytest.mark.parametrize("store_factory", ["embedded"], indirect=True),
    pytest.mark.timeout(300),
]


async def test_a_search_hit_in_a_thread_opens_the_thread_at_the_reply(
    chromium: Callable[..., AbstractAsyncContextManager[Any]],
    gateway_server: Callable[[Runtime], AbstractAsyncContextManager[LiveGateway]],
    make_runtime: MakeRuntime,
) -> None:
    from playwright.async_api import expect

    runtime = make_runtime()
    store = await runtime.store()
    await add_user(store, USER, PASSWORD)
    group = await runtime.create_group("Launch", ["linus"], members=[USER, "bob"])
    root, _ = await store.append_message(
        group.id, GroupMessage(author="bob", role="user", text="Ship on Friday?")
    )
    reply, _ = await store.append_message(
        group.id,
        GroupMessage(
            author="linus",
            role="assistant",
            text="Start with a wombat canary on one region.",
            meta={THREAD_KEY: root.id},
        ),
    )
    asked, _ = await store.append_message(
        group.id,
        GroupMessage(
            author="bob",
            role="user",
            text=f"@{USER} can you check the canary?",
            people=[USER],
            meta={THREAD_KEY: root.id},
        ),
    )
    later, _ = await store.append_message(
        group.id, GroupMessage(author="bob", role="user", text="Friday it is, wombat or not.")
    )
    async with gateway_server(runtime) as gateway, chromium() as browser:
        page = browser.pages[0] if browser.pages else await browser.new_page()
        problems = watch_page_errors(page)
        await log_in(page, gateway.url)
        await expect(page.get_by_test_id("connection")).to_have_attribute("data-state", "live")
        panel = page.get_by_test_id("thread-panel")

        await page.get_by_test_id("search-input").fill("wombat canary")
        hit = page.get_by_test_id("search-hit")
        await expect(hit).to_have_count(1)
        await expect(hit).to_have_attribute("data-thread-id", root.id)
        await hit.click()
        await expect(panel).to_be_visible()
        await expect(panel).to_have_attribute("data-thread-id", root.id)
        shown = panel.locator(f'[data-message-id="{reply.id}"]')
        await expect(shown).to_have_attribute("data-focused", "true")
        await expect(shown.get_by_test_id("bubble-text")).to_contain_text("wombat canary")
        main = page.get_by_test_id("timeline").first
        await expect(main.locator(f'[data-message-id="{root.id}"]')).to_have_attribute(
            "data-focused", "true"
        )

        # So does a mention of Ada made in the thread, from the Mentions list.
        await page.get_by_test_id("thread-close").click()
        await page.get_by_test_id("show-mentions").click()
        mention = page.get_by_test_id("mention-hit")
        await expect(mention).to_have_attribute("data-message-id", asked.id)
        await expect(mention).to_have_attribute("data-thread-id", root.id)
        await mention.click()
        await expect(panel).to_have_attribute("data-thread-id", root.id)
        await expect(panel.locator(f'[data-message-id="{asked.id}"]')).to_have_attribute(
            "data-focused", "true"
        )

        # A main-timeline hit opens no thread.
        await page.get_by_test_id("thread-close").click()
        await page.get_by_test_id("search-input").fill("Friday wombat")
        await expect(hit).to_have_attribute("data-message-id", later.id)
        await expect(hit).to_have_attribute("data-thread-id", "")
        await hit.click()
        await expect(main.locator(f'[data-message-id="{later.id}"]')).to_have_attribute(
            "data-focused", "true"
        )
        await expect(panel).to_be_hidden()
        assert problems == [], problems
