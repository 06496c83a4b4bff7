"""Small habits of a chat app in the web UI (real headless Chromium).

- Someone writes while you are scrolled up in a long history: the view
  stays where you read, and a "new messages" button counts what arrived;
  a click jumps to the latest and the button goes; scrolling down to the
  bottom yourself clears it too; at the bottom there is none. A message's
  Copy says "Copied" for a moment.
- The Export and Files menus close on Escape, on a press outside them and
  once an item is chosen.
- On a phone (390x844) the header is one row, at most 64 px high; a long
  group name is cut on screen but reachable in full (its tooltip, and a tap
  on the title shows it whole); the header's other tools are behind ⋮.

Run: ``.venv/bin/pytest tests/test_browser_habits.py`` (see tests/fixtures/browser.py).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from coordinator.commands import Ingest
from gateway.users import add_user
from tests.browser_helpers import (
    PASSWORD,
    USER,
    downloaded,
    log_in,
    screenshot_dir,
    watch_page_errors,
)
from tests.fixtures.ray_cluster import MakeRuntime

if TYPE_CHECKING:
    from coordinator.runtime import Runtime
    from tests.fixtures.browser import LiveGateway

pytestmark = [
    pytest.mark.parametrize("store_factory", ["embedded"], indirect=True),
    pytest.mark.timeout(300),
]

LONG_NAME = "Customer research and planning"
HISTORY = 40
PHONE = {"width": 390, "height": 844}

# How far the timeline is from its bottom, in px.
FROM_BOTTOM = (
    "() => { const s = document.getElementById('timeline-scroll');"
    " return s.scrollHeight - s.scrollTop - s.clientHeight; }"
)


async def _page(browser: Any) -> Any:
    return browser.pages[0] if browser.pages else await browser.new_page()


async def test_new_messages_while_scrolled_up_are_counted_and_a_click_jumps_to_them(
    chromium: Callable[..., AbstractAsyncContextManager[Any]],
    gateway_server: Callable[[Runtime], AbstractAsyncContextManager[LiveGateway]],
    make_runtime: MakeRuntime,
    tmp_path: Path,
) -> None:
    from playwright.async_api import expect

    runtime = make_runtime()
    await add_user(await runtime.store(), USER, PASSWORD)
    # Nobody to answer: bob's messages arrive, each with the server's notice that no VP
    # can answer it; notices are not counted, so the counts are exact.
    group = await runtime.create_group("Long history", [], members=[USER])
    for n in range(HISTORY):
        text = f"older message number {n}\n\nwith a second line"
        await runtime.send(Ingest(group.id, "bob", text))
    async with gateway_server(runtime) as gateway, chromium() as browser:
        await browser.grant_permissions(["clipboard-read", "clipboard-write"])
        page = await _page(browser)
        problems = watch_page_errors(page)
        await log_in(page, gateway.url)
        messages = page.get_by_test_id("user-message")
        await expect(messages).to_have_count(HISTORY)
        marker = page.get_by_test_id("new-messages")

        # At the bottom: a new message scrolls into view, and there is no marker.
        await runtime.send(Ingest(group.id, "bob", "while you watch"))
        await expect(messages).to_have_count(HISTORY + 1)
        assert await page.evaluate(FROM_BOTTOM) < 80
        await expect(marker).to_be_hidden()

        # Scrolled up: the view stays, the marker counts what arrived.
        await page.get_by_test_id("timeline").evaluate(
            "(t) => t.firstElementChild.scrollIntoView({ block: 'start' })"
        )
        top = await page.evaluate("document.getElementById('timeline-scroll').scrollTop")
        await runtime.send(Ingest(group.id, "bob", "first while you read"))
        await expect(marker).to_be_visible()
        await expect(marker).to_have_attribute("data-count", "1")
        await expect(marker).to_contain_text("1 new message")
        await runtime.send(Ingest(group.id, "bob", "second while you read"))
        await expect(marker).to_have_attribute("data-count", "2")
        await expect(marker).to_contain_text("2 new messages")
        await expect(messages).to_have_count(HISTORY + 3)
        assert await page.evaluate("document.getElementById('timeline-scroll').scrollTop") == top
        # The marker is in view over the timeline while you read the top.
        assert await marker.evaluate(
            "(m) => { const r = m.getBoundingClientRect();"
            " const s = document.getElementById('timeline-scroll').getBoundingClientRect();"
            " return r.top >= s.top && r.bottom <= s.bottom; }"
        )
        await page.screenshot(path=str(screenshot_dir(tmp_path) / "yeaft-ui-new-messages.png"))

        # A click jumps to the latest, and the marker goes.
        await marker.click()
        await expect(marker).to_be_hidden()
        assert await page.evaluate(FROM_BOTTOM) < 80
        await expect(messages.last).to_be_in_viewport()
        await expect(messages.last).to_contain_text("second while you read")

        # Scrolled up again; scrolling down to the bottom by hand clears it too.
        await page.evaluate("document.getElementById('timeline-scroll').scrollTop = 0")
        await runtime.send(Ingest(group.id, "bob", "third while you read"))
        await expect(marker).to_have_attribute("data-count", "1")
        await page.locator("#timeline-scroll").hover()
        await page.mouse.wheel(0, 100_000)
        await expect(marker).to_be_hidden()
        assert await page.evaluate(FROM_BOTTOM) < 80

        # Copy on a message says so for a moment, where it is seen.
        last = messages.last
        await last.hover()
        copy = last.get_by_test_id("copy-message")
        await copy.click()
        await expect(copy).to_have_text("Copied")
        await expect(copy).to_be_visible()
        assert await page.evaluate("navigator.clipboard.readText()") == "third while you read"
        await expect(copy).to_have_text("Copy")
    assert not problems, "the page reported errors:\n" + "\n".join(problems)


async def test_export_and_files_menus_close_on_escape_outside_press_and_use(
    chromium: Callable[..., AbstractAsyncContextManager[Any]],
    gateway_server: Callable[[Runtime], AbstractAsyncContextManager[LiveGateway]],
    make_runtime: MakeRuntime,
) -> None:
    from playwright.async_api import expect

    runtime = make_runtime()
    await add_user(await runtime.store(), USER, PASSWORD)
    group = await runtime.create_group("Menus", ["linus"], members=[USER])
    await runtime.send(Ingest(group.id, "bob", "something to export"))
    async with gateway_server(runtime) as gateway, chromium() as browser:
        page = await _page(browser)
        problems = watch_page_errors(page)
        await log_in(page, gateway.url)
        for name in ("export", "files"):
            menu = page.get_by_test_id(f"{name}-menu")
            toggle = page.get_by_test_id(f"{name}-toggle")
            # Escape.
            await toggle.click()
            await expect(menu).to_have_attribute("open", "")
            await page.keyboard.press("Escape")
            await expect(menu).not_to_have_attribute("open", "")
            # A press outside (on the timeline).
            await toggle.click()
            await expect(menu).to_have_attribute("open", "")
            await page.mouse.click(600, 500)  # the timeline
            await expect(menu).not_to_have_attribute("open", "")
            # Opening one menu closes the other.
            await toggle.click()
            other = "files" if name == "export" else "export"
            await page.get_by_test_id(f"{other}-toggle").click()
            await expect(menu).not_to_have_attribute("open", "")
            await expect(page.get_by_test_id(f"{other}-menu")).to_have_attribute("open", "")
            await page.keyboard.press("Escape")
        # After use: choosing an export closes the menu, and the download still comes.
        await page.get_by_test_id("export-toggle").click()
        async with page.expect_download() as info:
            await page.get_by_test_id("export-markdown").click()
        assert "something to export" in await downloaded(info)
        await expect(page.get_by_test_id("export-menu")).not_to_have_attribute("open", "")
    assert not problems, "the page reported errors:\n" + "\n".join(problems)


async def test_the_phone_header_is_one_row_and_the_whole_group_name_is_reachable(
    chromium: Callable[..., AbstractAsyncContextManager[Any]],
    gateway_server: Callable[[Runtime], AbstractAsyncContextManager[LiveGateway]],
    make_runtime: MakeRuntime,
    tmp_path: Path,
) -> None:
    from playwright.async_api import expect

    runtime = make_runtime()
    await add_user(await runtime.store(), USER, PASSWORD)
    await runtime.create_group(LONG_NAME, ["linus", "steve", "kent"], members=[USER])
    async with gateway_server(runtime) as gateway, chromium() as browser:
        page = await _page(browser)
        problems = watch_page_errors(page)
        await page.set_viewport_size(PHONE)
        await log_in(page, gateway.url)
        title = page.get_by_test_id("group-title")
        await expect(title).to_have_text(LONG_NAME)
        await expect(page.get_by_test_id("vp-presence")).to_have_count(3)
        head = page.locator(".chat-head")
        box = await head.bounding_box()
        assert box is not None and box["height"] <= 64, box
        # The name is cut on screen, yet reachable whole: a tooltip, and a tap.
        button = page.get_by_test_id("group-title-button")
        await expect(button).to_have_attribute("title", LONG_NAME)
        await page.screenshot(path=str(screenshot_dir(tmp_path) / "yeaft-ui-phone.png"))
        card = page.get_by_test_id("title-full")
        await expect(card).to_be_hidden()
        await button.click()
        await expect(card).to_be_visible()
        await expect(card).to_have_text(LONG_NAME)
        await expect(button).to_have_attribute("aria-expanded", "true")
        whole = await card.evaluate(
            "(c) => c.scrollWidth <= c.clientWidth && c.scrollHeight <= c.clientHeight"
            " && c.getBoundingClientRect().right <= window.innerWidth"
        )
        assert whole, "the full name is clipped"
        await page.screenshot(path=str(screenshot_dir(tmp_path) / "yeaft-ui-phone-title.png"))
        box = await head.bounding_box()
        assert box is not None and box["height"] <= 64, box
        await page.keyboard.press("Escape")
        await expect(card).to_be_hidden()

        # The rest of the header is behind ⋮, a panel that closes like a menu.
        await expect(page.get_by_test_id("members-button")).to_be_hidden()
        more = page.get_by_test_id("head-more")
        await more.click()
        await expect(page.get_by_test_id("members-button")).to_be_visible()
        await expect(page.get_by_test_id("export-toggle")).to_be_visible()
        await page.mouse.click(200, 500)  # the timeline
        await expect(page.get_by_test_id("members-button")).to_be_hidden()
        await more.click()
        await page.get_by_test_id("members-button").click()
        await expect(page.get_by_test_id("members-dialog")).to_be_visible()
        await expect(more).to_have_attribute("aria-expanded", "false")
    assert not problems, "the page reported errors:\n" + "\n".join(problems)
