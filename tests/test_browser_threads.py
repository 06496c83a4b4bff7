"""Hand-offs in the web UI (real headless Chromium): live, in order, the same after a reload.

Steve hands a question to Linus with ``route_forward``; Kent hands one on by
naming Linus in his reply. Each hand-off appears as it happens, saying who
handed to whom, and every reply sits under the message it answers. A reload
rebuilds the timeline from the history into exactly the same shape.

A message sent while the page is still loading the history shows once, after
the history, even when the history was read before it was stored and its ack
comes last.

Run: ``.venv/bin/pytest tests/test_browser_threads.py`` (see tests/fixtures/browser.py).
"""

from __future__ import annotations

import asyncio
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
    TURN_TIMEOUT_MS,
    USER,
    WS_URL,
    bubble,
    log_in,
    screenshot_dir,
    watch_page_errors,
)
from tests.fixtures.ray_cluster import MakeRuntime
from tests.fixtures.stores import StoreFactory
from tests.group_helpers import last_is_tool_result

if TYPE_CHECKING:
    from coordinator.runtime import Runtime
    from tests.fixtures.browser import LiveGateway

pytestmark = [
    pytest.mark.parametrize("store_factory", ["embedded"], indirect=True),
    pytest.mark.timeout(300),
]


def hand_on(request: ModelRequest) -> Reply:
    """Steve forwards to Linus, Kent names Linus in his reply, Linus answers."""
    me = request.context.speaker_id
    if me == "steve" and not last_is_tool_result(request):
        forward = {"to": "linus", "text": "please take it", "reason": "kernel work"}
        return Reply("Linus knows this best.", tool_calls=[("route_forward", forward)])
    if me == "kent":
        return Reply("@linus your turn")
    return Reply(f"done by {me}")


# The timeline's top-level items in order, each reduced to what it shows
# (a thread row: its hand-off line, if any, and the VPs that answer in it).
SHAPE = """
() => [...document.querySelector('[data-testid="timeline"]').children].map((node) => {
  const kind = node.dataset.testid;
  if (kind === 'user-message') return `user ${node.querySelector('.user-text').textContent}`;
  if (kind === 'handoff') return `handoff ${node.dataset.from}->${node.dataset.to}`;
  if (!node.classList.contains('thread')) return kind || node.className;
  const line = node.querySelector(':scope > .handoff');
  const head = line ? `${line.dataset.from}->${line.dataset.to} ` : '';
  const vps = [...node.querySelectorAll('[data-testid="vp-bubble"]')].map((b) => b.dataset.vp);
  return `thread ${head}[${vps.join(',')}]`;
})
"""

EXPECTED = [
    "user @steve where does the page cache live?",
    "thread [steve]",
    "handoff steve->linus",
    "thread [linus]",
    "user @kent how do we test it?",
    "thread [kent]",
    "thread kent->linus [linus]",
]


async def test_hand_offs_show_live_in_order_and_survive_a_reload(
    chromium: Callable[..., AbstractAsyncContextManager[Any]],
    gateway_server: Callable[[Runtime], AbstractAsyncContextManager[LiveGateway]],
    make_runtime: MakeRuntime,
    store_factory: StoreFactory,
    tmp_path: Path,
) -> None:
    from playwright.async_api import expect

    runtime = make_runtime(provider_overrides={"offline": ScriptedModel(hand_on)})
    await add_user(await runtime.store(), USER, PASSWORD)
    await runtime.create_group("Hand-offs", ["steve", "kent", "linus"], members=[USER])
    async with gateway_server(runtime) as gateway, chromium() as browser:
        page = browser.pages[0] if browser.pages else await browser.new_page()
        problems = watch_page_errors(page)
        await log_in(page, gateway.url)
        await expect(page.get_by_test_id("group-title")).to_have_text("Hand-offs")
        box = page.get_by_test_id("message-input")

        await box.fill("@steve where does the page cache live?")
        await box.press("Enter")
        handoff = page.locator('[data-testid="handoff"][data-via="route_forward"]')
        await expect(handoff).to_have_attribute("data-from", "steve", timeout=TURN_TIMEOUT_MS)
        await expect(handoff).to_have_attribute("data-to", "linus")
        await expect(handoff).to_contain_text("please take it")
        await expect(handoff).to_have_attribute("title", "why: kernel work")
        linus = bubble(page, "linus")
        await expect(linus).to_have_attribute("data-state", "complete", timeout=TURN_TIMEOUT_MS)

        await box.fill("@kent how do we test it?")
        await box.press("Enter")
        mention = page.locator('[data-testid="handoff"][data-via="mention"]')
        await expect(mention).to_contain_text("@kent → @linus", timeout=TURN_TIMEOUT_MS)
        await expect(linus).to_have_count(2)
        for vp, count in (("steve", 1), ("kent", 1), ("linus", 2)):
            for i in range(count):
                await expect(bubble(page, vp).nth(i)).to_have_attribute(
                    "data-state", "complete", timeout=TURN_TIMEOUT_MS
                )
        assert await page.evaluate(SHAPE) == EXPECTED
        await page.screenshot(path=str(screenshot_dir(tmp_path) / "yeaft-ui-threads.png"))

        await page.reload()
        await expect(page.get_by_test_id("connection")).to_have_attribute("data-state", "live")
        await expect(linus).to_have_count(2)
        assert await page.evaluate(SHAPE) == EXPECTED
    assert not problems, "the page reported errors:\n" + "\n".join(problems)


