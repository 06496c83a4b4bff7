"""Reactions and versions in a thread's side panel (real headless Chromium), two people at once.

Ada asks Linus in a thread under Bob's question; Linus's scripted model
answers with what it was given. In the panel Ada reacts to Linus's answer
and Bob, whose panel shows the same thread, sees it live and adds his own;
Ada takes hers back and Bob's count follows. Then Ada edits her message in
the thread and resends it: Bob sees the new text with "edited", and
Linus's new answer sits over the old one behind a ‹2/2› switcher in both
panels, in the thread, never on the main timeline.

Run: ``.venv/bin/pytest tests/test_browser_thread_extras.py`` (see tests/fixtures/browser.py).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any

import pytest

from engine.providers.scripted import ScriptedModel
from gateway.users import add_user
from store.base import GroupMessage
from tests.browser_helpers import PASSWORD, TURN_TIMEOUT_MS, USER, log_in, watch_page_errors
from tests.fixtures.ray_cluster import MakeRuntime
from tests.test_browser_versions import heard

if TYPE_CHECKING:
    from coordinator.runtime import Runtime
    from tests.fixtures.browser import LiveGateway

pytestmark = [
    pytest.mark.parametrize("store_factory", ["embedded"], indirect=True),
    pytest.mark.timeout(300),
]


def _panel(page: Any) -> Any:
    return page.get_by_test_id("thread-panel")


def _linus(page: Any) -> Any:
    """Linus's bubbles the panel shows (another version of a reply is hidden)."""
    return _panel(page).locator('[data-testid="vp-bubble"][data-vp="linus"]:visible')


