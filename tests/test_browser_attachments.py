"""A pasted image in the web UI (real headless Chromium) reaches the model as an image block.

A person pastes a PNG into the message box (a real ``paste`` event carrying
a ``File``); it uploads and shows as a thumbnail in the composer; sent with a
question, it shows as a thumbnail in the message, the VP's model request
(captured by the fake provider server) carries it as an image block in the
model's wire format (an OpenAI ``image_url`` part, an Anthropic ``image``
block), and after a reload the thumbnail comes from the server.

Run: ``.venv/bin/pytest tests/test_browser_attachments.py`` (see tests/fixtures/browser.py).
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any

import pytest
from pydantic import SecretStr

from gateway.users import add_user
from tests.browser_helpers import (
    PASSWORD,
    TURN_TIMEOUT_MS,
    USER,
    bubble,
    log_in,
    watch_page_errors,
)
from tests.fixtures.llm_server import FakeLLM
from tests.fixtures.ray_cluster import MakeRuntime
from tests.fixtures.stores import StoreFactory
from tests.test_attachments import PNG

if TYPE_CHECKING:
    from coordinator.runtime import Runtime
    from tests.fixtures.browser import LiveGateway

pytestmark = [
    pytest.mark.parametrize("store_factory", ["embedded"], indirect=True),
    pytest.mark.timeout(300),
]

PASTE = """(b64) => {
  const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
  const data = new DataTransfer();
  data.items.add(new File([bytes], 'dot.png', { type: 'image/png' }));
  const box = document.querySelector('[data-testid="message-input"]');
  box.focus();
  const init = { clipboardData: data, bubbles: true, cancelable: true };
  const paste = new ClipboardEvent('paste', init);
  box.dispatchEvent(paste);
}"""

LOADED = "(img) => img.complete && img.naturalWidth > 0"


def _image_block(wire: str, encoded: str) -> dict[str, Any]:
    if wire == "openai":
        return {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{encoded}"}}
    source = {"type": "base64", "media_type": "image/png", "data": encoded}
    return {"type": "image", "source": source}


@pytest.mark.parametrize("wire", ["openai", "anthropic"])
async def test_a_pasted_image_is_a_thumbnail_and_an_image_block(
    chromium: Callable[..., AbstractAsyncContextManager[Any]],
    gateway_server: Callable[[Runtime], AbstractAsyncContextManager[LiveGateway]],
    make_runtime: MakeRuntime,
    store_factory: StoreFactory,
    fake_llm: FakeLLM,
    wire: str,
) -> None:
    from playwright.async_api import expect

    runtime = make_runtime(
        engine={
            "model": "openai:gpt-vision-test" if wire == "openai" else "anthropic:claude-test",
            "openai_api_key": SecretStr("sk-test-0123456789"),
            "openai_base_url": fake_llm.openai_base_url,
            "anthropic_api_key": SecretStr("sk-ant-test-0123456789"),
            "anthropic_base_url": fake_llm.anthropic_base_url,
            "vision_models": ("openai:gpt-vision*",),
            "max_retries": 0,
        }
    )
    await add_user(await runtime.store(), USER, PASSWORD)
    fake_llm.text("A single pixel.")
    async with gateway_server(runtime) as gateway, chromium() as browser:
        page = browser.pages[0] if browser.pages else await browser.new_page()
        problems = watch_page_errors(page)
        await log_in(page, gateway.url)
        group = await runtime.create_group("Pictures", ["linus"], members=[USER])
        await page.reload()
        await page.locator(f'[data-testid="group-item"][data-group-id="{group.id}"]').click()
        await expect(page.get_by_test_id("group-title")).to_have_text("Pictures")

        encoded = base64.b64encode(PNG).decode()
        await page.evaluate(PASTE, encoded)
        chip = page.get_by_test_id("attachment-chip")
        await expect(chip).to_have_attribute("data-state", "ready")
        await expect(chip.get_by_test_id("attachment-thumb")).to_be_visible()

        box = page.get_by_test_id("message-input")
        await box.fill("what is this?")
        await box.press("Enter")
        await expect(chip).to_have_count(0)
        sent = page.get_by_test_id("user-message")
        await expect(sent.get_by_test_id("attachment-thumb")).to_have_count(1)
        await expect(sent).to_have_attribute("data-state", "sent")
        reply = bubble(page, "linus")
        await expect(reply).to_have_attribute("data-state", "complete", timeout=TURN_TIMEOUT_MS)

        request = fake_llm.requests[0]
        assert request.path.endswith("/messages" if wire == "anthropic" else "/chat/completions")
        assert _image_block(wire, encoded) in request.body["messages"][-1]["content"]

        # After a reload the thumbnail is the server's copy, downloaded with the session.
        await page.reload()
        await expect(page.get_by_test_id("connection")).to_have_attribute("data-state", "live")
        thumb = page.get_by_test_id("user-message").get_by_test_id("attachment-thumb")
        await expect(thumb).to_have_count(1)
        assert (await thumb.get_attribute("src") or "").startswith("/api/groups/")
        await thumb.evaluate("(img) => img.decode()")
        assert await thumb.evaluate(LOADED)
    assert not problems, "the page reported errors:\n" + "\n".join(problems)
