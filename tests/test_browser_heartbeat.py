"""The web UI shows heartbeats as the phase they name, and a busy VP that stops beating as stale.

Real Chromium against the real gateway and Ray, with a 0.2 s heartbeat and a
model that thinks for four seconds before it streams. The first turn's beats
all reach the page: Linus's presence chip shows thinking then streaming (never
``busy``) and is never marked stale. For the second turn the test drops
every beat after the first on the page's WebSocket, as if the VP had hung
while thinking: the chip is marked stale, until its reply streams.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any

import pytest

from gateway.users import add_user
from tests.browser_helpers import (
    PASSWORD,
    TURN_TIMEOUT_MS,
    USER,
    WS_URL,
    bubble,
    create_group,
    log_in,
    watch_page_errors,
)
from tests.fixtures.ray_cluster import MakeRuntime

if TYPE_CHECKING:
    from coordinator.runtime import Runtime
    from tests.fixtures.browser import LiveGateway

# Thinking long enough for several of the page's one-second stale checks,
# even when a loaded machine delays its timers.
THINKING_MODEL = "offline:default?ttft=4&tps=20&tokens=20"

# Records every state and stale mark Linus's presence chip goes through.
RECORD_CHIP = """
() => {
  window.__chip = [];
  const snap = () => {
    const chip = document.querySelector('[data-testid="vp-presence"][data-vp="linus"]');
    const now = chip ? `${chip.dataset.state}${chip.dataset.stale ? '!' : ''}` : 'none';
    if (window.__chip.at(-1) !== now) window.__chip.push(now);
  };
  const bar = document.getElementById('presence-bar');
  new MutationObserver(snap).observe(bar, { attributes: true, subtree: true, childList: true });
}
"""


@pytest.mark.own_processes
async def test_heartbeats_show_the_phase_and_silence_marks_a_busy_vp_stale(
    chromium: Callable[..., AbstractAsyncContextManager[Any]],
    gateway_server: Callable[[Runtime], AbstractAsyncContextManager[LiveGateway]],
    make_runtime: MakeRuntime,
) -> None:
    from playwright.async_api import expect

    runtime = make_runtime(heartbeat_s=0.2, engine={"model": THINKING_MODEL})
    await add_user(await runtime.store(), USER, PASSWORD)
    drop = {"beats": False, "seen": 0}

    async with gateway_server(runtime) as gateway, chromium() as browser:
        page = browser.pages[0] if browser.pages else await browser.new_page()
        problems = watch_page_errors(page)

        def route(ws: Any) -> None:
            server = ws.connect_to_server()

            def from_server(message: str | bytes) -> None:
                frame = json.loads(message)
                if frame.get("type") == "agent_status" and frame.get("state") == "busy":
                    drop["seen"] += 1
                    if drop["beats"] and drop["seen"] > 1:
                        return
                ws.send(message)

            server.on_message(from_server)

        await page.route_web_socket(WS_URL, route)
        await log_in(page, gateway.url)
        await create_group(page, "Heartbeats", ["linus"])
        await page.evaluate(RECORD_CHIP)
        chip = page.locator('[data-testid="vp-presence"][data-vp="linus"]')
        box = page.get_by_test_id("message-input")

        await box.fill("@linus think it over")
        await box.press("Enter")
        await expect(bubble(page, "linus").first).to_have_attribute(
            "data-state", "complete", timeout=TURN_TIMEOUT_MS
        )
        await expect(chip).to_have_attribute("data-state", "idle")
        first: list[str] = await page.evaluate("window.__chip")
        assert drop["seen"] >= 5, drop
        assert "thinking" in first and "streaming" in first, first
        assert not [s for s in first if s.startswith("busy") or s.endswith("!")], first

        drop.update(beats=True, seen=0)
        await page.evaluate("window.__chip = []")
        await box.fill("@linus and once more")
        await box.press("Enter")
        await expect(chip).to_have_attribute("data-stale", "true", timeout=TURN_TIMEOUT_MS)
        await expect(chip).to_have_attribute("data-state", "thinking")
        await expect(bubble(page, "linus")).to_have_count(2)
        await expect(bubble(page, "linus").nth(1)).to_have_attribute(
            "data-state", "complete", timeout=TURN_TIMEOUT_MS
        )
        await expect(chip).to_have_attribute("data-state", "idle")
        await expect(chip).not_to_have_attribute("data-stale", "true")
        second: list[str] = await page.evaluate("window.__chip")
        assert "thinking!" in second and second[-1] == "idle", second
    assert not problems, "the page reported errors:\n" + "\n".join(problems)
