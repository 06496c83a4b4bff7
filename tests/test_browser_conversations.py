"""A one-to-one conversation in the web UI (real headless Chromium).

A person starts a conversation with Linus from the sidebar's "New
conversation" form, watches his reply stream into a bubble (through the
seed's chat mode: ``resume_conversation``, ``send_message``,
``claude_output``), stops a second reply mid-stream, finds the conversation
named after the first message, and after a reload finds it again with its
history. Its groups list stays empty: a conversation is not a group.

Run: ``.venv/bin/pytest tests/test_browser_conversations.py`` (see tests/fixtures/browser.py).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from engine.providers.base import ModelRequest
from engine.providers.scripted import Reply, ScriptedModel
from gateway.users import add_user
from tests.browser_helpers import (
    PASSWORD,
    RECORD_BUBBLES,
    TURN_TIMEOUT_MS,
    USER,
    bubble,
    log_in,
    screenshot_dir,
    streamed_lengths,
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

ANSWER = "Keep the cache beside the code that owns the data, and measure before adding layers."


def linus(request: ModelRequest) -> Reply:
    """Answers at once; a request to go on forever streams a little, then hangs until stopped."""
    said = next((str(m.content) for m in reversed(request.messages) if m.role == "user"), "")
    if "forever" in said:
        return Reply("and so on " * 100, hang_after=4)
    return Reply(ANSWER)


async def test_a_conversation_streams_stops_and_survives_a_reload(
    chromium: Callable[..., AbstractAsyncContextManager[Any]],
    gateway_server: Callable[[Runtime], AbstractAsyncContextManager[LiveGateway]],
    make_runtime: MakeRuntime,
    store_factory: StoreFactory,
    tmp_path: Path,
) -> None:
    from playwright.async_api import expect

    runtime = make_runtime(
        provider_overrides={"offline": ScriptedModel(linus)},
        engine={"model": "offline:default?tps=40"},
    )
    await add_user(await runtime.store(), USER, PASSWORD)
    async with gateway_server(runtime) as gateway, chromium() as browser:
        page = browser.pages[0] if browser.pages else await browser.new_page()
        problems = watch_page_errors(page)
        await log_in(page, gateway.url)
        await expect(page.get_by_test_id("conversation-list")).to_contain_text("No conversations")

        # -- start one from the sidebar ----------------------------------------
        await page.get_by_test_id("new-conversation-toggle").click()
        await page.get_by_test_id("new-conversation-vp").select_option("linus")
        await page.get_by_test_id("new-conversation-submit").click()
        current = page.locator('[data-testid="conversation-item"][aria-current="true"]')
        await expect(current).to_have_count(1)
        await expect(page.get_by_test_id("group-title")).to_have_text("Chat with Linus")
        await expect(page.get_by_test_id("group-list")).to_contain_text("No groups yet")
        box = page.get_by_test_id("message-input")
        await expect(box).to_have_attribute("placeholder", "Message Linus")

        # -- a streamed reply ---------------------------------------------------
        await page.evaluate(RECORD_BUBBLES)
        await box.fill("where should the cache live?")
        await box.press("Enter")
        reply = bubble(page, "linus")
        await expect(reply).to_have_attribute("data-state", "complete", timeout=TURN_TIMEOUT_MS)
        await expect(reply.get_by_test_id("bubble-text")).to_have_text(ANSWER)
        samples = await page.evaluate("window.__bubbleSamples")
        assert len(streamed_lengths(samples, "linus")) >= 2, "the reply did not stream"
        user_message = page.get_by_test_id("user-message")
        await expect(user_message).to_have_count(1)
        await expect(user_message).to_contain_text("where should the cache live?")
        # The conversation is named after its first message.
        await expect(current).to_contain_text("where should the cache live?")
        await expect(page.get_by_test_id("group-title")).to_have_text(
            "where should the cache live?"
        )

        # -- a reply stopped mid-stream -------------------------------------------
        await box.fill("go on forever")
        await box.press("Enter")
        second = reply.nth(1)
        await expect(second).to_have_attribute("data-state", "streaming", timeout=TURN_TIMEOUT_MS)
        await page.get_by_test_id("stop-all").click()
        await expect(second).to_have_attribute("data-state", "cancelled", timeout=TURN_TIMEOUT_MS)
        await expect(page.get_by_test_id("stop-all")).to_be_hidden()
        await page.screenshot(path=str(screenshot_dir(tmp_path) / "yeaft-ui-conversation.png"))

        # -- a reload finds it with its history -----------------------------------
        await page.reload()
        await expect(page.get_by_test_id("connection")).to_have_attribute("data-state", "live")
        await expect(page.get_by_test_id("group-title")).to_have_text(
            "where should the cache live?"
        )
        await expect(page.get_by_test_id("user-message")).to_have_count(2)
        await expect(bubble(page, "linus").first.get_by_test_id("bubble-text")).to_have_text(ANSWER)
        # and it still answers
        await box.fill("one more thing")
        await box.press("Enter")
        await expect(bubble(page, "linus").last).to_have_attribute(
            "data-state", "complete", timeout=TURN_TIMEOUT_MS
        )
        await expect(page.get_by_test_id("user-message")).to_have_count(3)
    assert not problems, "the page reported errors:\n" + "\n".join(problems)
