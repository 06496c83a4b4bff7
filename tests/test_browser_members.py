"""The members and settings panels in the web UI (real headless Chromium), two people at once.

Ada owns a group; Grace, logged in beside her, is invited by name and sees
the group appear live, with Ada and herself online. Grace sees the settings
read-only; Ada changes them and both see the new name and a notice. Ada
removes Grace, whose view drops the group at once.

Ada and Grace, each in a browser of her own, also chat with Linus: each sees
the other's message live, once, with its reply right under it.

Run: ``.venv/bin/pytest tests/test_browser_members.py`` (see tests/fixtures/browser.py).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any

import pytest

from gateway.users import add_user
from tests.browser_helpers import (
    PASSWORD,
    PRIMARY_MODEL,
    TURN_TIMEOUT_MS,
    USER,
    bubble,
    log_in,
    watch_page_errors,
)
from tests.fixtures.ray_cluster import MakeRuntime
from tests.fixtures.stores import StoreFactory

if TYPE_CHECKING:
    from coordinator.runtime import Runtime
    from tests.fixtures.browser import LiveGateway

pytestmark = [
    pytest.mark.parametrize("store_factory", ["embedded"], indirect=True),
    pytest.mark.timeout(300),
]


async def test_invite_presence_settings_and_removal_between_two_people(
    chromium: Callable[..., AbstractAsyncContextManager[Any]],
    gateway_server: Callable[[Runtime], AbstractAsyncContextManager[LiveGateway]],
    make_runtime: MakeRuntime,
) -> None:
    from playwright.async_api import expect

    runtime = make_runtime()
    store = await runtime.store()
    await add_user(store, USER, PASSWORD)
    await add_user(store, "grace", PASSWORD)
    group = await runtime.create_group("Team", ["linus", "steve"], members=[USER])
    async with (
        gateway_server(runtime) as gateway,
        chromium() as first,
        chromium("second-profile") as second,
    ):
        ada, grace = [b.pages[0] if b.pages else await b.new_page() for b in (first, second)]
        problems = watch_page_errors(ada) + watch_page_errors(grace)
        for page in (ada, grace):
            page.on("dialog", lambda dialog: dialog.accept())
        await log_in(ada, gateway.url)
        await log_in(grace, gateway.url, "grace")
        await expect(ada.get_by_test_id("group-title")).to_have_text("Team")
        await expect(grace.get_by_test_id("group-item")).to_have_count(0)

        # Ada invites: an unknown name is refused in the panel, Grace's is taken.
        await ada.get_by_test_id("members-button").click()
        panel = ada.get_by_test_id("members-dialog")
        await expect(panel.get_by_test_id("member")).to_have_count(1)
        await expect(panel.get_by_test_id("member-role")).to_have_text("owner")
        await panel.get_by_test_id("invite-input").fill("nobody")
        await panel.get_by_test_id("invite-button").click()
        await expect(panel.get_by_test_id("members-error")).to_contain_text("no user 'nobody'")
        await panel.get_by_test_id("invite-input").fill("grace")
        await panel.get_by_test_id("invite-button").click()
        await expect(panel.get_by_test_id("member")).to_have_count(2)
        await expect(panel.get_by_test_id("members-error")).to_have_text("")

        # Grace sees the group appear without reloading, and opens it.
        item = grace.get_by_test_id("group-item")
        await expect(item).to_have_count(1)
        await expect(item).to_contain_text("Team")
        await item.click()
        await expect(grace.get_by_test_id("group-title")).to_have_text("Team")
        await expect(grace.get_by_test_id("notice").last).to_contain_text("added grace")
        # Both are online, on both screens.
        for page in (ada, grace):
            await expect(page.get_by_test_id("members-button")).to_have_text("People · 2 online")
        grace_row = panel.locator('[data-testid="member"][data-user="grace"]')
        await expect(grace_row).to_have_attribute("data-online", "true")
        await expect(grace_row.get_by_test_id("member-role")).to_have_text("member")
        await panel.get_by_test_id("members-close").click()

        # Grace may look at the settings, not change them.
        await grace.get_by_test_id("settings-button").click()
        settings = grace.get_by_test_id("settings-dialog")
        await expect(settings.get_by_test_id("settings-note")).to_contain_text("Only the owner")
        await expect(settings.get_by_test_id("setting-name")).to_be_disabled()
        await expect(settings.get_by_test_id("settings-save")).to_be_hidden()
        await expect(settings.locator("#settings-extra")).to_have_count(1)
        await settings.get_by_test_id("settings-close").click()

        # Ada changes them: a value out of bounds is named, then a good change lands.
        await ada.get_by_test_id("settings-button").click()
        form = ada.get_by_test_id("settings-dialog")
        await expect(form.get_by_test_id("setting-name")).to_have_value("Team")
        await form.get_by_test_id("settings-limits").locator("summary").click()
        await form.get_by_test_id("setting-fanoutCap").fill("40")
        await form.get_by_test_id("settings-save").click()
        await expect(form.get_by_test_id("error-fanoutCap")).to_contain_text("16")
        await form.get_by_test_id("setting-fanoutCap").fill("4")
        await form.get_by_test_id("setting-name").fill("Team two")
        await form.get_by_test_id("setting-language").select_option("zh")
        await form.get_by_test_id("setting-defaultVpId").select_option("steve")
        await form.get_by_test_id("setting-broadcastWhenUnmentioned").uncheck()
        # Enum-valued settings go through the same PATCH as the others.
        await form.get_by_test_id("setting-queueMode").select_option("followup")
        await form.get_by_test_id("settings-save").click()
        await expect(form).to_be_hidden()
        for page in (ada, grace):
            await expect(page.get_by_test_id("group-title")).to_have_text("Team two")
            notice = page.get_by_test_id("notice").last
            await expect(notice).to_contain_text("changed the group settings")
            await expect(notice).to_contain_text("language → zh")
        saved = await store.get_group(group.id)
        assert saved is not None and saved.settings.fanout_cap == 4
        assert saved.default_vp == "steve" and not saved.settings.broadcast_when_unmentioned
        assert saved.settings.queue_mode == "followup"
        # The notice is stored: it is there after a reload too.
        await grace.reload()
        await expect(grace.get_by_test_id("connection")).to_have_attribute("data-state", "live")
        await expect(grace.get_by_test_id("notice").last).to_contain_text("changed the group")

        # Ada removes Grace: Grace's view drops the group at once.
        await ada.get_by_test_id("members-button").click()
        await (
            panel.locator('[data-testid="member"][data-user="grace"]')
            .get_by_test_id("remove-member")
            .click()
        )
        await expect(panel.get_by_test_id("member")).to_have_count(1)
        await expect(grace.get_by_test_id("group-item")).to_have_count(0)
        await expect(grace.get_by_test_id("group-title")).to_have_text("No group selected")
        await expect(grace.get_by_test_id("toast").last).to_contain_text("removed")
        await expect(ada.get_by_test_id("members-button")).to_have_text("People · 1 online")

        # Grace closes her browser tab: once she is invited back, Ada sees her offline.
        await grace.close()
        await panel.get_by_test_id("invite-input").fill("grace")
        await panel.get_by_test_id("invite-button").click()
        back = panel.locator('[data-testid="member"][data-user="grace"]')
        await expect(back).to_have_attribute("data-online", "false")
    assert not problems, "the pages reported errors:\n" + "\n".join(problems)


# Each person's message, and whether the thread row right after it holds
# exactly one reply and names it as the message it answers.
THREADS = """
() => [...document.querySelectorAll('[data-testid="user-message"]')].map((node) => {
  const row = node.nextElementSibling;
  const answers = row && row.dataset.trigger === node.dataset.messageId;
  return {
    text: node.querySelector('.user-text').textContent,
    mine: node.classList.contains('mine'),
    replies: answers ? row.querySelectorAll('[data-testid="vp-bubble"]').length : 0,
  };
})
"""


async def test_two_people_see_each_others_messages_live_and_threaded(
    chromium: Callable[..., AbstractAsyncContextManager[Any]],
    gateway_server: Callable[[Runtime], AbstractAsyncContextManager[LiveGateway]],
    make_runtime: MakeRuntime,
    store_factory: StoreFactory,
) -> None:
    """Ada and Grace, each in a browser of her own, share a group with Linus."""
    from playwright.async_api import expect

    runtime = make_runtime(engine={"model": PRIMARY_MODEL})
    store = await runtime.store()
    await add_user(store, USER, PASSWORD)
    await add_user(store, "grace", PASSWORD)
    await runtime.create_group("Pairing", ["linus"], members=[USER, "grace"])
    async with (
        gateway_server(runtime) as gateway,
        chromium() as first,
        chromium("second-profile") as second,
    ):
        ada, grace = [b.pages[0] if b.pages else await b.new_page() for b in (first, second)]
        problems = watch_page_errors(ada) + watch_page_errors(grace)
        await log_in(ada, gateway.url)
        await log_in(grace, gateway.url, "grace")
        said = {ada: "@linus what should we cache first?", grace: "@linus and what not at all?"}
        for page in (ada, grace):
            await expect(page.get_by_test_id("group-title")).to_have_text("Pairing")
        for page, text in said.items():
            await page.get_by_test_id("message-input").fill(text)
            await page.get_by_test_id("message-input").press("Enter")
            # Each sees the other's message live: once, and in the same order.
            for viewer in (ada, grace):
                await expect(viewer.get_by_test_id("user-message").last).to_contain_text(text)
        for page in (ada, grace):
            linus = bubble(page, "linus")
            await expect(linus).to_have_count(2, timeout=TURN_TIMEOUT_MS)
            for reply in (linus.first, linus.last):
                await expect(reply).to_have_attribute(
                    "data-state", "complete", timeout=TURN_TIMEOUT_MS
                )
        expected = [(said[ada], USER), (said[grace], "grace")]

        async def same_timeline(page: Any, me: str) -> None:
            threads = await page.evaluate(THREADS)
            # No message twice, and each has its reply right under it.
            want = [{"text": t, "mine": author == me, "replies": 1} for t, author in expected]
            assert threads == want, threads
            sent = page.locator('[data-testid="user-message"][data-state="sent"]')
            await expect(sent).to_have_count(2)

        await same_timeline(ada, USER)
        await same_timeline(grace, "grace")
        # After a reload the history shows the same timeline.
        await ada.reload()
        await expect(ada.get_by_test_id("connection")).to_have_attribute("data-state", "live")
        await expect(bubble(ada, "linus")).to_have_count(2)
        await same_timeline(ada, USER)
    assert not problems, "the pages reported errors:\n" + "\n".join(problems)