async def test_a_message_sent_while_the_history_loads_shows_once_after_it(
    chromium: Callable[..., AbstractAsyncContextManager[Any]],
    gateway_server: Callable[[Runtime], AbstractAsyncContextManager[LiveGateway]],
    make_runtime: MakeRuntime,
    store_factory: StoreFactory,
) -> None:
    from playwright.async_api import Route, expect

    runtime = make_runtime(provider_overrides={"offline": ScriptedModel(hand_on)})
    await add_user(await runtime.store(), USER, PASSWORD)
    await runtime.create_group("Slow history", ["linus"], members=[USER])
    async with gateway_server(runtime) as gateway, chromium() as browser:
        page = browser.pages[0] if browser.pages else await browser.new_page()
        problems = watch_page_errors(page)
        # The server's acks are held while `holding` is set, then delivered.
        holding = asyncio.Event()
        held: list[tuple[Any, str]] = []

        def through(ws: Any) -> None:
            server = ws.connect_to_server()

            def to_page(message: str | bytes) -> None:
                text = message if isinstance(message, str) else message.decode()
                if holding.is_set() and json.loads(text).get("type") == "ack":
                    held.append((ws, text))
                else:
                    ws.send(message)

            server.on_message(to_page)

        await page.route_web_socket(WS_URL, through)
        await log_in(page, gateway.url)
        box = page.get_by_test_id("message-input")
        linus = bubble(page, "linus")
        await box.fill("@linus first")
        await box.press("Enter")
        await expect(linus).to_have_attribute("data-state", "complete", timeout=TURN_TIMEOUT_MS)

        # The history is read at once but reaches the page only when released.
        read, release = asyncio.Event(), asyncio.Event()

        async def slow_history(route: Route) -> None:
            response = await route.fetch()
            read.set()
            await release.wait()
            await route.fulfill(response=response)

        await page.route(lambda url: "/api/groups/" in url and "/messages" in url, slow_history)
        holding.set()
        await page.reload()
        await expect(page.get_by_test_id("group-title")).to_have_text("Slow history")
        await asyncio.wait_for(read.wait(), timeout=TURN_TIMEOUT_MS / 1000)
        await box.fill("@linus second")
        await box.press("Enter")
        mine = page.get_by_test_id("user-message")
        await expect(mine).to_have_count(1)
        release.set()
        await expect(mine).to_have_count(2)
        holding.clear()
        for ws, text in held:
            ws.send(text)
        await expect(linus.nth(1)).to_have_attribute(
            "data-state", "complete", timeout=TURN_TIMEOUT_MS
        )
        await expect(mine.nth(1)).to_have_attribute("data-state", "sent")
        assert await page.evaluate(SHAPE) == [
            "user @linus first",
            "thread [linus]",
            "user @linus second",
            "thread [linus]",
        ]
    assert not problems, "the page reported errors:\n" + "\n".join(problems)
