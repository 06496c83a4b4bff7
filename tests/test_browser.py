"""The web UI in a real headless Chromium, against the real gateway, Ray and store.

One scenario, the way a person uses it: log in, create a group of Linus and
Steve, ask both a question through the @mention autocomplete and watch both
replies stream into their own bubbles and complete; add a slow VP, start it
and stop it with its cancel button; reload the page and find the history
restored.

The offline model runs at 40 tokens per second so streaming takes about a
second and can be watched; Ken (the one persona whose modelHint is "fast")
gets a slow, long "fast" model so there is time to press Stop.

Run: ``.venv/bin/pytest tests/test_browser.py`` (needs ``apt-get install
chromium`` and ``pip install playwright``; see tests/fixtures/browser.py).
Set ``YEAFT_UI_SCREENSHOTS=/some/dir`` to keep screenshots of the run.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from gateway.users import add_user
from tests.browser_helpers import (
    PASSWORD,
    PRIMARY_MODEL,
    RECORD_BUBBLES,
    TURN_TIMEOUT_MS,
    USER,
    WS_URL,
    bubble,
    create_group,
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

QUESTION = "@linus @steve how should we structure the cache?"
SLOW_QUESTION = "@ken <b>walk</b> me through the cache, slowly"

SLOW_MODEL = "offline:default?tps=8&tokens=400"
# Long enough (about 6 s) that the connection can drop and come back mid-reply.
RECONNECT_MODEL = "offline:default?tps=20&tokens=120"


# Records every state the connection indicator goes through.
RECORD_CONNECTION = """
() => {
  const node = document.querySelector('[data-testid="connection"]');
  window.__connectionStates = [node.dataset.state];
  new MutationObserver(() => {
    const states = window.__connectionStates;
    if (states[states.length - 1] !== node.dataset.state) states.push(node.dataset.state);
  }).observe(node, { attributes: true, attributeFilter: ['data-state'] });
}
"""

pytestmark = [
    # The UI does not care which store backend is underneath; one is enough.
    pytest.mark.parametrize("store_factory", ["embedded"], indirect=True),
    pytest.mark.timeout(300),
]


async def test_chat_streams_cancels_and_restores_history(
    chromium: Callable[..., AbstractAsyncContextManager[Any]],
    gateway_server: Callable[[Runtime], AbstractAsyncContextManager[LiveGateway]],
    make_runtime: MakeRuntime,
    store_factory: StoreFactory,
    tmp_path: Path,
) -> None:
    from playwright.async_api import expect

    started = time.monotonic()
    runtime = make_runtime(engine={"model": PRIMARY_MODEL, "fast_model": SLOW_MODEL})
    await add_user(await runtime.store(), USER, PASSWORD)
    shots = screenshot_dir(tmp_path)

    async with gateway_server(runtime) as gateway, chromium() as browser:
        page = browser.pages[0] if browser.pages else await browser.new_page()
        problems = watch_page_errors(page)

        await log_in(page, gateway.url)
        await create_group(page, "Cache design", ["linus", "steve"])

        # -- ask both, picking the mentions from the autocomplete --------------
        box = page.get_by_test_id("message-input")
        await expect(box).to_be_enabled()
        await box.click()
        await box.press_sequentially("@li")
        await expect(page.get_by_test_id("mention-option")).to_have_count(1)
        await expect(page.get_by_test_id("mention-option")).to_have_attribute("data-vp", "linus")
        await box.press("Tab")
        await box.press_sequentially("@st")
        await expect(
            page.locator('[data-testid="mention-option"][data-vp="steve"]')
        ).to_be_visible()
        await box.press("Enter")  # picks the highlighted option, does not send
        await box.press_sequentially("how should we structure the cache?")
        await expect(box).to_have_value(QUESTION)
        await expect(page.get_by_test_id("mention-menu")).to_be_hidden()

        await page.evaluate(RECORD_BUBBLES)
        await box.press("Enter")
        await expect(box).to_have_value("")
        asked = page.get_by_test_id("user-message")
        await expect(asked).to_have_count(1)
        await expect(asked).to_contain_text(QUESTION)
        await expect(asked).to_have_attribute("data-state", "sent")

        for vp in ("linus", "steve"):
            await expect(bubble(page, vp)).to_have_count(1, timeout=TURN_TIMEOUT_MS)
        for vp in ("linus", "steve"):
            await expect(bubble(page, vp)).to_have_attribute(
                "data-state", "complete", timeout=TURN_TIMEOUT_MS
            )
            await expect(bubble(page, vp).get_by_test_id("bubble-text")).not_to_be_empty()
        # Both bubbles sit in one row of replies, each labelled with its VP.
        await expect(page.locator(".replies").first.get_by_test_id("vp-bubble")).to_have_count(2)
        await expect(bubble(page, "linus")).to_contain_text("Linus")
        await expect(bubble(page, "linus")).to_contain_text("systems engineer")
        await expect(bubble(page, "steve")).to_contain_text("Steve")

        samples: list[dict[str, Any]] = await page.evaluate("window.__bubbleSamples")
        for vp in ("linus", "steve"):
            grew = streamed_lengths(samples, vp)
            assert len(grew) >= 2 and grew == sorted(grew), (
                f"{vp}'s bubble did not visibly stream: text lengths while streaming {grew}"
            )
        replies = {
            vp: await bubble(page, vp).get_by_test_id("bubble-text").text_content()
            for vp in ("linus", "steve")
        }
        await expect(page.get_by_test_id("stop-all")).to_be_hidden()
        await page.screenshot(path=str(shots / "yeaft-ui.png"))

        # -- a slow VP, stopped with its own cancel button ---------------------
        await page.get_by_test_id("group-menu").click()
        dialog = page.get_by_test_id("group-dialog")
        await expect(dialog).to_be_visible()
        await page.get_by_test_id("add-vp-select").select_option("ken")
        await page.get_by_test_id("add-vp-button").click()
        await expect(dialog.locator('.roster-row[data-vp="ken"]')).to_be_visible()
        await page.get_by_test_id("group-dialog-close").click()
        await expect(dialog).to_be_hidden()
        await expect(page.get_by_test_id("vp-presence")).to_have_count(3)

        await box.fill(SLOW_QUESTION)
        await box.press("Enter")
        asked_slowly = page.get_by_test_id("user-message").nth(1)
        await expect(asked_slowly).to_have_attribute("data-state", "sent")
        # Server text is rendered as text: the tag shows, nothing is parsed.
        await expect(asked_slowly).to_contain_text("<b>walk</b>")
        await expect(asked_slowly.locator("b")).to_have_count(0)

        ken = bubble(page, "ken")
        await expect(ken.get_by_test_id("bubble-text")).not_to_be_empty(timeout=TURN_TIMEOUT_MS)
        await expect(ken).to_have_attribute("data-state", "streaming")
        await expect(page.get_by_test_id("stop-all")).to_be_visible()
        await page.screenshot(path=str(shots / "yeaft-ui-streaming.png"))
        await page.locator('[data-testid="cancel-vp"][data-vp="ken"]').click()
        await expect(ken).to_have_attribute("data-state", "cancelled", timeout=TURN_TIMEOUT_MS)
        await expect(ken.get_by_test_id("cancel-vp")).to_have_count(0)
        await expect(page.get_by_test_id("stop-all")).to_be_hidden()
        # Linus and Steve were not touched by stopping Ken.
        for vp in ("linus", "steve"):
            await expect(bubble(page, vp)).to_have_attribute("data-state", "complete")

        # -- reload: the history comes back from the server --------------------
        await page.reload()
        await expect(page.get_by_test_id("connection")).to_have_attribute("data-state", "live")
        await expect(page.get_by_test_id("group-title")).to_have_text("Cache design")
        history = page.get_by_test_id("user-message")
        await expect(history).to_have_count(2)
        await expect(history.first).to_contain_text(QUESTION)
        await expect(history.nth(1)).to_contain_text("<b>walk</b>")
        for vp, text in replies.items():
            await expect(bubble(page, vp)).to_have_count(1)
            await expect(bubble(page, vp)).to_have_attribute("data-state", "complete")
            await expect(bubble(page, vp).get_by_test_id("bubble-text")).to_have_text(text or "")
        await expect(ken).to_have_attribute("data-state", "cancelled")
        await expect(ken.get_by_test_id("bubble-text")).not_to_be_empty()
        await page.screenshot(path=str(shots / "yeaft-ui-reloaded.png"))

    assert not problems, "the page reported errors:\n" + "\n".join(problems)
    print(f"browser scenario took {time.monotonic() - started:.1f} s; screenshots in {shots}")


async def test_reconnect_replays_exactly_what_was_missed(
    chromium: Callable[..., AbstractAsyncContextManager[Any]],
    gateway_server: Callable[[Runtime], AbstractAsyncContextManager[LiveGateway]],
    make_runtime: MakeRuntime,
    store_factory: StoreFactory,
) -> None:
    """The socket drops mid-reply and the page reloads mid-reply; nothing is lost."""
    from playwright.async_api import expect

    runtime = make_runtime(engine={"model": RECONNECT_MODEL})
    await add_user(await runtime.store(), USER, PASSWORD)

    async with gateway_server(runtime) as gateway, chromium() as browser:
        page = browser.pages[0] if browser.pages else await browser.new_page()
        problems = watch_page_errors(page)
        # Every WebSocket the page opens goes through this route to the real
        # server, which lets the test cut the page's side of it.
        sockets: list[Any] = []

        def route(ws: Any) -> None:
            ws.connect_to_server()
            sockets.append(ws)

        await page.route_web_socket(WS_URL, route)
        await log_in(page, gateway.url)
        await create_group(page, "Reconnects", ["linus"])
        connection = page.get_by_test_id("connection")
        await expect(connection).to_have_attribute("data-state", "live")
        await page.evaluate(RECORD_CONNECTION)

        box = page.get_by_test_id("message-input")
        await box.fill("@linus what does a cache need?")
        await box.press("Enter")
        linus = bubble(page, "linus")
        await expect(linus.get_by_test_id("bubble-text")).not_to_be_empty(timeout=TURN_TIMEOUT_MS)
        await expect(linus).to_have_attribute("data-state", "streaming")

        opened = len(sockets)
        await sockets[-1].close(code=4000, reason="test: the network dropped")
        await page.wait_for_function(
            "() => window.__connectionStates.includes('reconnecting')"
            " && window.__connectionStates.at(-1) === 'live'"
        )
        states: list[str] = await page.evaluate("window.__connectionStates")
        dropped_at = states.index("reconnecting")
        assert states[dropped_at:] == ["reconnecting", "connecting", "replaying", "live"], states
        assert len(sockets) == opened + 1

        await expect(linus).to_have_attribute("data-state", "complete", timeout=TURN_TIMEOUT_MS)
        await expect(linus).to_have_count(1)
        streamed = await linus.get_by_test_id("bubble-text").text_content()

        # The stored reply is the reference: the replayed stream must have
        # added up to exactly the same text, nothing missing, nothing twice.
        await page.reload()
        await expect(connection).to_have_attribute("data-state", "live")
        await expect(linus).to_have_attribute("data-state", "complete")
        await expect(linus.get_by_test_id("bubble-text")).to_have_text(streamed or "")

        # -- a reload in the middle of a reply ---------------------------------
        # The history holds finished replies only, so the page joins this one
        # in the middle, says so, and shows the whole stored reply at its end.
        await box.fill("@linus and what does it cost?")
        await box.press("Enter")
        second = linus.nth(1)
        await expect(second.get_by_test_id("bubble-text")).not_to_be_empty(timeout=TURN_TIMEOUT_MS)
        await page.reload()
        await expect(second.get_by_test_id("joined-late")).to_be_visible(timeout=TURN_TIMEOUT_MS)
        await expect(second).to_have_attribute("data-state", "complete", timeout=TURN_TIMEOUT_MS)
        # The note goes once the whole stored reply has replaced the part seen.
        await expect(second.get_by_test_id("joined-late")).to_have_count(0)
        whole = await second.get_by_test_id("bubble-text").text_content()
        await page.reload()
        await expect(second).to_have_attribute("data-state", "complete")
        await expect(second.get_by_test_id("bubble-text")).to_have_text(whole or "")

    assert not problems, "the page reported errors:\n" + "\n".join(problems)
