"""Signing in with the team's identity provider in Chromium, through its real pages.

The provider is the real ``oidc-provider`` (``tests/fixtures/oidc.py``): the
login page offers "Sign in with Test ID", the provider's own login and
consent pages are filled in as a person would, and the app opens signed in.
With ``YEAFT_OIDC_ONLY`` the password form is not offered.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

from tests.browser_helpers import watch_page_errors
from tests.fixtures.oidc import Signed

# The provider and the app each load their pages on a busy machine.
SLOW_MS = 30_000


async def test_a_person_signs_in_with_the_provider(
    chromium: Callable[..., AbstractAsyncContextManager[Any]], signed: Signed
) -> None:
    from playwright.async_api import expect

    async with signed() as (gateway, provider), chromium() as browser:
        page = browser.pages[0] if browser.pages else await browser.new_page()
        await page.goto(gateway.url)
        button = page.get_by_test_id("login-oidc")
        await expect(button).to_have_text("Sign in with Test ID", timeout=SLOW_MS)
        await expect(page.get_by_test_id("login-password")).to_be_visible()
        await button.click()

        # The provider's own pages: its login, then its consent.
        await page.wait_for_url(f"{provider.issuer}/**")
        await page.locator("input[name=login]").fill("alice")
        await page.locator("input[name=password]").fill("any password")
        await page.locator("button[type=submit]").click()
        await page.locator("button[type=submit]", has_text="Continue").click()

        # Back in the app, signed in as the account the sign-in made.
        await page.wait_for_url(f"{gateway.url}**")
        await expect(page.get_by_test_id("message-input")).to_be_visible(timeout=SLOW_MS)
        me = await page.evaluate("fetch('/api/me').then((r) => r.json())")
        assert me["username"] == "alice"
        # The session holds on a fresh load (the provider's pages, which load
        # things of their own, are behind us now).
        problems = watch_page_errors(page)
        await page.reload()
        await expect(page.get_by_test_id("message-input")).to_be_visible(timeout=SLOW_MS)
        assert problems == []


async def test_only_the_provider_is_offered_when_passwords_are_turned_off(
    chromium: Callable[..., AbstractAsyncContextManager[Any]], signed: Signed
) -> None:
    from playwright.async_api import expect

    async with signed(oidc_only=True) as (gateway, _), chromium() as browser:
        page = browser.pages[0] if browser.pages else await browser.new_page()
        await page.goto(gateway.url)
        await expect(page.get_by_test_id("login-oidc")).to_be_visible(timeout=SLOW_MS)
        await expect(page.get_by_test_id("login-password")).to_be_hidden()
        await expect(page.get_by_test_id("login-submit")).to_be_hidden()
