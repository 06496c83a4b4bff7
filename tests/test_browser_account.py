"""The Account dialog in the web UI (real headless Chromium), one person in two browsers.

Ada, signed in in two browsers, opens Account in the first: she sets her
display name (the People panel shows it), sees both sessions with the first
marked as this browser, and ends the other: the second browser is sent back
to the login view at once. An API token made in the dialog is shown once,
works for a program, and is refused once revoked.

Run: ``.venv/bin/pytest tests/test_browser_account.py`` (see tests/fixtures/browser.py).
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


async def test_display_name_sessions_and_ending_another_browser(
    chromium: Callable[..., AbstractAsyncContextManager[Any]],
    gateway_server: Callable[[Runtime], AbstractAsyncContextManager[LiveGateway]],
    make_runtime: MakeRuntime,
) -> None:
    from playwright.async_api import expect

    runtime = make_runtime()
    store = await runtime.store()
    await add_user(store, USER, PASSWORD)
    await runtime.create_group("Team", ["linus"], members=[USER])
    async with (
        gateway_server(runtime) as gateway,
        chromium() as first,
        chromium("second-profile") as second,
    ):
        here, there = [b.pages[0] if b.pages else await b.new_page() for b in (first, second)]
        problems = watch_page_errors(here)
        await log_in(here, gateway.url)
        await log_in(there, gateway.url)

        await here.get_by_test_id("account-button").click()
        dialog = here.get_by_test_id("account-dialog")
        await expect(dialog).to_be_visible()
        await expect(dialog.get_by_test_id("account-username")).to_contain_text(USER)
        await dialog.get_by_test_id("account-display-name").fill("Ada Lovelace")
        await dialog.get_by_test_id("account-name-save").click()
        await expect(dialog.get_by_test_id("account-name-status")).to_have_text("Saved.")
        await expect(dialog.get_by_test_id("account-usage-total")).to_contain_text("0 tokens")

        sessions = dialog.get_by_test_id("account-session")
        await expect(sessions).to_have_count(2)
        mine = dialog.locator('[data-testid="account-session"][data-current="true"]')
        await expect(mine).to_have_count(1)
        await expect(mine.get_by_test_id("account-session-current")).to_have_text("this browser")
        await expect(mine.get_by_test_id("account-session-end")).to_have_count(0)
        other = dialog.locator('[data-testid="account-session"][data-current="false"]')
        await other.get_by_test_id("account-session-end").click()
        await expect(sessions).to_have_count(1)
        await expect(dialog.get_by_test_id("account-end-others")).to_be_disabled()

        # The other browser is logged out at once.
        await expect(there.get_by_test_id("login-form")).to_be_visible()
        await expect(there.get_by_test_id("login-error")).to_contain_text("log in again")
        # This one goes on.
        await dialog.get_by_test_id("account-close").click()
        await expect(here.get_by_test_id("connection")).to_have_attribute("data-state", "live")
        await here.get_by_test_id("members-button").click()
        await expect(here.get_by_test_id("member-list")).to_contain_text(
            f"Ada Lovelace · {USER} (you)"
        )
        assert problems == []


async def test_an_api_token_is_made_shown_once_used_and_revoked(
    chromium: Callable[..., AbstractAsyncContextManager[Any]],
    gateway_server: Callable[[Runtime], AbstractAsyncContextManager[LiveGateway]],
    make_runtime: MakeRuntime,
) -> None:
    import httpx
    from playwright.async_api import expect

    runtime = make_runtime()
    await add_user(await runtime.store(), USER, PASSWORD)
    async with gateway_server(runtime) as gateway, chromium() as browser:
        page = browser.pages[0] if browser.pages else await browser.new_page()
        problems = watch_page_errors(page)
        await log_in(page, gateway.url)
        await page.get_by_test_id("account-button").click()
        dialog = page.get_by_test_id("account-dialog")
        await expect(dialog.get_by_test_id("api-tokens-none")).to_be_visible()
        await dialog.get_by_test_id("api-token-name").fill("Desktop MCP client")
        await dialog.get_by_test_id("api-token-days").select_option("30")
        await dialog.get_by_test_id("api-token-make").click()
        value = dialog.get_by_test_id("api-token-value")
        await expect(value).to_be_visible()
        token = (await value.text_content() or "").strip()
        row = dialog.get_by_test_id("api-token")
        await expect(row).to_have_count(1)
        await expect(row).to_contain_text("Desktop MCP client")
        await expect(row).to_contain_text("not used yet")
        # The sign-in sessions do not list it.
        await expect(dialog.get_by_test_id("account-session")).to_have_count(1)

        async with httpx.AsyncClient(base_url=gateway.url) as program:
            me = await program.get("/api/me", headers={"Authorization": f"Bearer {token}"})
            assert me.status_code == 200 and me.json()["username"] == USER
            # Shown once: a reopened dialog lists the token, never its value.
            await dialog.get_by_test_id("account-close").click()
            await page.get_by_test_id("account-button").click()
            await expect(dialog.get_by_test_id("api-token-fresh")).to_be_hidden()
            assert token not in (await dialog.inner_text())
            await dialog.get_by_test_id("api-token-revoke").click()
            await expect(dialog.get_by_test_id("api-tokens-none")).to_be_visible()
            gone = await program.get("/api/me", headers={"Authorization": f"Bearer {token}"})
            assert gone.status_code == 401
        # The page's own session goes on.
        await dialog.get_by_test_id("account-close").click()
        await expect(page.get_by_test_id("connection")).to_have_attribute("data-state", "live")
        assert problems == []
