"""The Files menu in the web UI (real headless Chromium): a file a VP wrote is listed and
downloads, and another VP reads it back from the group workspace with its tool.

Run: ``.venv/bin/pytest tests/test_browser_files.py`` (see tests/fixtures/browser.py).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any

import pytest

from engine.providers.base import ModelRequest
from engine.providers.scripted import Reply, ScriptedModel
from gateway.users import add_user
from tests.browser_helpers import PASSWORD, TURN_TIMEOUT_MS, USER, bubble, log_in, watch_page_errors
from tests.fixtures.ray_cluster import MakeRuntime
from tests.group_helpers import last_is_tool_result
from tests.test_browser_messages import downloaded
from tests.test_workspace_http import REPORT, writes_a_report

if TYPE_CHECKING:
    from coordinator.runtime import Runtime
    from tests.fixtures.browser import LiveGateway

pytestmark = [
    pytest.mark.parametrize("store_factory", ["embedded"], indirect=True),
    pytest.mark.timeout(300),
]


def writes_or_reads(request: ModelRequest) -> Reply:
    """Reads ``out/report.html`` back when asked to read, else writes it (``writes_a_report``)."""
    if last_is_tool_result(request):
        return Reply(f"The tool said: {request.messages[-1].content}")
    if "read it" in str(request.messages[-1].content):
        return Reply(tool_calls=[("read_file", {"path": "out/report.html"})])
    return writes_a_report(request)


async def test_a_file_a_vp_wrote_is_listed_downloads_and_another_vp_reads_it(
    chromium: Callable[..., AbstractAsyncContextManager[Any]],
    gateway_server: Callable[[Runtime], AbstractAsyncContextManager[LiveGateway]],
    make_runtime: MakeRuntime,
) -> None:
    from playwright.async_api import expect

    runtime = make_runtime(provider_overrides={"offline": ScriptedModel(writes_or_reads)})
    await add_user(await runtime.store(), USER, PASSWORD)
    await runtime.create_group("Files", ["linus", "steve"], members=[USER])
    async with gateway_server(runtime) as gateway, chromium() as browser:
        page = browser.pages[0] if browser.pages else await browser.new_page()
        problems = watch_page_errors(page)
        await log_in(page, gateway.url)
        await page.get_by_test_id("files-toggle").click()
        await expect(page.get_by_test_id("files-empty")).to_be_visible()
        await page.get_by_test_id("files-toggle").click()  # closed again

        box = page.get_by_test_id("message-input")
        await box.fill("@linus write the report !approve write_file")
        await box.press("Enter")
        await expect(bubble(page, "linus")).to_have_attribute(
            "data-state", "complete", timeout=TURN_TIMEOUT_MS
        )
        await page.get_by_test_id("files-toggle").click()
        link = page.get_by_test_id("file-link")
        await expect(link).to_have_count(1)
        await expect(link).to_have_attribute("data-path", "out/report.html")
        async with page.expect_download() as info:
            await link.click()
        assert await downloaded(info) == REPORT
        assert (await info.value).suggested_filename == "report.html"
        # Choosing a file closed the menu.
        await expect(page.get_by_test_id("files-menu")).not_to_have_attribute("open", "")

        # Another VP reads the file from the group workspace (reads need no approval).
        await box.fill("@steve read it back")
        await box.press("Enter")
        steve = bubble(page, "steve")
        await expect(steve).to_have_attribute("data-state", "complete", timeout=TURN_TIMEOUT_MS)
        chip = steve.locator('[data-testid="tool-chip"][data-tool="read_file"]')
        await expect(chip).to_have_attribute("data-state", "ok")
        await expect(steve.get_by_test_id("bubble-text")).to_contain_text("cache the sessions")
    assert not problems, "the page reported errors:\n" + "\n".join(problems)
