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

import os
import time
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
from tests.fixtures.ray_cluster import MakeRuntime
from tests.fixtures.stores import StoreFactory

if TYPE_CHECKING:
    from coordinator.runtime import Runtime
    from tests.fixtures.browser import LiveGateway

USER = "ada-lovelace"
PASSWORD = "analytical-engine-1843"
QUESTION = "@linus @steve how should we structure the cache?"
SLOW_QUESTION = "@ken <b>walk</b> me through the cache, slowly"

PRIMARY_MODEL = "offline:default?tps=40"
SLOW_MODEL = "offline:default?tps=8&tokens=400"
# Long enough (about 6 s) that the connection can drop and come back mid-reply.
RECONNECT_MODEL = "offline:default?tps=20&tokens=120"

TURN_TIMEOUT_MS = 60_000


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


def bubble(page: Any, vp: str) -> Any:
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

        await page.route_web_socket("**/ws", route)
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


# Each person's message, and whether the thread row right after it holds
# exactly one reply and names it as the message it answers.
THREADS = """
() => [...document.querySelectorAll('[data-testid="user-message"]')].map((node) => {
  const row = node.nextElementSibling;
  const answers = row && row.dataset.trigger === node.dataset.messageId;
  return {
    text: node.querySelector('.user-text').textContent,
    mine: node.classList.contains('mine'),
    replies: answers ? row.querySelectorAll('[data-testid="vp-bubble"]').length : 0,
  };
})
"""


async def test_two_people_see_each_others_messages_live_and_threaded(
    chromium: Callable[..., AbstractAsyncContextManager[Any]],
    gateway_server: Callable[[Runtime], AbstractAsyncContextManager[LiveGateway]],
    make_runtime: MakeRuntime,
    store_factory: StoreFactory,
) -> None:
    """Ada and Grace, each in a browser of her own, share a group with Linus."""
    from playwright.async_api import expect

    runtime = make_runtime(engine={"model": PRIMARY_MODEL})
    store = await runtime.store()
    await add_user(store, USER, PASSWORD)
    await add_user(store, "grace", PASSWORD)
    await runtime.create_group("Pairing", ["linus"], members=[USER, "grace"])
    async with (
        gateway_server(runtime) as gateway,
        chromium() as first,
        chromium("second-profile") as second,
    ):
        ada, grace = [b.pages[0] if b.pages else await b.new_page() for b in (first, second)]
        problems = watch_page_errors(ada) + watch_page_errors(grace)
        await log_in(ada, gateway.url)
        await log_in(grace, gateway.url, "grace")
        said = {ada: "@linus what should we cache first?", grace: "@linus and what not at all?"}
        for page in (ada, grace):
            await expect(page.get_by_test_id("group-title")).to_have_text("Pairing")
        for page, text in said.items():
            await page.get_by_test_id("message-input").fill(text)
            await page.get_by_test_id("message-input").press("Enter")
            # Each sees the other's message live: once, and in the same order.
            for viewer in (ada, grace):
                await expect(viewer.get_by_test_id("user-message").last).to_contain_text(text)
        for page in (ada, grace):
            linus = bubble(page, "linus")
            await expect(linus).to_have_count(2, timeout=TURN_TIMEOUT_MS)
            for reply in (linus.first, linus.last):
                await expect(reply).to_have_attribute(
                    "data-state", "complete", timeout=TURN_TIMEOUT_MS
                )
        expected = [(said[ada], USER), (said[grace], "grace")]

        async def same_timeline(page: Any, me: str) -> None:
            threads = await page.evaluate(THREADS)
            # No message twice, and each has its reply right under it.
            want = [{"text": t, "mine": author == me, "replies": 1} for t, author in expected]
            assert threads == want, threads
            sent = page.locator('[data-testid="user-message"][data-state="sent"]')
            await expect(sent).to_have_count(2)

        await same_timeline(ada, USER)
        await same_timeline(grace, "grace")
        # After a reload the history shows the same timeline.
        await ada.reload()
        await expect(ada.get_by_test_id("connection")).to_have_attribute("data-state", "live")
        await expect(bubble(ada, "linus")).to_have_count(2)
        await same_timeline(ada, USER)
    assert not problems, "the pages reported errors:\n" + "\n".join(problems)
