"""A one-to-one conversation in the web UI (real headless Chromium).

A person starts a conversation with Linus from the sidebar's "New
conversation" form, watches his reply stream into a bubble (through the
seed's chat mode: ``resume_conversation``, ``send_message``,
``claude_output``), stops a second reply mid-stream, finds the conversation
named after the first message, and after a reload finds it again with its
history. Its groups list stays empty: a conversation is not a group.

The second test is the conversation's own header: its title, VP and model,
the token total of its own turns (not the group opened before it), Export
as Markdown and JSON, and Settings its owner changes and saves; another
person cannot reach any of it.

Run: ``.venv/bin/pytest tests/test_browser_conversations.py`` (see tests/fixtures/browser.py).
"""

from __future__ import annotations

import json
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
    create_group,
    downloaded,
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


# What the page's fetch of one of its own routes answered: status and JSON body.
FETCH = """
async ([method, path, body]) => {
  const init = { method, credentials: 'same-origin', headers: { Accept: 'application/json' } };
  if (body) {
    init.headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  const response = await fetch(path, init);
  return { status: response.status, body: await response.json().catch(() => null) };
}
"""


async def test_a_conversation_has_its_own_header_export_settings_and_usage(
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
    await add_user(await runtime.store(), "bob", PASSWORD)
    async with gateway_server(runtime) as gateway, chromium() as browser:
        page = browser.pages[0] if browser.pages else await browser.new_page()
        problems = watch_page_errors(page)
        await log_in(page, gateway.url)
        box = page.get_by_test_id("message-input")
        usage = page.get_by_test_id("group-usage")

        # -- a group with two turns of its own -----------------------------------
        await create_group(page, "Team", ["linus"])
        for text in ("@linus first", "@linus second"):
            await box.fill(text)
            await box.press("Enter")
        await expect(bubble(page, "linus")).to_have_count(2, timeout=TURN_TIMEOUT_MS)
        for reply in await bubble(page, "linus").all():
            await expect(reply).to_have_attribute("data-state", "complete", timeout=TURN_TIMEOUT_MS)
        await expect(usage).to_have_attribute("data-turns", "2")

        # -- the conversation's own header ---------------------------------------
        await page.get_by_test_id("new-conversation-toggle").click()
        await page.get_by_test_id("new-conversation-vp").select_option("linus")
        await page.get_by_test_id("new-conversation-submit").click()
        await expect(page.get_by_test_id("group-title")).to_have_text("Chat with Linus")
        cid = await page.locator(
            '[data-testid="conversation-item"][aria-current="true"]'
        ).get_attribute("data-conversation-id")
        assert cid
        # Its own total, not the group's: nothing yet (then its one turn, below).
        await expect(usage).to_have_attribute("data-turns", "0")
        await expect(usage).to_contain_text("0 tokens")
        await expect(usage).to_have_attribute("data-target", cid)
        # A conversation has no people and no group settings: its own Settings instead.
        await expect(page.get_by_test_id("members-button")).to_be_hidden()
        await expect(page.get_by_test_id("settings-button")).to_be_hidden()
        await expect(page.get_by_test_id("conversation-settings-button")).to_be_visible()
        base = f"/api/conversations/{cid}"
        view = (await page.evaluate(FETCH, ["GET", f"{base}/settings", None]))["body"]
        subtitle = page.get_by_test_id("chat-subtitle")
        await expect(subtitle).to_have_text(f"with Linus · {view['model']}")
        await box.fill("where should the cache live?")
        await box.press("Enter")
        await expect(bubble(page, "linus")).to_have_attribute(
            "data-state", "complete", timeout=TURN_TIMEOUT_MS
        )
        await expect(usage).to_have_attribute("data-turns", "1")
        totals = (await page.evaluate(FETCH, ["GET", f"{base}/usage", None]))["body"]
        tokens = totals["inputTokens"] + totals["outputTokens"]
        assert tokens > 0, totals
        await expect(usage).to_contain_text(f"{tokens:,} tokens")
        await expect(page.get_by_test_id("group-title")).to_have_text(
            "where should the cache live?"
        )

        # -- Export: the conversation, as Markdown and as JSON ---------------------
        await page.get_by_test_id("export-toggle").click()
        async with page.expect_download() as md_info:
            await page.get_by_test_id("export-markdown").click()
        markdown = await downloaded(md_info)
        assert markdown.startswith("# where should the cache live?\n"), markdown[:200]
        assert f"conversation of {USER} with @linus" in markdown
        assert ANSWER in markdown
        # The menu closed once a format was chosen: it opens again for the other.
        await expect(page.get_by_test_id("export-menu")).not_to_have_attribute("open", "")
        await page.get_by_test_id("export-toggle").click()
        async with page.expect_download() as json_info:
            await page.get_by_test_id("export-json").click()
        document = json.loads(await downloaded(json_info))
        assert document["format"] == "yeaft-conversation-export"
        assert document["conversation"]["conversationId"] == cid
        assert [m["author"] for m in document["messages"]] == [USER, "linus"]
        assert document["usage"]["turns"] == 1

        # -- Settings: the owner changes and saves them -----------------------------
        await page.get_by_test_id("conversation-settings-button").click()
        dialog = page.get_by_test_id("conversation-settings-dialog")
        await expect(dialog).to_be_visible()
        note = page.get_by_test_id("conversation-settings-note")
        await expect(note).to_contain_text("Your conversation with Linus")
        await expect(dialog).not_to_contain_text("undefined")
        await expect(page.get_by_test_id("conversation-setting-language")).to_have_value("en")
        await page.get_by_test_id("conversation-setting-language").select_option("zh")
        await page.get_by_test_id("conversation-setting-model").fill("offline:careful")
        await page.get_by_test_id("conversation-settings-save").click()
        await expect(dialog).to_be_hidden()
        await expect(subtitle).to_have_text("with Linus · offline:careful")
        notice = page.get_by_test_id("notice").last
        await expect(notice).to_contain_text("changed the conversation settings")
        await expect(notice).to_contain_text("language → zh")
        # Still a conversation, never listed as a group.
        await expect(page.get_by_test_id("group-item")).to_have_count(1)
        saved = (await page.evaluate(FETCH, ["GET", f"{base}/settings", None]))["body"]
        assert saved["settings"]["language"] == "zh" and saved["model"] == "offline:careful"
        await page.screenshot(path=str(screenshot_dir(tmp_path) / "yeaft-ui-conversation-head.png"))

        # -- after a reload, the header is the conversation's still -------------------
        await page.reload()
        await expect(page.get_by_test_id("connection")).to_have_attribute("data-state", "live")
        await expect(subtitle).to_have_text("with Linus · offline:careful")
        await expect(usage).to_have_attribute("data-turns", "1")
        await page.get_by_test_id("conversation-settings-button").click()
        await expect(page.get_by_test_id("conversation-setting-language")).to_have_value("zh")
        await page.get_by_test_id("conversation-settings-close").click()

        # -- back in the group, the group's header again -------------------------------
        await page.get_by_test_id("group-item").click()
        await expect(usage).to_have_attribute("data-turns", "2")
        await expect(subtitle).to_be_hidden()
        await expect(page.get_by_test_id("settings-button")).to_be_visible()
        await expect(page.get_by_test_id("conversation-settings-button")).to_be_hidden()

    # -- another person: the conversation is not theirs to see or change -----------
    async with gateway_server(runtime) as gateway, chromium("bob-profile") as browser:
        page = await browser.new_page()
        await log_in(page, gateway.url, user="bob")
        await expect(page.get_by_test_id("conversation-list")).to_contain_text("No conversations")
        for method, tail, body in (
            ("GET", "settings", None),
            ("PATCH", "settings", {"settings": {"language": "en"}}),
            ("GET", "usage", None),
            ("GET", "export", None),
        ):
            answer = await page.evaluate(FETCH, [method, f"{base}/{tail}", body])
            assert answer["status"] == 404, (method, tail, answer)
            assert answer["body"]["error"]["code"] == "not_found", answer
    after = (await (await runtime.store()).get_group(cid)).settings
    assert after.language == "zh", "a stranger changed the conversation"
    assert not problems, "the page reported errors:\n" + "\n".join(problems)
