"""What a turn can hold besides text, in the web UI (real headless Chromium).

A scripted VP thinks, asks the person a question with choices and answers
with the one picked; a failing model call shows as an error, a retried one
as the steady answer; the group's own notices show between the messages.

Run: ``.venv/bin/pytest tests/test_browser_turn_contents.py`` (see tests/fixtures/browser.py).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from engine.errors import ErrorKind
from engine.providers.base import ModelRequest
from engine.providers.scripted import Fail, Reply, ScriptedModel
from gateway.users import add_user
from store.base import GroupMessage
from tests.browser_helpers import (
    PASSWORD,
    TURN_TIMEOUT_MS,
    USER,
    bubble,
    create_group,
    log_in,
    screenshot_dir,
    watch_page_errors,
)
from tests.fixtures.ray_cluster import MakeRuntime
from tests.fixtures.stores import StoreFactory

if TYPE_CHECKING:
    from coordinator.runtime import Runtime
    from tests.fixtures.browser import LiveGateway


# Calls per message text of the "flaky" script, in the VP actor's process.
_FLAKY_CALLS: dict[str, int] = {}


def scripted_vp(request: ModelRequest) -> Reply | Fail:
    """A VP that thinks, asks the person a question, then answers with the choice.

    A message containing "fail" makes the model call fail instead; one with
    "flaky" fails halfway through its first reply and answers when retried.
    Module level, so Ray workers can import it by reference.
    """
    last = request.messages[-1] if request.messages else None
    if last is not None and last.role == "tool":
        return Reply(f"You picked **{last.content}**. Building that one.")
    said = next((m.content for m in reversed(request.messages) if m.role == "user"), "")
    if "fail" in said:
        return Fail(ErrorKind.AUTH, "the provider refused the API key")
    if "flaky" in said:
        calls = _FLAKY_CALLS[said] = _FLAKY_CALLS.get(said, 0) + 1
        if calls == 1:
            return Fail(ErrorKind.OVERLOADED, "busy", after_text="A half-finished answ")
        return Reply("The steady answer.")
    return Reply(
        thinking="Two sensible policies; the person should choose.",
        tool_calls=[
            ("ask_user", {"question": "Which eviction policy?", "choices": ["LRU", "LFU"]})
        ],
    )


pytestmark = [
    # The UI does not care which store backend is underneath; one is enough.
    pytest.mark.parametrize("store_factory", ["embedded"], indirect=True),
    pytest.mark.timeout(300),
]


async def test_tools_thinking_questions_notices_and_errors(
    chromium: Callable[..., AbstractAsyncContextManager[Any]],
    gateway_server: Callable[[Runtime], AbstractAsyncContextManager[LiveGateway]],
    make_runtime: MakeRuntime,
    store_factory: StoreFactory,
    tmp_path: Path,
) -> None:
    """What a turn can contain besides text, and the group's own notices."""
    from playwright.async_api import expect

    runtime = make_runtime(provider_overrides={"offline": ScriptedModel(scripted_vp)})
    await add_user(await runtime.store(), USER, PASSWORD)

    async with gateway_server(runtime) as gateway, chromium() as browser:
        page = browser.pages[0] if browser.pages else await browser.new_page()
        problems = watch_page_errors(page)
        await log_in(page, gateway.url)
        await create_group(page, "Policies", ["kent"])
        box = page.get_by_test_id("message-input")
        kent = bubble(page, "kent")
        dialog = page.get_by_test_id("ask-dialog")

        # -- thinking, a tool call, and a question answered in the dialog ------
        await box.fill("@kent which cache policy?")
        await box.press("Enter")
        await expect(dialog).to_be_visible(timeout=TURN_TIMEOUT_MS)
        await expect(page.get_by_test_id("ask-prompt")).to_have_text("Which eviction policy?")
        await expect(page.get_by_test_id("ask-choice")).to_have_text(["LRU", "LFU"])
        chip = kent.get_by_test_id("tool-chip")
        await expect(chip).to_have_attribute("data-tool", "ask_user")
        await expect(chip).to_have_attribute("data-state", "running")
        await expect(kent.locator('[data-testid="thinking"]')).to_have_count(1)
        await page.screenshot(path=str(screenshot_dir(tmp_path) / "yeaft-ui-ask.png"))
        await page.get_by_test_id("ask-choice").filter(has_text="LFU").click()
        await expect(dialog).to_be_hidden()
        await expect(kent).to_have_attribute("data-state", "complete", timeout=TURN_TIMEOUT_MS)
        text = kent.get_by_test_id("bubble-text")
        await expect(text).to_have_text("You picked LFU. Building that one.")
        await expect(text.locator("strong")).to_have_text("LFU")
        await expect(chip).to_have_attribute("data-state", "ok")
        # The turn's system init (model, tools, session) is not shown.
        await expect(kent.get_by_test_id("bubble-note")).to_have_count(0)
        # Chips and thinking are collapsed until clicked.
        await expect(chip.get_by_test_id("tool-result")).to_be_hidden()
        await chip.locator("button").click()
        await expect(chip.get_by_test_id("tool-result")).to_have_text("LFU")
        thinking = kent.get_by_test_id("thinking")
        await expect(thinking.locator(".thinking-text")).to_be_hidden()
        await thinking.locator("summary").click()
        await expect(thinking).to_contain_text("the person should choose")

        # -- a question put off for later, then kept across a reload -----------
        await box.fill("@kent and for the second cache?")
        await box.press("Enter")
        await expect(dialog).to_be_visible(timeout=TURN_TIMEOUT_MS)
        await dialog.get_by_role("button", name="Later").click()
        await expect(dialog).to_be_hidden()
        waiting = page.get_by_test_id("ask-waiting")
        await expect(waiting).to_have_text("1 question waiting")
        await waiting.click()
        await expect(dialog).to_be_visible()
        await expect(waiting).to_be_hidden()
        await page.reload()
        await expect(dialog).to_be_visible()
        await page.get_by_test_id("ask-choice").filter(has_text="LRU").click()
        await expect(dialog).to_be_hidden()
        await expect(kent.nth(1)).to_have_attribute(
            "data-state", "complete", timeout=TURN_TIMEOUT_MS
        )
        await expect(kent.nth(1).get_by_test_id("bubble-text")).to_contain_text("You picked LRU")

        # -- a notice for an unknown name, shown in the timeline ----------------
        await box.fill("@nobody are you there?")
        await box.press("Enter")
        notice = page.locator('[data-testid="notice"][data-rule="unknown_mentions"]')
        await expect(notice).to_be_visible(timeout=TURN_TIMEOUT_MS)
        await expect(notice).to_contain_text("@nobody")
        await expect(notice).to_contain_text("@kent")

        # -- a failed turn ends as an error, in red -----------------------------
        await box.fill("@kent please fail")
        await box.press("Enter")
        failed = kent.nth(2)
        await expect(failed).to_have_attribute("data-state", "error", timeout=TURN_TIMEOUT_MS)
        await expect(failed.get_by_test_id("bubble-error")).to_contain_text("API key")
        await page.screenshot(path=str(screenshot_dir(tmp_path) / "yeaft-ui-notices.png"))

        # -- a call that fails midway is retried, and its half answer dropped ---
        await box.fill("@kent a flaky answer please")
        await box.press("Enter")
        retried = kent.nth(3)
        await expect(retried).to_have_attribute("data-state", "complete", timeout=TURN_TIMEOUT_MS)
        await expect(retried.get_by_test_id("bubble-text")).to_have_text("The steady answer.")
        await expect(retried.get_by_test_id("bubble-note")).to_contain_text("retry")

        # -- another group, with a long history read page by page ---------------
        store = await runtime.store()
        notes = await runtime.create_group("Notes", ["kent"], members=[USER])
        for i in range(130):
            await store.append_message(
                notes.id, GroupMessage(author=USER, role="user", text=f"note {i}")
            )
        await page.reload()
        await page.locator(f'[data-testid="group-item"][data-group-id="{notes.id}"]').click()
        await expect(page.get_by_test_id("group-title")).to_have_text("Notes")
        messages = page.get_by_test_id("user-message")
        await expect(messages).to_have_count(100)
        await expect(messages.first).to_contain_text("note 30")
        await page.get_by_test_id("load-older").click()
        await expect(messages).to_have_count(130)
        await expect(messages.first).to_contain_text("note 0")
        await expect(page.get_by_test_id("load-older")).to_be_hidden()
        # And back: the first group's history is still there (the failed turn
        # wrote no text, so the group log has no reply of it to show), and the
        # retried reply is stored without the half answer.
        await page.get_by_test_id("group-item").filter(has_text="Policies").click()
        await expect(page.get_by_test_id("group-title")).to_have_text("Policies")
        await expect(kent).to_have_count(3)
        await expect(kent.nth(2).get_by_test_id("bubble-text")).to_have_text("The steady answer.")
        await expect(
            page.locator('[data-testid="notice"][data-rule="unknown_mentions"]')
        ).to_be_visible()
        await expect(page.get_by_test_id("connection")).to_have_attribute("data-state", "live")

    assert not problems, "the page reported errors:\n" + "\n".join(problems)
