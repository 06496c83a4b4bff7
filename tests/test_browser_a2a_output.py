"""In a real browser: a VP calls a remote A2A agent, and its answer streams into the call's chip.

@linus has one remote agent (``tests/fixtures/a2a_agent.py``, a real
``a2a-sdk`` server in a subprocess). Its tool asks before it runs, so the
approval dialog names ``a2a__lib``; once allowed, the agent's lines appear
under the call's chip as its output while it runs, and the reply is built
on the whole answer.

Run: ``.venv/bin/pytest tests/test_browser_a2a_output.py`` (see tests/fixtures/browser.py).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any

import pytest

from engine.a2a import parse_a2a_config
from engine.providers.scripted import ScriptedModel
from gateway.users import add_user
from tests.a2a_helpers import TOKEN, asks_the_agent, serve_agent
from tests.browser_helpers import PASSWORD, TURN_TIMEOUT_MS, USER, bubble, log_in, watch_page_errors
from tests.fixtures.ray_cluster import MakeRuntime

if TYPE_CHECKING:
    from coordinator.runtime import Runtime
    from tests.fixtures.browser import LiveGateway

pytestmark = [
    pytest.mark.parametrize("store_factory", ["embedded"], indirect=True),
    pytest.mark.timeout(300),
]


async def test_a_remote_agents_answer_streams_under_the_call(
    chromium: Callable[..., AbstractAsyncContextManager[Any]],
    gateway_server: Callable[[Runtime], AbstractAsyncContextManager[LiveGateway]],
    make_runtime: MakeRuntime,
) -> None:
    from playwright.async_api import expect

    with serve_agent() as agent_url:
        a2a = parse_a2a_config({"a2aAgents": {"lib": {"url": agent_url, "token": TOKEN}}})
        runtime = make_runtime(
            provider_overrides={"offline": ScriptedModel(asks_the_agent)}, a2a=a2a
        )
        await add_user(await runtime.store(), USER, PASSWORD)
        await runtime.create_group("Research", ["linus"], members=[USER])
        async with gateway_server(runtime) as gateway, chromium() as browser:
            page = browser.pages[0] if browser.pages else await browser.new_page()
            problems = watch_page_errors(page)
            await log_in(page, gateway.url)
            await expect(page.get_by_test_id("group-title")).to_have_text("Research")
            box = page.get_by_test_id("message-input")
            await box.fill("@linus ask:lib actor papers")
            await box.press("Enter")

            dialog = page.get_by_test_id("ask-dialog")
            await expect(dialog).to_be_visible(timeout=TURN_TIMEOUT_MS)
            await expect(dialog.get_by_test_id("ask-tool-name")).to_have_text("a2a__lib")
            await dialog.get_by_test_id("ask-choice").filter(has_text="allow once").click()

            linus = bubble(page, "linus")
            await expect(linus).to_have_attribute("data-state", "complete", timeout=TURN_TIMEOUT_MS)
            chip = linus.locator('[data-testid="tool-chip"][data-tool="a2a__lib"]')
            await expect(chip).to_have_attribute("data-state", "ok")
            # The agent's stream, line by line, under the call: shown open.
            output = chip.get_by_test_id("tool-output")
            await expect(output).to_be_visible()
            await expect(output).to_have_text("searching\nfound 3 papers\ndone: actor papers")
            await expect(linus.get_by_test_id("bubble-text")).to_contain_text("result: searching")
            assert TOKEN not in await page.content()
            assert problems == []
