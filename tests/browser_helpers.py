"""Helpers shared by the web UI tests in a real headless Chromium (``tests/test_browser*.py``).

The person who logs in, the offline model the tests chat with, and the page
probes: logging in, creating a group, a VP's bubble, the page's errors and
the bubble recorder.
"""

from __future__ import annotations

import asyncio
import os
import re
from pathlib import Path
from typing import Any

USER = "ada-lovelace"
PASSWORD = "analytical-engine-1843"

PRIMARY_MODEL = "offline:default?tps=40"

TURN_TIMEOUT_MS = 60_000

# The page's WebSocket, whatever its query (``/ws?client=web``), for
# ``page.route_web_socket``.
WS_URL = re.compile(r"/ws(\?|$)")


# Records, on every change of the timeline, each bubble's state and text
# length, so the test can tell afterwards that the text grew while streaming
# (waiting on page conditions alone would only see the end state).
RECORD_BUBBLES = """
() => {
  window.__bubbleSamples = [];
  const snapshot = () => {
    for (const bubble of document.querySelectorAll('[data-testid="vp-bubble"]')) {
      const text = bubble.querySelector('[data-testid="bubble-text"]');
      window.__bubbleSamples.push({
        vp: bubble.dataset.vp,
        turn: bubble.dataset.turn,
        state: bubble.dataset.state,
        length: text ? text.textContent.length : 0,
      });
    }
  };
  new MutationObserver(snapshot).observe(document.querySelector('[data-testid="timeline"]'), {
    subtree: true, childList: true, characterData: true, attributes: true,
  });
}
"""


def bubble(page: Any, vp: str) -> Any:
    """The bubbles of ``vp``'s replies on the page."""
    return page.locator(f'[data-testid="vp-bubble"][data-vp="{vp}"]')


def watch_page_errors(page: Any) -> list[str]:
    """Collect uncaught exceptions and console errors of the page."""
    problems: list[str] = []
    page.on("pageerror", lambda exc: problems.append(f"page error: {exc}"))
    page.on(
        "console",
        lambda msg: (
            problems.append(f"console: {msg.text}")
            # The first GET /api/me before login is a 401, by design.
            if msg.type == "error" and "401" not in msg.text
            else None
        ),
    )
    return problems


async def log_in(page: Any, url: str, user: str = USER, password: str = PASSWORD) -> None:
    from playwright.async_api import expect

    await page.goto(url)
    await expect(page.get_by_test_id("login-form")).to_be_visible()
    await page.get_by_test_id("login-username").fill(user)
    await page.get_by_test_id("login-password").fill(password)
    await page.get_by_test_id("login-submit").click()
    await expect(page.get_by_test_id("login-form")).to_be_hidden()
    await expect(page.get_by_test_id("me")).to_have_text(user)
    await expect(page.get_by_test_id("connection")).to_have_attribute("data-state", "live")


async def create_group(page: Any, name: str, roster: list[str]) -> None:
    """Create a group through the sidebar form, ticking exactly ``roster``."""
    from playwright.async_api import expect

    form = page.get_by_test_id("new-group-form")
    if not await form.is_visible():
        await page.get_by_test_id("new-group-toggle").click()
    await expect(form).to_be_visible()
    await page.get_by_test_id("new-group-name").fill(name)
    options = page.get_by_test_id("roster-option")
    await expect(options.first).to_be_visible()
    for option in await options.all():
        vp = await option.get_attribute("data-vp")
        await option.locator("input").set_checked(vp in roster)
    await page.get_by_test_id("new-group-submit").click()
    current = page.locator('[data-testid="group-item"][aria-current="true"]')
    # Creating a group is a coordinator call that starts its VPs' actors: on
    # a loaded machine it can take longer than an expectation's 5 s default.
    await expect(current).to_have_count(1, timeout=TURN_TIMEOUT_MS)
    await expect(current).to_contain_text(name)
    await expect(page.get_by_test_id("group-title")).to_have_text(name)
    await expect(page.get_by_test_id("vp-presence")).to_have_count(len(roster))


async def downloaded(info: Any) -> str:
    """The text of a finished download (``info``: what ``page.expect_download()`` gave)."""
    path = Path(await (await info.value).path())
    return await asyncio.to_thread(path.read_text)


def screenshot_dir(tmp_path: Path) -> Path:
    configured = os.environ.get("YEAFT_UI_SCREENSHOTS")
    path = Path(configured) if configured else tmp_path
    path.mkdir(parents=True, exist_ok=True)
    return path


def streamed_lengths(samples: list[dict[str, Any]], vp: str) -> list[int]:
    """The distinct non-zero text lengths a VP's bubble showed while streaming."""
    seen: list[int] = []
    for sample in samples:
        if sample["vp"] == vp and sample["state"] == "streaming" and sample["length"] > 0:
            if not seen or seen[-1] != sample["length"]:
                seen.append(sample["length"])
    return seen
