"""Edit, resend and reply versions in the web UI (real headless Chromium), two people at once.

Ada asks Linus in a group Bob is in; Linus's scripted model answers with
what it was given, so each reply shows what the VP read. Ada edits her
message and resends it: Bob sees the new text live with "edited", and
Linus's new reply sits over the old one behind a ‹2/2› switcher on both
screens. Bob switches to 1/2 for the group and Ada's screen follows; Bob
reads Ada's first text through "edited" without changing anyone else's
screen. A later turn reads the edited text, not the first; regenerating it
makes a ‹2/2› switcher too; and after a reload Bob's screen is the same.

Run: ``.venv/bin/pytest tests/test_browser_versions.py`` (see tests/fixtures/browser.py).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any

import pytest

from engine.providers.base import ModelRequest
from engine.providers.scripted import ScriptedModel
from gateway.users import add_user
from tests.browser_helpers import PASSWORD, TURN_TIMEOUT_MS, USER, log_in, watch_page_errors
from tests.fixtures.ray_cluster import MakeRuntime

if TYPE_CHECKING:
    from coordinator.runtime import Runtime
    from tests.fixtures.browser import LiveGateway

pytestmark = [
    pytest.mark.parametrize("store_factory", ["embedded"], indirect=True),
    pytest.mark.timeout(300),
]


def heard(request: ModelRequest) -> str:
    """What the people said in the request, newest last: the reply shows what the VP read."""
    said = [m.content for m in request.messages if m.role == "user" and isinstance(m.content, str)]
    return "heard: " + " | ".join(said)


def _shown(page: Any) -> Any:
    """Linus's bubbles the page shows (another version of a reply is hidden)."""
    return page.locator('[data-testid="vp-bubble"][data-vp="linus"]:visible')


async def test_ada_edits_and_resends_and_bob_sees_the_versions(
    chromium: Callable[..., AbstractAsyncContextManager[Any]],
    gateway_server: Callable[[Runtime], AbstractAsyncContextManager[LiveGateway]],
    make_runtime: MakeRuntime,
) -> None:
    from playwright.async_api import expect

    runtime = make_runtime(provider_overrides={"offline": ScriptedModel(heard)})
    store = await runtime.store()
    await add_user(store, USER, PASSWORD)
    await add_user(store, "bob", PASSWORD)
    await runtime.create_group("Caches", ["linus"], members=[USER, "bob"])
    async with (
        gateway_server(runtime) as gateway,
        chromium() as first,
        chromium("bob-profile") as second,
    ):
        ada, bob = [b.pages[0] if b.pages else await b.new_page() for b in (first, second)]
        problems = watch_page_errors(ada) + watch_page_errors(bob)
        await log_in(ada, gateway.url)
        await log_in(bob, gateway.url, "bob")
        for page in (ada, bob):
            await expect(page.get_by_test_id("group-title")).to_have_text("Caches")

        box = ada.get_by_test_id("message-input")
        await box.fill("@linus LRU or LFU? LRU")
        await box.press("Enter")
        for page in (ada, bob):
            await expect(_shown(page)).to_contain_text("LFU? LRU", timeout=TURN_TIMEOUT_MS)

        # Ada edits her message and resends it.
        mine = ada.locator('[data-testid="user-message"].mine')
        await mine.get_by_test_id("edit-message").click()
        await mine.get_by_test_id("edit-input").fill("@linus LRU or LFU? LFU")
        await mine.get_by_test_id("edit-resend").click()
        theirs = bob.get_by_test_id("user-message")
        await expect(theirs.get_by_test_id("user-text")).to_have_text("@linus LRU or LFU? LFU")
        await expect(theirs.get_by_test_id("edited-label")).to_be_visible()
        for page in (ada, bob):
            shown = _shown(page)
            await expect(shown).to_have_count(1)
            await expect(shown).to_contain_text("LFU? LFU", timeout=TURN_TIMEOUT_MS)
            await expect(shown.get_by_test_id("version-label")).to_have_text("2/2")

        # Bob shows the first answer for the group: Ada's screen follows.
        await _shown(bob).get_by_test_id("version-prev").click()
        for page in (ada, bob):
            await expect(_shown(page).get_by_test_id("version-label")).to_have_text("1/2")
            await expect(_shown(page)).to_contain_text("LFU? LRU")

        # Bob reads Ada's first text; Ada's screen keeps the current one.
        await theirs.get_by_test_id("edited-label").click()
        versions = theirs.get_by_test_id("message-versions")
        await expect(versions.get_by_test_id("version-label")).to_have_text("2/2")
        await versions.get_by_test_id("version-prev").click()
        await expect(theirs.get_by_test_id("user-text")).to_have_text("@linus LRU or LFU? LRU")
        await expect(mine.get_by_test_id("user-text")).to_have_text("@linus LRU or LFU? LFU")

        # A later turn reads the message as edited.
        await box.fill("@linus and now?")
        await box.press("Enter")
        later = _shown(ada).filter(has_text="and now?")
        await expect(later).to_contain_text("LFU? LFU", timeout=TURN_TIMEOUT_MS)
        await expect(later).not_to_contain_text("LFU? LRU")

        # Regenerating it makes versions too.
        await later.get_by_test_id("regenerate").click()
        for page in (ada, bob):
            again = _shown(page).filter(has_text="and now?")
            await expect(again.get_by_test_id("version-label")).to_have_text(
                "2/2", timeout=TURN_TIMEOUT_MS
            )

        # After a reload Bob's screen is the same.
        await bob.reload()
        await expect(bob.get_by_test_id("connection")).to_have_attribute("data-state", "live")
        await expect(_shown(bob)).to_have_count(2)
        await expect(_shown(bob).first.get_by_test_id("version-label")).to_have_text("1/2")
        await expect(_shown(bob).first).to_contain_text("LFU? LRU")
        await expect(_shown(bob).last.get_by_test_id("version-label")).to_have_text("2/2")
        await expect(bob.get_by_test_id("edited-label")).to_have_count(1)
        assert problems == [], problems
