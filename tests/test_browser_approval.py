"""In a real browser: an administrator adds a local MCP server in the group settings,
asks @linus something its tool answers, allows the call in the approval dialog, and
sees the tool chip and the answer built on the tool's result."""

from __future__ import annotations

import sys
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.providers.base import ModelRequest
from engine.providers.scripted import Reply, ScriptedModel
from gateway.users import add_user
from tests.browser_helpers import (
    PASSWORD,
    TURN_TIMEOUT_MS,
    bubble,
    log_in,
    watch_page_errors,
)
from tests.fixtures.ray_cluster import MakeRuntime
from tests.group_helpers import last_is_tool_result

if TYPE_CHECKING:
    from coordinator.runtime import Runtime
    from tests.fixtures.browser import LiveGateway

SERVER = str(Path(__file__).resolve().parent / "fixtures" / "mcp_server.py")
ADMIN = "admin"
# Generous waits for steps that need the server (the machine may be busy).
SLOW_MS = 30_000


def add_with_the_server(request: ModelRequest) -> Reply:
    """Asks the MCP server to add 2 and 3, then answers with what it said."""
    if last_is_tool_result(request):
        return Reply(f"The server says 2 + 3 = {request.messages[-1].content}.")
    return Reply(tool_calls=[("calc__add", {"a": 2, "b": 3})])


async def test_an_admin_adds_a_server_and_approves_its_tool_in_the_dialog(
    chromium: Callable[..., AbstractAsyncContextManager[Any]],
    gateway_server: Callable[[Runtime], AbstractAsyncContextManager[LiveGateway]],
    make_runtime: MakeRuntime,
) -> None:
    from playwright.async_api import expect

    runtime = make_runtime(provider_overrides={"offline": ScriptedModel(add_with_the_server)})
    await add_user(await runtime.store(), ADMIN, PASSWORD)
    async with gateway_server(runtime) as gateway, chromium() as browser:
        page = browser.pages[0] if browser.pages else await browser.new_page()
        problems = watch_page_errors(page)
        # Made before the page loads (the sidebar form has tests of its own).
        await runtime.create_group("Maths", ["linus"], members=[ADMIN])
        await log_in(page, gateway.url, ADMIN)
        await page.get_by_test_id("group-item").filter(has_text="Maths").click(timeout=SLOW_MS)
        await expect(page.get_by_test_id("group-title")).to_have_text("Maths", timeout=SLOW_MS)

        # -- add the server in the group settings -------------------------------
        await page.get_by_test_id("settings-button").click()
        settings = page.get_by_test_id("settings-dialog")
        await expect(settings.get_by_test_id("mcp-empty")).to_be_visible(timeout=SLOW_MS)
        await settings.get_by_test_id("mcp-add-name").fill("calc")
        await settings.get_by_test_id("mcp-add-command").fill(sys.executable)
        await settings.get_by_test_id("mcp-add-args").fill(f"{SERVER}\nstdio")
        await settings.get_by_test_id("mcp-add-env").fill("FIXTURE_SECRET=hidden-value-123")
        await settings.get_by_test_id("mcp-add-submit").click()
        server = settings.get_by_test_id("mcp-server")
        await expect(server).to_have_count(1, timeout=SLOW_MS)
        await expect(server.get_by_test_id("mcp-state")).to_have_text("ready", timeout=30_000)
        await expect(server).to_contain_text("secret: FIXTURE_SECRET")
        await expect(server.get_by_test_id("mcp-use")).to_be_checked()
        assert "hidden-value-123" not in await page.content()
        await settings.get_by_test_id("settings-close").click()

        # -- ask linus; allow the call once in the dialog -----------------------
        box = page.get_by_test_id("message-input")
        await box.fill("@linus what is 2 + 3?")
        await box.press("Enter")
        dialog = page.get_by_test_id("ask-dialog")
        await expect(dialog).to_be_visible(timeout=TURN_TIMEOUT_MS)
        await expect(dialog.get_by_test_id("ask-tool-name")).to_have_text("calc__add")
        await expect(dialog.get_by_test_id("ask-tool-args")).to_have_text('{"a": 2, "b": 3}')
        await expect(dialog.get_by_test_id("ask-choice")).to_have_text(
            ["allow once", "always in this group", "deny"]
        )
        await dialog.get_by_test_id("ask-choice").filter(has_text="allow once").click()
        await expect(dialog).to_be_hidden(timeout=SLOW_MS)

        linus = bubble(page, "linus")
        await expect(linus).to_have_attribute("data-state", "complete", timeout=TURN_TIMEOUT_MS)
        chip = linus.locator('[data-testid="tool-chip"][data-tool="calc__add"]')
        await expect(chip).to_have_attribute("data-state", "ok", timeout=SLOW_MS)
        await chip.locator("button").click()
        await expect(chip.get_by_test_id("tool-result")).to_have_text("5")
        await expect(linus.get_by_test_id("bubble-text")).to_have_text("The server says 2 + 3 = 5.")
        assert problems == []
