"""In a real browser: a VP's ``ask_user`` question with several choices is a list of
checkboxes; the person ticks two, adds words of their own, and the VP gets the list."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any

from engine.providers.base import ModelRequest
from engine.providers.scripted import Reply, ScriptedModel
from gateway.users import add_user
from tests.browser_helpers import PASSWORD, TURN_TIMEOUT_MS, bubble, log_in, watch_page_errors
from tests.fixtures.ray_cluster import MakeRuntime
from tests.group_helpers import last_is_tool_result

if TYPE_CHECKING:
    from coordinator.runtime import Runtime
    from tests.fixtures.browser import LiveGateway

USER = "ada"
SLOW_MS = 30_000
TOPPINGS = ["olives", "basil", "chili"]


def asks_for_toppings(request: ModelRequest) -> Reply:
    """Asks which toppings (several, or the person's own), then says what came back."""
    if last_is_tool_result(request):
        return Reply(f"Toppings: {request.messages[-1].content}")
    question = {
        "question": "Which toppings?",
        "choices": TOPPINGS,
        "multiSelect": True,
        "allowOther": True,
    }
    return Reply(tool_calls=[("ask_user", question)])


async def test_a_multi_select_question_is_answered_with_checkboxes(
    chromium: Callable[..., AbstractAsyncContextManager[Any]],
    gateway_server: Callable[[Runtime], AbstractAsyncContextManager[LiveGateway]],
    make_runtime: MakeRuntime,
) -> None:
    from playwright.async_api import expect

    runtime = make_runtime(provider_overrides={"offline": ScriptedModel(asks_for_toppings)})
    await add_user(await runtime.store(), USER, PASSWORD)
    async with gateway_server(runtime) as gateway, chromium() as browser:
        page = browser.pages[0] if browser.pages else await browser.new_page()
        problems = watch_page_errors(page)
        await runtime.create_group("Pizza", ["linus"], members=[USER])
        await log_in(page, gateway.url, USER)
        await page.get_by_test_id("group-item").filter(has_text="Pizza").click(timeout=SLOW_MS)
        await expect(page.get_by_test_id("group-title")).to_have_text("Pizza", timeout=SLOW_MS)

        box = page.get_by_test_id("message-input")
        await box.fill("@linus a pizza please")
        await box.press("Enter")
        dialog = page.get_by_test_id("ask-dialog")
        await expect(dialog).to_be_visible(timeout=TURN_TIMEOUT_MS)
        await expect(dialog.get_by_test_id("ask-prompt")).to_have_text("Which toppings?")
        checks = dialog.get_by_test_id("ask-check")
        await expect(checks).to_have_count(3)
        # No single-choice buttons; nothing ticked yet, so nothing to send.
        await expect(dialog.get_by_test_id("ask-choice")).to_have_count(0)
        submit = dialog.get_by_test_id("ask-submit")
        await expect(submit).to_be_disabled()
        await checks.nth(0).check()
        await checks.nth(2).check()
        await dialog.get_by_test_id("ask-other").fill("extra cheese")
        await expect(submit).to_be_enabled()
        await submit.click()
        await expect(dialog).to_be_hidden(timeout=SLOW_MS)

        linus = bubble(page, "linus")
        await expect(linus).to_have_attribute("data-state", "complete", timeout=TURN_TIMEOUT_MS)
        await expect(linus.get_by_test_id("bubble-text")).to_have_text(
            'Toppings: ["olives", "chili", "extra cheese"]'
        )
        assert problems == []
