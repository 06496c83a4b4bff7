"""The audit log in the web UI's admin panel (real headless Chromium): administrators only.

An administrator sees an "Admin" button in the sidebar, opens the panel's
Audit tab, finds the sign-ins and a failed one, filters by action, pages to
older entries and gets an export link carrying the same filters; a member
sees no button at all.

Run: ``.venv/bin/pytest tests/test_browser_audit.py`` (see tests/fixtures/browser.py).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import httpx
import pytest

from gateway.users import add_user
from store.audit import AuditAction, AuditEntry
from tests.browser_helpers import PASSWORD, USER, log_in, watch_page_errors
from tests.fixtures.browser import serve_gateway
from tests.fixtures.ray_cluster import MakeRuntime

pytestmark = [pytest.mark.timeout(300)]

AUDIT_JS = Path(__file__).resolve().parents[1] / "gateway" / "static" / "audit.js"


def test_the_dialog_offers_every_action_the_store_knows() -> None:
    source = AUDIT_JS.read_text()
    listed = re.search(r"AUDIT_ACTIONS = \[(.*?)\];", source, re.S)
    assert listed is not None
    assert re.findall(r"'([a-z_]+)'", listed.group(1)) == [a.value for a in AuditAction]


@pytest.mark.parametrize("store_factory", ["embedded"], indirect=True)
async def test_an_administrator_reads_filters_pages_and_exports_the_log(
    chromium: Callable[..., AbstractAsyncContextManager[Any]],
    make_runtime: MakeRuntime,
    tmp_path: Path,
) -> None:
    from playwright.async_api import expect

    runtime = make_runtime()
    store = await runtime.store()
    await add_user(store, USER, PASSWORD)
    await add_user(store, "admin", PASSWORD)
    # Sixty older entries, so the first page (50) has an "Older" button.
    for i in range(60):
        await store.append_audit(
            AuditEntry(at=1_000_000.0 + i, actor="bob", action=AuditAction.VP_ADDED, target="grp_x")
        )
    async with (
        serve_gateway(runtime, tmp_path / "gw", admins="admin") as gateway,
        chromium() as first,
        chromium("member") as second,
    ):
        async with httpx.AsyncClient(base_url=gateway.url) as http:
            wrong = await http.post("/api/login", json={"username": USER, "password": "nope"})
            assert wrong.status_code == 401
        admin = first.pages[0] if first.pages else await first.new_page()
        member = second.pages[0] if second.pages else await second.new_page()
        problems = watch_page_errors(admin) + watch_page_errors(member)
        await log_in(member, gateway.url)
        await log_in(admin, gateway.url, "admin")

        await expect(admin.get_by_test_id("admin-button")).to_be_visible()
        await expect(member.get_by_test_id("admin-button")).to_be_hidden()

        await admin.get_by_test_id("admin-button").click()
        panel = admin.get_by_test_id("admin-panel")
        await panel.get_by_test_id("admin-tab-audit").click()
        dialog = panel.get_by_test_id("admin-pane-audit")
        await expect(dialog).to_be_visible()
        rows = dialog.get_by_test_id("audit-entry")
        await expect(rows).to_have_count(50)
        # Newest first: the admin's sign-in, the member's, the failed one.
        await expect(rows.nth(0).get_by_test_id("audit-action")).to_have_text("sign_in")
        await expect(rows.nth(0).get_by_test_id("audit-actor")).to_have_text("admin")
        await expect(rows.nth(0).get_by_test_id("audit-address")).to_have_text("127.0.0.1")
        await expect(rows.nth(1).get_by_test_id("audit-actor")).to_have_text(USER)
        await expect(rows.nth(2).get_by_test_id("audit-action")).to_have_text("sign_in_failed")
        await expect(rows.nth(2).get_by_test_id("audit-actor")).to_have_text("—")
        await expect(rows.nth(2).get_by_test_id("audit-target")).to_have_text(USER)
        older = dialog.get_by_test_id("audit-older")
        await older.click()
        await expect(rows).to_have_count(63)
        await expect(older).to_be_hidden()

        await dialog.get_by_test_id("audit-action-filter").select_option("sign_in_failed")
        await dialog.get_by_test_id("audit-apply").click()
        await expect(rows).to_have_count(1)
        await expect(rows.first.get_by_test_id("audit-target")).to_have_text(USER)
        export = dialog.get_by_test_id("audit-export")
        await expect(export).to_have_attribute(
            "href", "/api/admin/audit.jsonl?action=sign_in_failed"
        )
        await panel.get_by_test_id("admin-close").click()
        await expect(panel).to_be_hidden()
        assert problems == []
