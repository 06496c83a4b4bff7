"""Stop all, then Regenerate, in real Chromium against the real gateway and Ray.

A reply that hangs is stopped with the header's Stop all button; its bubble
then offers Regenerate, and pressing it gets a new answer (the loop guard's
cancel of the group's chains does not refuse a person's new ask).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any

from engine.providers.scripted import Reply, ScriptedModel
from gateway.users import add_user
from tests.browser_helpers import (
    PASSWORD,
    TURN_TIMEOUT_MS,
    USER,
    bubble,
    log_in,
    watch_page_errors,
)
from tests.fixtures.ray_cluster import MakeRuntime

if TYPE_CHECKING:
    from coordinator.runtime import Runtime
    from tests.fixtures.browser import LiveGateway


async def test_stop_all_then_regenerate_answers_again(
    chromium: Callable[..., AbstractAsyncContextManager[Any]],
    gateway_server: Callable[[Runtime], AbstractAsyncContextManager[LiveGateway]],
    make_runtime: MakeRuntime,
) -> None:
    from playwright.async_api import expect

    # The first answer starts and then hangs until stopped; the regenerated one is whole.
    model = ScriptedModel([Reply("thinking about it, slowly", hang_after=2), "a fresh answer"])
    runtime = make_runtime(provider_overrides={"offline": model})
    await add_user(await runtime.store(), USER, PASSWORD)
    await runtime.create_group("Stops", ["linus"], members=[USER])
    async with gateway_server(runtime) as gateway, chromium() as browser:
        page = browser.pages[0] if browser.pages else await browser.new_page()
        problems = watch_page_errors(page)
        await log_in(page, gateway.url)
        await expect(page.get_by_test_id("group-title")).to_have_text("Stops")
        box = page.get_by_test_id("message-input")
        await box.fill("@linus take your time")
        await box.press("Enter")
        linus = bubble(page, "linus")
        await expect(linus.get_by_test_id("bubble-text")).to_contain_text(
            "thinking", timeout=TURN_TIMEOUT_MS
        )
        await page.locator("#stop-all").click()
        await expect(linus).to_have_attribute("data-state", "cancelled", timeout=TURN_TIMEOUT_MS)
        regenerate = linus.get_by_test_id("regenerate")
        await expect(regenerate).to_be_visible()
        await regenerate.click()
        await expect(linus).to_have_count(2, timeout=TURN_TIMEOUT_MS)
        await expect(linus.nth(1)).to_have_attribute(
            "data-state", "complete", timeout=TURN_TIMEOUT_MS
        )
        await expect(linus.nth(1).get_by_test_id("bubble-text")).to_have_text("a fresh answer")
        await expect(page.get_by_test_id("server-error")).to_have_count(0)
    assert not problems, "the page reported errors:\n" + "\n".join(problems)
