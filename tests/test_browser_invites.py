"""Invite links in the web UI (real headless Chromium): made by an administrator, followed by a
new person in a browser of their own.

Ada, an administrator, opens the People dialog of her group, makes a link
there ("Invite link…") and copies it. Nina, in a fresh browser with no
account, follows it: she sets a username, a display name and a password,
lands in the group signed in and sees it, and Ada sees her among the
members. The link had one use: a third browser following it gets a page
that says so. Another newcomer follows a link with "Sign in with ..." and
comes back from the identity provider's own pages into the group.

Run: ``.venv/bin/pytest tests/test_browser_invites.py`` (see tests/fixtures/browser.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any

import pytest

from gateway import invites
from gateway.roles import ROLE_FIELD
from gateway.users import add_user
from tests.browser_helpers import PASSWORD, USER, log_in, watch_page_errors
from tests.fixtures.oidc import Signed
from tests.fixtures.ray_cluster import MakeRuntime

if TYPE_CHECKING:
    from coordinator.runtime import Runtime
    from tests.fixtures.browser import LiveGateway

pytestmark = [
    pytest.mark.parametrize("store_factory", ["embedded"], indirect=True),
    pytest.mark.timeout(300),
]

# The provider and the app each load their pages on a busy machine.
SLOW_MS = 30_000


async def test_an_admin_makes_a_link_and_a_new_person_follows_it_into_the_group(
    chromium: Callable[..., AbstractAsyncContextManager[Any]],
    gateway_server: Callable[[Runtime], AbstractAsyncContextManager[LiveGateway]],
    make_runtime: MakeRuntime,
) -> None:
    from playwright.async_api import expect

    runtime = make_runtime()
    store = await runtime.store()
    await add_user(store, USER, PASSWORD)
    record = await store.get_user(USER)
    assert record is not None
    await store.put_user({**record, ROLE_FIELD: "admin"})
    group = await runtime.create_group("Team", ["linus"], members=[USER])
    async with (
        gateway_server(runtime) as gateway,
        chromium() as first,
        chromium("newcomer-profile") as second,
        chromium("latecomer-profile") as third,
    ):
        origin = gateway.url.rstrip("/")
        await first.grant_permissions(["clipboard-read", "clipboard-write"], origin=origin)
        ada = first.pages[0] if first.pages else await first.new_page()
        nina = second.pages[0] if second.pages else await second.new_page()
        problems = watch_page_errors(ada) + watch_page_errors(nina)
        await log_in(ada, gateway.url)
        await expect(ada.get_by_test_id("group-title")).to_have_text("Team")

        # Ada makes a one-use link from the group's People dialog, and copies it.
        await ada.get_by_test_id("members-button").click()
        people = ada.get_by_test_id("members-dialog")
        await people.get_by_test_id("invite-link-button").click()
        dialog = ada.get_by_test_id("invite-dialog")
        await expect(dialog.get_by_test_id("invite-fixed-group")).to_contain_text("Team")
        await expect(dialog.get_by_test_id("invite-group")).to_be_hidden()
        await dialog.get_by_test_id("invite-expiry").select_option(label="1 day")
        await dialog.get_by_test_id("invite-uses").fill("1")
        await dialog.get_by_test_id("invite-make").click()
        field = dialog.get_by_test_id("invite-link")
        await expect(dialog.get_by_test_id("invite-result")).to_be_visible()
        link = await field.input_value()
        assert link.startswith(f"{origin}/invite/inv_"), link
        await dialog.get_by_test_id("invite-copy").click()
        await expect(dialog.get_by_test_id("invite-copied")).to_have_text("Copied.")
        assert await ada.evaluate("navigator.clipboard.readText()") == link
        await dialog.get_by_test_id("invite-close").click()
        await expect(dialog).to_be_hidden()
        made = await store.list_invites(group.id)
        assert [(i.max_uses, i.created_by) for i in made] == [(1, USER)]
        assert 86_000 < made[0].expires_at - made[0].created_at <= 86_400

        # Nina follows it in a browser of her own and sets her password.
        await nina.goto(link)
        await expect(nina.get_by_test_id("invite-lede")).to_have_text(
            f"{USER} invited you to join “Team”."
        )
        await expect(nina.get_by_test_id("login-form")).to_be_hidden()
        await nina.get_by_test_id("invite-username").fill("nina")
        await nina.get_by_test_id("invite-display-name").fill("Nina Simone")
        await nina.get_by_test_id("invite-password").fill("a fine long passphrase")
        await nina.get_by_test_id("invite-password-again").fill("a fine long passphras")
        await nina.get_by_test_id("invite-submit").click()
        await expect(nina.get_by_test_id("invite-accept-error")).to_have_text(
            "The two passwords differ."
        )
        await nina.get_by_test_id("invite-password-again").fill("a fine long passphrase")
        await nina.get_by_test_id("invite-submit").click()

        # She lands in the group, signed in, and sees it.
        await nina.wait_for_url(f"{origin}/#g={group.id}")
        await expect(nina.get_by_test_id("me")).to_have_text("nina")
        await expect(nina.get_by_test_id("group-title")).to_have_text("Team")
        await expect(nina.get_by_test_id("connection")).to_have_attribute("data-state", "live")
        await expect(nina.get_by_test_id("message-input")).to_be_visible()
        # Ada's People dialog, still open under the invite dialog, shows her, live.
        await expect(people).to_be_visible()
        await expect(people.locator('[data-testid="member"][data-user="nina"]')).to_have_count(1)

        # The link had one use: a third browser gets a page that says so.
        late = third.pages[0] if third.pages else await third.new_page()
        reply = await late.goto(link)
        assert reply is not None and reply.status == 410
        await expect(late.get_by_test_id("invite-message")).to_contain_text(
            "used as many times as it may be"
        )
        assert problems == []


async def test_a_new_person_follows_a_link_through_the_identity_provider(
    chromium: Callable[..., AbstractAsyncContextManager[Any]], signed: Signed
) -> None:
    from playwright.async_api import expect

    async with signed() as (gateway, provider), chromium() as browser:
        group = await gateway.runtime.create_group("Team", ["linus"], members=["admin"])
        store = await gateway.runtime.store()
        invite, token = await invites.make(
            store, "admin", ttl_s=3600, max_uses=1, group_id=group.id, now=time.time()
        )
        origin = gateway.url.rstrip("/")
        page = browser.pages[0] if browser.pages else await browser.new_page()
        await page.goto(invites.link(origin, token))
        button = page.get_by_test_id("invite-oidc")
        await expect(button).to_have_text("Sign in with Test ID", timeout=SLOW_MS)
        await expect(page.get_by_test_id("invite-accept-form")).to_be_visible()
        await button.click()

        # The provider's own pages: its login, then its consent.
        await page.wait_for_url(f"{provider.issuer}/**")
        await page.locator("input[name=login]").fill("alice")
        await page.locator("input[name=password]").fill("any password")
        await page.locator("button[type=submit]").click()
        await page.locator("button[type=submit]", has_text="Continue").click()

        # Back in the app, signed in as the account the sign-in made, in the group.
        await page.wait_for_url(f"{origin}/#g={group.id}", timeout=SLOW_MS)
        await expect(page.get_by_test_id("me")).to_have_text("alice", timeout=SLOW_MS)
        await expect(page.get_by_test_id("group-title")).to_have_text("Team")
        stored = await store.get_invite(invite.id)
        assert stored is not None and stored.uses == 1