async def test_reactions_and_versions_in_a_thread_live_for_both(
    chromium: Callable[..., AbstractAsyncContextManager[Any]],
    gateway_server: Callable[[Runtime], AbstractAsyncContextManager[LiveGateway]],
    make_runtime: MakeRuntime,
) -> None:
    from playwright.async_api import expect

    runtime = make_runtime(provider_overrides={"offline": ScriptedModel(heard)})
    store = await runtime.store()
    await add_user(store, USER, PASSWORD)
    await add_user(store, "bob", PASSWORD)
    group = await runtime.create_group("Caches", ["linus"], members=[USER, "bob"])
    asked, _ = await store.append_message(
        group.id, GroupMessage(author="bob", role="user", text="Which cache policy?")
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
            await expect(page.get_by_test_id("connection")).to_have_attribute("data-state", "live")
        root = ada.get_by_test_id("timeline").first.locator(f'[data-message-id="{asked.id}"]')
        await root.get_by_test_id("thread-start").click()
        await _panel(ada).get_by_test_id("thread-input").fill("@linus LRU or LFU? LRU")
        await _panel(ada).get_by_test_id("thread-send").click()
        await expect(_linus(ada)).to_contain_text("LFU? LRU", timeout=TURN_TIMEOUT_MS)
        await expect(_linus(ada)).to_have_attribute(
            "data-state", "complete", timeout=TURN_TIMEOUT_MS
        )
        summary = bob.get_by_test_id("timeline").first.get_by_test_id("thread-summary")
        await summary.click()
        await expect(_linus(bob)).to_contain_text("LFU? LRU")

        # Ada reacts in the panel; Bob's panel shows it live and he adds his.
        await _linus(ada).get_by_test_id("add-reaction").click()
        await ada.get_by_test_id("reaction-picker").locator('[data-emoji="👍"]').click()
        bob_chip = _linus(bob).get_by_test_id("reaction-chip")
        await expect(bob_chip.get_by_test_id("reaction-count")).to_have_text("1")
        await expect(_linus(bob).get_by_test_id("pin-message")).to_have_count(0)
        await bob_chip.click()
        await expect(bob_chip.get_by_test_id("reaction-count")).to_have_text("2")
        ada_chip = _linus(ada).get_by_test_id("reaction-chip")
        await expect(ada_chip.get_by_test_id("reaction-count")).to_have_text("2")
        await expect(ada_chip).to_have_attribute("data-mine", "true")
        await ada_chip.click()
        await expect(bob_chip.get_by_test_id("reaction-count")).to_have_text("1")
        await expect(bob_chip).to_have_attribute("data-mine", "true")

        # Ada edits her message in the thread and resends it.
        mine = _panel(ada).locator('[data-testid="user-message"].mine')
        await mine.get_by_test_id("edit-message").click()
        await mine.get_by_test_id("edit-input").fill("@linus LRU or LFU? LFU")
        await mine.get_by_test_id("edit-resend").click()
        theirs = _panel(bob).get_by_test_id("user-message").last
        await expect(theirs.get_by_test_id("user-text")).to_have_text("@linus LRU or LFU? LFU")
        await expect(theirs.get_by_test_id("edited-label")).to_be_visible()
        for page in (ada, bob):
            shown = _linus(page)
            await expect(shown).to_have_count(1)
            await expect(shown).to_contain_text("LFU? LFU", timeout=TURN_TIMEOUT_MS)
            await expect(shown.get_by_test_id("version-label")).to_have_text("2/2")
            main = page.get_by_test_id("timeline").first
            await expect(main.get_by_test_id("vp-bubble")).to_have_count(0)

        # Bob shows the first answer for the group: Ada's panel follows.
        await _linus(bob).get_by_test_id("version-prev").click()
        await expect(_linus(ada).get_by_test_id("version-label")).to_have_text("1/2")
        await expect(_linus(ada)).to_contain_text("LFU? LRU")
        assert problems == [], problems


async def test_a_late_answer_to_adas_reaction_does_not_undo_bobs(
    chromium: Callable[..., AbstractAsyncContextManager[Any]],
    gateway_server: Callable[[Runtime], AbstractAsyncContextManager[LiveGateway]],
    make_runtime: MakeRuntime,
) -> None:
    """The HTTP answer to Ada's reaction comes after Bob's change: Ada's page keeps Bob's."""
    import asyncio

    from playwright.async_api import expect

    runtime = make_runtime()
    store = await runtime.store()
    await add_user(store, USER, PASSWORD)
    await add_user(store, "bob", PASSWORD)
    group = await runtime.create_group("Caches", ["linus"], members=[USER, "bob"])
    asked, _ = await store.append_message(
        group.id, GroupMessage(author="bob", role="user", text="Which cache policy?")
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
            await expect(page.get_by_test_id("connection")).to_have_attribute("data-state", "live")
        bob_done = asyncio.Event()

        async def late(route: Any) -> None:
            answer = await route.fetch()
            await bob_done.wait()
            await route.fulfill(response=answer)

        await ada.route("**/reactions", late)
        on = f'[data-message-id="{asked.id}"]'
        await ada.locator(on).get_by_test_id("add-reaction").click()
        await ada.get_by_test_id("reaction-picker").locator('[data-emoji="👍"]').click()
        bob_chip = bob.locator(on).get_by_test_id("reaction-chip")
        await expect(bob_chip.get_by_test_id("reaction-count")).to_have_text("1")
        await bob_chip.click()
        await expect(bob_chip.get_by_test_id("reaction-count")).to_have_text("2")
        ada_chip = ada.locator(on).get_by_test_id("reaction-chip")
        await expect(ada_chip.get_by_test_id("reaction-count")).to_have_text("2")
        async with ada.expect_event("requestfinished") as finished:
            bob_done.set()
        await finished.value
        # Ada's page had the answer (one reaction) after Bob's frame (two): it
        # keeps two. The answer is read in the page's next tasks: let them run.
        await ada.evaluate("() => new Promise((done) => setTimeout(() => setTimeout(done, 0), 0))")
        await expect(ada_chip.get_by_test_id("reaction-count")).to_have_text("2")
        assert problems == [], problems
