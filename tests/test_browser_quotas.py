"""The quota meter in the composer and the admin usage view (real headless Chromium).

A person with a daily quota sees "0% of today's budget" when they open a
group, and the meter moves after a turn, pushed by the server; an
administrator mounts the usage view (``adminusage.js``) and finds that
person's turn in its totals, tables and chart.

Run: ``.venv/bin/pytest tests/test_browser_quotas.py`` (see tests/fixtures/browser.py).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import pytest

from gateway.users import add_user
from store.quotas import PersonQuota
from tests.browser_helpers import (
    PASSWORD,
    TURN_TIMEOUT_MS,
    USER,
    bubble,
    create_group,
    log_in,
    watch_page_errors,
)
from tests.fixtures.browser import serve_gateway
from tests.fixtures.ray_cluster import MakeRuntime

pytestmark = [pytest.mark.timeout(300)]

MOUNT = "() => import('/static/adminusage.js').then((m) => m.mountUsage(document.body).ready)"


@pytest.mark.parametrize("store_factory", ["embedded"], indirect=True)
async def test_the_meter_moves_after_a_turn_and_the_admin_sees_the_usage(
    chromium: Callable[..., AbstractAsyncContextManager[Any]],
    make_runtime: MakeRuntime,
    tmp_path: Path,
) -> None:
    from playwright.async_api import expect

    runtime = make_runtime()
    store = await runtime.store()
    await add_user(store, USER, PASSWORD)
    await add_user(store, "admin", PASSWORD)
    await store.set_person_quota(USER, PersonQuota(tokens_per_day=20_000))
    async with (
        serve_gateway(runtime, tmp_path / "gw", admins="admin") as gateway,
        chromium() as first,
        chromium("admin") as second,
    ):
        page = first.pages[0] if first.pages else await first.new_page()
        admin = second.pages[0] if second.pages else await second.new_page()
        problems = watch_page_errors(page) + watch_page_errors(admin)
        await log_in(page, gateway.url)
        await create_group(page, "Budgeted", ["linus"])

        meter = page.get_by_test_id("quota-meter")
        await expect(meter).to_be_visible()
        await expect(page.get_by_test_id("quota-meter-text")).to_have_text("0% of today's budget")
        await expect(meter).to_have_attribute("data-level", "ok")

        box = page.get_by_test_id("message-input")
        await box.fill("@linus how much does this cost?")
        await box.press("Enter")
        await expect(bubble(page, "linus").last).to_have_attribute(
            "data-state", "complete", timeout=TURN_TIMEOUT_MS
        )
        # Pushed after the turn: no longer 0%, still today's own budget.
        await expect(page.get_by_test_id("quota-meter-text")).to_have_text(
            re.compile(r"^(?!0% )\d+(\.\d)?% of today's budget$"), timeout=TURN_TIMEOUT_MS
        )
        assert "of 20,000 tokens" in (await meter.get_attribute("title") or "")

        await log_in(admin, gateway.url, "admin")
        await admin.evaluate(MOUNT)
        view = admin.get_by_test_id("admin-usage")
        await expect(view).to_have_attribute("data-state", "ready")
        await expect(admin.get_by_test_id("usage-totals")).to_contain_text("input tokens")
        await expect(admin.get_by_test_id("usage-totals")).not_to_contain_text(" 0 input tokens")
        await expect(admin.get_by_test_id("usage-by-user").locator("tbody tr")).to_have_count(1)
        await expect(admin.get_by_test_id("usage-by-user")).to_contain_text(USER)
        await expect(admin.get_by_test_id("usage-by-groupId")).to_contain_text("Budgeted")
        await expect(admin.get_by_test_id("usage-by-vp")).to_contain_text("linus")
        await expect(admin.get_by_test_id("usage-by-model")).to_contain_text("offline:")
        await expect(admin.locator('[data-testid="usage-chart"] canvas')).to_have_count(1)

        # A range before any turn: nothing in it.
        await admin.get_by_test_id("usage-from").fill("2020-01-01")
        await admin.get_by_test_id("usage-to").fill("2020-01-31")
        await admin.get_by_test_id("usage-show").click()
        await expect(admin.get_by_test_id("usage-totals")).to_have_text(
            "2020-01-01 to 2020-01-31: 0 input tokens, 0 output tokens, $0.0000"
        )
        await expect(admin.get_by_test_id("usage-by-user").locator("tbody tr")).to_have_count(0)
        # A range the server refuses is said so, in the view.
        await admin.get_by_test_id("usage-from").fill("2020-02-01")
        await admin.get_by_test_id("usage-show").click()
        await expect(admin.get_by_test_id("usage-error")).to_contain_text(
            "from must not be after to"
        )
        # The member is no administrator: the same view gets the server's refusal.
        await page.evaluate(MOUNT)
        await expect(page.get_by_test_id("usage-error")).to_contain_text("administrator")
        assert [p for p in problems if "403" not in p and "422" not in p] == []
