"""The admin panel in the web UI (real headless Chromium): people, groups, usage.

An administrator opens the panel, finds a person by searching, and disables
them: the person's open page (another browser, with its WebSocket live) is
signed out at once and back at the login, where the right password is now
refused with a clear word. The Groups tab lists the group that person made,
with its owner and size, and deletes it on a second click; the Usage tab
shows its view and "Invite someone…" makes a link. A member sees no
"Admin" button.

Run: ``.venv/bin/pytest tests/test_browser_admin.py`` (see tests/fixtures/browser.py).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import pytest

from gateway.users import add_user
from tests.browser_helpers import PASSWORD, USER, create_group, log_in, watch_page_errors
from tests.fixtures.browser import serve_gateway
from tests.fixtures.ray_cluster import MakeRuntime

pytestmark = [pytest.mark.timeout(300)]


@pytest.mark.parametrize("store_factory", ["embedded"], indirect=True)
async def test_an_administrator_disables_a_person_whose_open_page_is_signed_out(
    chromium: Callable[..., AbstractAsyncContextManager[Any]],
    make_runtime: MakeRuntime,
    tmp_path: Path,
) -> None:
    from playwright.async_api import expect

    runtime = make_runtime()
    store = await runtime.store()
    for name in (USER, "admin", "bob"):
        await add_user(store, name, PASSWORD)
    async with (
        serve_gateway(runtime, tmp_path / "gw", admins="admin") as gateway,
        chromium() as first,
        chromium("person") as second,
    ):
        admin = first.pages[0] if first.pages else await first.new_page()
        person = second.pages[0] if second.pages else await second.new_page()
        problems = watch_page_errors(admin)
        await log_in(person, gateway.url)
        await create_group(person, "Ada's notes", ["linus"])
        await expect(person.get_by_test_id("connection")).to_have_attribute("data-state", "live")
        await expect(person.get_by_test_id("admin-button")).to_be_hidden()

        await log_in(admin, gateway.url, "admin")
        await admin.get_by_test_id("admin-button").click()
        panel = admin.get_by_test_id("admin-panel")
        await expect(panel).to_be_visible()
        rows = panel.get_by_test_id("admin-person")
        await expect(rows).to_have_count(3)
        # One's own row offers no "Disable".
        mine = panel.locator('[data-testid="admin-person"][data-username="admin"]')
        await expect(mine.get_by_test_id("admin-person-role")).to_have_text("Make member")
        await expect(mine.get_by_test_id("admin-person-disable")).to_have_count(0)

        await panel.get_by_test_id("admin-people-search").fill("lovel")
        await expect(rows).to_have_count(1)
        ada = rows.first
        await expect(ada.get_by_test_id("admin-person-name")).to_have_text(USER)
        await expect(ada.get_by_test_id("admin-person-state")).to_have_text("active")
        await ada.get_by_test_id("admin-person-disable").click()
        await expect(ada.get_by_test_id("admin-person-state")).to_contain_text("disabled")
        await expect(ada.get_by_test_id("admin-person-state")).to_contain_text("by admin")
        await expect(ada).to_have_attribute("data-disabled", "true")

        # The person's page lost its socket and is back at the login.
        await expect(person.get_by_test_id("login-form")).to_be_visible()
        await expect(person.locator("#app-view")).to_be_hidden()
        await person.get_by_test_id("login-username").fill(USER)
        await person.get_by_test_id("login-password").fill(PASSWORD)
        await person.get_by_test_id("login-submit").click()
        await expect(person.get_by_test_id("login-error")).to_contain_text("disabled")

        # Re-enabled, the same row offers "Disable" again.
        await ada.get_by_test_id("admin-person-enable").click()
        await expect(ada.get_by_test_id("admin-person-state")).to_have_text("active")

        await panel.get_by_test_id("admin-tab-groups").click()
        groups = panel.get_by_test_id("admin-group")
        await expect(groups).to_have_count(1)
        await expect(groups.first.get_by_test_id("admin-group-name")).to_have_text("Ada's notes")
        await expect(groups.first.get_by_test_id("admin-group-owner")).to_have_text(USER)
        await expect(groups.first.get_by_test_id("admin-group-size")).to_have_text("1")
        delete = groups.first.get_by_test_id("admin-group-delete")
        await delete.click()
        await expect(delete).to_have_text("Really delete?")
        await delete.click()
        await expect(panel.get_by_test_id("admin-groups-empty")).to_be_visible()
        assert await store.list_groups() == []

        # Usage: the view's range, totals and tables (its figures: test_browser_quotas.py).
        await panel.get_by_test_id("admin-tab-usage").click()
        usage = panel.get_by_test_id("admin-pane-usage")
        await expect(usage.get_by_test_id("usage-from")).to_be_visible()
        await expect(usage.get_by_test_id("usage-totals")).to_be_visible()

        # People: "Invite someone…" opens the invite dialog over the panel and makes a link.
        await panel.get_by_test_id("admin-tab-people").click()
        await panel.get_by_test_id("admin-invite").click()
        await admin.get_by_test_id("invite-make").click()
        await expect(admin.get_by_test_id("invite-link")).to_have_value(
            re.compile(r"^http://127\.0\.0\.1:\d+/invite/inv_\w+\.\S+$")
        )
        assert len(await store.list_invites()) == 1
        await admin.get_by_test_id("invite-close").click()
        await panel.get_by_test_id("admin-close").click()
        await expect(panel).to_be_hidden()
        assert problems == []
