"""Messages in the web UI (real headless Chromium): Markdown, safety, actions,
search, export, unread counts and the composer's limits.

- Personas are sorted by name in the picker and long roles wrap.
- A reply with a table and a code block renders as Markdown; the code is
  highlighted and its copy button puts the code on the clipboard; tokens
  and cost show under the reply live and the same after a reload, and the
  group's total shows in the header.
- A message carrying ``<script>`` and an ``<img onerror>`` (from a person and
  from a VP) renders inert: raw HTML shows as text, no script runs, no
  handler attribute exists, links open in a new tab without an opener,
  ``javascript:`` links lose their target.
- Regenerate runs the VP again on the same message; the old reply stays,
  dimmed, after a reload too. Delete takes one's own message off every tab.
- Search finds a message in another group and opens it there; export
  downloads Markdown and JSON; unread counts come from the server.
- A message over the frame limit is refused in the composer and never left
  "sending…"; one left in the outbox by an older page is dropped.

Run: ``.venv/bin/pytest tests/test_browser_messages.py`` (see tests/fixtures/browser.py).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from coordinator.commands import Ingest, WaitIdle
from engine.providers.base import ModelRequest
from engine.providers.scripted import Reply, ScriptedModel
from gateway.users import add_user
from tests.browser_helpers import (
    PASSWORD,
    TURN_TIMEOUT_MS,
    USER,
    bubble,
    downloaded,
    log_in,
    screenshot_dir,
    watch_page_errors,
)
from tests.fixtures.ray_cluster import MakeRuntime
from tests.fixtures.stores import StoreFactory

if TYPE_CHECKING:
    from coordinator.runtime import Runtime
    from tests.fixtures.browser import LiveGateway

pytestmark = [
    pytest.mark.parametrize("store_factory", ["embedded"], indirect=True),
    pytest.mark.timeout(300),
]

CODE = "def cache(key):\n    return store.get(key)"
TABLE_REPLY = (
    "## Options\n\n| policy | hit rate |\n| --- | --- |\n| LRU | 91% |\n| LFU | 88% |\n\n"
    f"```python\n{CODE}\n```\n\n- keep it **simple**\n- measure first"
)
# An image that cannot decode (its error fires without any network) and a script.
EVIL = (
    "<script>window.__pwned = 'script'</script>"
    '<img src="data:image/png;base64,AAAA" onerror="window.__pwned = \'img\'">'
    " [docs](https://example.invalid/docs) [bad](javascript:window.__pwned='link')"
)


def markdown_vp(request: ModelRequest) -> Reply:
    """Answers "table" with a table and code, "evil" with the evil payload, else briefly."""
    said = next((m.content for m in reversed(request.messages) if m.role == "user"), "")
    if "table" in said:
        return Reply(TABLE_REPLY)
    if "evil" in said:
        return Reply(f"Echo: {EVIL}")
    return Reply(f"noted: {said[-40:]}")


def run_id(request: ModelRequest) -> Reply:
    """Each answer differs, so a regenerated reply is told from the first."""
    count = sum(1 for m in request.messages if m.role == "assistant")
    return Reply(f"answer number {count + 1}")


async def _page(browser: Any) -> Any:
    return browser.pages[0] if browser.pages else await browser.new_page()


async def test_markdown_code_copy_usage_and_no_script_runs(
    chromium: Callable[..., AbstractAsyncContextManager[Any]],
    gateway_server: Callable[[Runtime], AbstractAsyncContextManager[LiveGateway]],
    make_runtime: MakeRuntime,
    store_factory: StoreFactory,
    tmp_path: Path,
) -> None:
    from playwright.async_api import expect

    runtime = make_runtime(provider_overrides={"offline": ScriptedModel(markdown_vp)})
    await add_user(await runtime.store(), USER, PASSWORD)
    group = await runtime.create_group("Markdown", ["linus"], members=[USER])
    async with gateway_server(runtime) as gateway, chromium() as browser:
        await browser.grant_permissions(["clipboard-read", "clipboard-write"])
        page = await _page(browser)
        problems = watch_page_errors(page)
        await log_in(page, gateway.url)
        # Personas are listed by name in the picker, and long roles wrap.
        picker = await page.evaluate(
            """() => [...document.querySelectorAll('[data-testid="roster-option"]')].map((o) => ({
              name: o.querySelector('.roster-name').textContent,
              wrap: getComputedStyle(o.querySelector('.roster-role')).whiteSpace,
            }))"""
        )
        names = [p["name"] for p in picker]
        assert len(names) > 5 and names == sorted(names, key=str.casefold)
        assert {p["wrap"] for p in picker} == {"normal"}
        box = page.get_by_test_id("message-input")
        await box.fill("@linus show me a table")
        await box.press("Enter")
        linus = bubble(page, "linus")
        await expect(linus).to_have_attribute("data-state", "complete", timeout=TURN_TIMEOUT_MS)
        # The web UI names its channel at the handshake; the message keeps it.
        sent = await (await runtime.store()).read_messages(group.id)
        assert [m.meta.get("channel") for m in sent if m.role == "user"] == ["web"]

        text = linus.get_by_test_id("bubble-text")
        await expect(text.locator("h2")).to_have_text("Options")
        await expect(text.locator("table th")).to_have_text(["policy", "hit rate"])
        await expect(text.locator("table tbody tr")).to_have_count(2)
        await expect(text.locator("ul li strong")).to_have_text("simple")
        block = text.get_by_test_id("code-block")
        await expect(block.locator(".code-lang")).to_have_text("python")
        await expect(block.locator("code.hljs .hljs-keyword").first).to_have_text("def")
        await block.get_by_test_id("code-copy").click()
        await expect(block.get_by_test_id("code-copy")).to_have_text("Copied")
        assert await page.evaluate("navigator.clipboard.readText()") == CODE
        await linus.get_by_test_id("copy-message").click()
        assert await page.evaluate("navigator.clipboard.readText()") == TABLE_REPLY
        # The button says so, and its hover-only row stays in view while it
        # does, even once the pointer and the focus have moved on.
        await box.click()
        copied = linus.get_by_test_id("copy-message")
        await expect(copied).to_have_text("Copied")
        await expect(copied).to_have_attribute("data-copied", "true")
        opacity = await linus.locator(".msg-actions").evaluate(
            "(row) => { row.getAnimations().forEach((a) => a.finish());"
            " return getComputedStyle(row).opacity; }"
        )
        assert opacity == "1"
        await expect(copied).to_have_text("Copy")

        # Tokens and cost under the reply, and the group's total in the header.
        assert int(await linus.get_attribute("data-tokens-out") or 0) > 0
        footer = await linus.get_by_test_id("bubble-footer").text_content() or ""
        assert " out tokens" in footer
        usage = page.get_by_test_id("group-usage")
        await expect(usage).to_contain_text("tokens")
        await expect(usage).to_have_attribute("data-turns", "1")

        # A person's and a VP's message with a script, a handler and a bad link.
        await box.fill(f"@linus evil {EVIL}")
        await box.press("Enter")
        await expect(linus).to_have_count(2)
        await expect(linus.nth(1)).to_have_attribute(
            "data-state", "complete", timeout=TURN_TIMEOUT_MS
        )
        mine = page.get_by_test_id("user-message").last
        await expect(mine).to_have_attribute("data-state", "sent")
        # Raw HTML is shown as the text it is: tags visible, nothing of it live.
        await expect(mine.get_by_test_id("user-text")).to_contain_text(
            "<script>window.__pwned = 'script'</script><img src="
        )
        await expect(linus.nth(1).get_by_test_id("bubble-text")).to_contain_text("onerror=")
        await expect(page.locator('[data-testid="timeline"] img')).to_have_count(0)
        state = await page.evaluate(
            """() => ({
              pwned: window.__pwned ?? null,
              scripts: document.querySelectorAll('#timeline script').length,
              handlers: [...document.querySelectorAll('#timeline *')]
                .filter((n) => [...n.attributes].some((a) => a.name.startsWith('on'))).length,
              links: [...document.querySelectorAll('#timeline .markdown a')].map((a) => ({
                text: a.textContent, href: a.getAttribute('href'),
                target: a.getAttribute('target'), rel: a.getAttribute('rel'),
              })),
            })"""
        )
        assert state["pwned"] is None and state["scripts"] == 0 and state["handlers"] == 0
        docs = [link for link in state["links"] if link["text"] == "docs"]
        assert len(docs) == 2
        assert all(d["target"] == "_blank" and "noopener" in d["rel"] for d in docs)
        bad = [link for link in state["links"] if link["text"] == "bad"]
        assert len(bad) == 2
        assert all(not (link["href"] or "").startswith("javascript") for link in bad)

        # After a reload: the same Markdown, the same usage line.
        await page.reload()
        await expect(page.get_by_test_id("connection")).to_have_attribute("data-state", "live")
        await expect(linus).to_have_count(2)
        first = linus.first
        await expect(first.get_by_test_id("bubble-text").locator("table th")).to_have_count(2)
        await expect(first.locator("code.hljs .hljs-keyword").first).to_have_text("def")
        again = await first.get_by_test_id("bubble-footer").text_content() or ""
        assert (
            again.split(" · ", 1)[1].split(" · ")[:2] == footer.split(" · ", 1)[1].split(" · ")[:2]
        )
        assert await page.evaluate("window.__pwned ?? null") is None
        await page.screenshot(path=str(screenshot_dir(tmp_path) / "yeaft-ui-markdown.png"))
    assert not problems, "the page reported errors:\n" + "\n".join(problems)


async def test_regenerate_delete_search_export_unread_and_limits(
    chromium: Callable[..., AbstractAsyncContextManager[Any]],
    gateway_server: Callable[[Runtime], AbstractAsyncContextManager[LiveGateway]],
    make_runtime: MakeRuntime,
    store_factory: StoreFactory,
    tmp_path: Path,
) -> None:
    from playwright.async_api import expect

    runtime = make_runtime(provider_overrides={"offline": ScriptedModel(run_id)})
    store = await runtime.store()
    await add_user(store, USER, PASSWORD)
    await add_user(store, "bob", PASSWORD)
    await runtime.create_group("Main", ["linus"], members=[USER])
    other = await runtime.create_group("Zoo", ["steve"], members=[USER, "bob"])
    async with gateway_server(runtime) as gateway, chromium() as browser:
        page = await _page(browser)
        problems = watch_page_errors(page)
        page.on("dialog", lambda dialog: dialog.accept())
        await log_in(page, gateway.url)
        await expect(page.get_by_test_id("group-title")).to_have_text("Main")
        box = page.get_by_test_id("message-input")

        # Regenerate: a second reply to the same message; the first stays, dimmed.
        await box.fill("@linus pick a cache")
        await box.press("Enter")
        linus = bubble(page, "linus")
        await expect(linus).to_have_attribute("data-state", "complete", timeout=TURN_TIMEOUT_MS)
        await expect(linus.get_by_test_id("bubble-text")).to_have_text("answer number 1")
        await linus.get_by_test_id("regenerate").click()
        await expect(linus).to_have_count(2, timeout=TURN_TIMEOUT_MS)
        await expect(linus.nth(1)).to_have_attribute(
            "data-state", "complete", timeout=TURN_TIMEOUT_MS
        )
        await expect(linus.nth(1).get_by_test_id("bubble-text")).to_have_text("answer number 1")
        await expect(linus.first).to_have_attribute("data-superseded", "true")
        thread = page.locator(".thread").filter(has=linus.first)
        await expect(thread.locator('[data-testid="vp-bubble"]')).to_have_count(2)
        await expect(page.get_by_test_id("group-usage")).to_have_attribute("data-turns", "2")

        # Delete one's own message: gone in this tab and a second one, and after a reload.
        second = await browser.new_page()
        await second.goto(gateway.url)
        await expect(second.get_by_test_id("connection")).to_have_attribute("data-state", "live")
        await box.fill("@linus forget this secret")
        await box.press("Enter")
        doomed = page.get_by_test_id("user-message").filter(has_text="forget this secret")
        await expect(doomed).to_have_attribute("data-state", "sent")
        other_tab = second.get_by_test_id("user-message").filter(has_text="forget this secret")
        await expect(other_tab).to_have_count(1)
        await expect(linus).to_have_count(3, timeout=TURN_TIMEOUT_MS)
        await doomed.get_by_test_id("delete-message").click()
        await expect(doomed).to_have_count(0)
        await expect(other_tab).to_have_count(0)
        # Not quoted anywhere either (the line over the replies to it).
        await expect(page.get_by_test_id("timeline")).not_to_contain_text("forget this secret")
        await second.close()

        # Unread: bob writes in the other group; the list shows it from the server.
        await runtime.send(Ingest(other.id, "bob", "@steve the quokka enclosure needs a lock"))
        assert await runtime.send(WaitIdle(other.id))
        await page.evaluate("document.dispatchEvent(new Event('visibilitychange'))")
        zoo = page.locator(f'[data-testid="group-item"][data-group-id="{other.id}"]')
        await expect(zoo.get_by_test_id("unread")).to_have_text("2")
        await expect(zoo.get_by_test_id("group-last")).to_contain_text("answer number")

        # Search finds bob's message and opens the group at it.
        await page.get_by_test_id("search-input").fill("QUOKKA encl")
        hit = page.get_by_test_id("search-hit")
        await expect(hit).to_have_count(1)
        await expect(hit).to_contain_text("Zoo")
        await expect(hit).to_contain_text("bob")
        await expect(hit).to_contain_text("quokka enclosure")
        await hit.click()
        await expect(page.get_by_test_id("group-title")).to_have_text("Zoo")
        focused = page.locator('[data-testid="user-message"][data-focused="true"]')
        await expect(focused).to_contain_text("quokka enclosure")
        await expect(zoo.get_by_test_id("unread")).to_have_count(0)
        await page.get_by_test_id("search-input").fill("nothing-like-this")
        await expect(page.get_by_test_id("search-empty")).to_be_visible()

        # Export the open group as Markdown and as JSON.
        await page.get_by_test_id("export-toggle").click()
        async with page.expect_download() as md_info:
            await page.get_by_test_id("export-markdown").click()
        markdown = await downloaded(md_info)
        assert markdown.startswith("# Zoo\n") and "the quokka enclosure needs a lock" in markdown
        await page.get_by_test_id("export-toggle").click()  # it closed once a format was chosen
        async with page.expect_download() as json_info:
            await page.get_by_test_id("export-json").click()
        document = json.loads(await downloaded(json_info))
        assert [m["author"] for m in document["messages"]] == ["bob", "steve"]

        # Over the limit: refused in the composer, never queued, not there after a reload.
        await box.fill("x" * 85_000)
        counter = page.get_by_test_id("composer-counter")
        await expect(counter).to_be_visible()
        await expect(counter).to_have_attribute("data-over", "false")
        await box.fill("x" * 120_000)
        await expect(counter).to_have_attribute("data-over", "true")
        await expect(page.get_by_test_id("composer-error")).to_contain_text("Too long to send")
        await expect(page.get_by_test_id("send-button")).to_be_disabled()
        before = await page.get_by_test_id("user-message").count()
        await box.press("Enter")
        await expect(page.get_by_test_id("user-message")).to_have_count(before)
        assert await page.evaluate("sessionStorage.getItem('yeaft.outbox') || '[]'") == "[]"
        # A frame left in the outbox by an older page, too large to ever pass.
        stale = {
            "type": "yeaft_session_chat",
            "groupId": other.id,
            "text": "y" * 300_000,
            "clientMessageId": "m_stale",
        }
        await page.evaluate(
            "(f) => sessionStorage.setItem('yeaft.outbox', JSON.stringify([f]))", stale
        )
        await page.reload()
        await expect(page.get_by_test_id("connection")).to_have_attribute("data-state", "live")
        await expect(page.get_by_test_id("group-title")).to_have_text("Zoo")
        await expect(page.get_by_test_id("toast").first).to_contain_text("too long")
        await expect(
            page.locator('[data-testid="user-message"][data-state="pending"]')
        ).to_have_count(0)
        assert await page.evaluate("sessionStorage.getItem('yeaft.outbox')") == "[]"

        # After a reload the regenerated reply and the deletion are as they were.
        await page.get_by_test_id("group-item").filter(has_text="Main").click()
        await expect(page.get_by_test_id("group-title")).to_have_text("Main")
        await expect(linus).to_have_count(3)
        await expect(linus.first).to_have_attribute("data-superseded", "true")
        await expect(page.get_by_test_id("user-message").filter(has_text="secret")).to_have_count(0)
        await page.screenshot(path=str(screenshot_dir(tmp_path) / "yeaft-ui-actions.png"))
    assert not problems, "the page reported errors:\n" + "\n".join(problems)
