"""Team mode in the web UI (real headless Chromium), from the setting to a published skill.

A person opens a group of five VPs, turns team mode on in the settings
panel and asks for a launch plan. The message becomes a task: its card
appears right under the message, with the plan (team, its strategy) and a
row per run. The node runs stream as separate, labelled bubbles side by
side (at least two of them running at once), a node that depends on
another starts after it, then one VP writes the synthesis. The person
opens the evidence, asks for a revision from the card (a second attempt,
done by one VP), accepts it, is offered a skill draft and publishes it;
GET /api/skills then lists the skill. A reload draws the same card.

A second scenario: a group in Chinese draws its card the same way (a tag in
the task's title shows as text), and Abandon stops the team while it works.

The model is scripted per call: the router, planner, skill, guidance and
draft calls by their ``purpose``, the runs by their prompt (``# Execution
Context``). Node replies wait a second and stream slowly, so the parallel
runs can be watched.

Run: ``.venv/bin/pytest tests/test_browser_tasks.py`` (see tests/fixtures/browser.py).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from engine.providers.base import ModelRequest
from engine.providers.scripted import Reply, ScriptedModel
from gateway.users import add_user
from protocol.settings import GroupSettingsPatch
from tests.browser_helpers import (
    PASSWORD,
    TURN_TIMEOUT_MS,
    USER,
    create_group,
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

ROSTER = ["ada", "grace", "linus", "martin", "steve"]
ASK = "Plan our product launch for March"
REVISION = "Make it shorter, one owner per step"
SKILL = "browser-launch-plan"
# Runs stream at this pace (team mode's own calls are not paced).
MODEL = "offline:default?tps=12"
NODE_DELAY_S = 1.0
ZH_NODE_DELAY_S = 4.0
PLAN = {
    "mode": "team",
    "reason": "four areas",
    "strategy": "market, tech and support at once; the message after the market",
    "nodes": [
        {"id": "market", "vp": "steve", "task": "size the market", "depends_on": []},
        {"id": "tech", "vp": "linus", "task": "list the technical risks", "depends_on": []},
        {"id": "support", "vp": "grace", "task": "plan the support rota", "depends_on": []},
        {
            "id": "message",
            "vp": "martin",
            "task": "write the launch message",
            "depends_on": ["market"],
        },
    ],
    "final_synthesis_instruction": "one launch plan with an owner per step",
    "synthesizer": "ada",
}
SINGLE_PLAN = {"mode": "single", "reason": "a small change", "vp": "ada"}
NODE_RUNS = {"market", "tech", "support", "message"}
ZH_ASK = "请为三月的产品发布制定计划"
# Server text in a card is text: a tag in the title shows as typed.
ZH_TITLE = "<b>三月</b>发布计划"


def _prompt(request: ModelRequest) -> str:
    content = request.messages[-1].content if request.messages else ""
    return content if isinstance(content, str) else ""


def launch_team(request: ModelRequest) -> Reply:
    """The scripted model of the scenario (module level: Ray imports it by reference)."""
    purpose = request.context.purpose
    prompt = _prompt(request)
    if purpose == "team.router":
        title = ZH_TITLE if ZH_ASK in prompt else "Launch plan"
        return Reply(json.dumps({"action": "new_task", "reason": "work", "short_title": title}))
    if purpose == "team.planner":
        # The second attempt (the revision) is a small change: one VP does it.
        return Reply(json.dumps(SINGLE_PLAN if "Attempt index: 2" in prompt else PLAN))
    if isinstance(purpose, str) and purpose.startswith("team.skills"):
        # No published skill fits: each node gets a guidance made for it, and
        # the accepted task teaches a new skill (not a revision of one).
        return Reply("[]")
    if purpose == "team.guidance":
        return Reply('{"guidance_name": "focus", "description": "d", "content": "Stay on it."}')
    if purpose == "team.draft":
        draft = {
            "frontmatter": {"name": SKILL, "description": "Plan a product launch as a team"},
            "content": "## Steps\n1. Size the market.\n2. Write the message.",
            "change_reason": "a new kind of task",
        }
        return Reply(json.dumps(draft))
    me = request.context.speaker_id
    if not any(heading in request.system for heading in ("# Execution Context", "# 执行上下文")):
        return Reply(f"{me} chats")
    if prompt.startswith(("Synthesis instruction", "综合说明")):
        return Reply("## Launch plan\n\n- market first\n- then the message\n- support on call")
    if prompt.startswith("Your part"):
        words = " ".join(f"point{i}" for i in range(12))
        return Reply(f"OUT-{me} {words}", delay=NODE_DELAY_S)
    if prompt.startswith("你的部分"):
        # The Chinese group's team is abandoned while it works: its nodes take longer.
        return Reply(f"OUT-{me} 市场 技术 支持", delay=ZH_NODE_DELAY_S)
    return Reply("## Launch plan, short\n\n1. Steve sizes the market.\n2. Martin writes it.")


# Records, on every change of the timeline, which runs the card shows running
# and which run bubbles have not ended, so the test can tell afterwards that
# runs overlapped (waiting on page conditions alone sees only the end state).
RECORD_RUNS = """
() => {
  window.__runSamples = [];
  let last = '';
  const snapshot = () => {
    const running = [...document.querySelectorAll(
      '[data-testid="task-run"][data-run-status="running"]')].map((n) => n.dataset.runId);
    const open = [...document.querySelectorAll('[data-testid="vp-bubble"][data-run-id]')]
      .filter((b) => b.dataset.state === 'streaming').map((b) => b.dataset.runId);
    const key = JSON.stringify([running, open]);
    if (key !== last) window.__runSamples.push({ running, open });
    last = key;
  };
  new MutationObserver(snapshot).observe(document.querySelector('[data-testid="timeline"]'), {
    subtree: true, childList: true, characterData: true, attributes: true,
  });
}
"""

# The card's place: the element right before it, and the thread row after it.
CARD_PLACE = """
(card) => ({
  before: card.previousElementSibling?.dataset.testid,
  beforeText: card.previousElementSibling?.textContent || '',
  after: card.nextElementSibling?.dataset.testid,
})
"""


async def _page(browser: Any) -> Any:
    return browser.pages[0] if browser.pages else await browser.new_page()


async def turn_team_mode_on(page: Any) -> None:
    from playwright.async_api import expect

    await page.get_by_test_id("settings-button").click()
    dialog = page.get_by_test_id("settings-dialog")
    await expect(dialog).to_be_visible()
    box = page.get_by_test_id("setting-team-mode")
    await expect(box).not_to_be_checked()
    await expect(dialog.locator('[data-setting="teamMode"]')).to_contain_text("Team mode")
    await box.check()
    await page.get_by_test_id("settings-save").click()
    await expect(dialog).to_be_hidden()


async def test_a_team_task_from_the_setting_to_a_published_skill(
    chromium: Callable[..., AbstractAsyncContextManager[Any]],
    gateway_server: Callable[[Runtime], AbstractAsyncContextManager[LiveGateway]],
    make_runtime: MakeRuntime,
    store_factory: StoreFactory,
    tmp_path: Path,
) -> None:
    from playwright.async_api import expect

    started = time.monotonic()
    runtime = make_runtime(
        engine={"model": MODEL}, provider_overrides={"offline": ScriptedModel(launch_team)}
    )
    await add_user(await runtime.store(), USER, PASSWORD)
    shots = screenshot_dir(tmp_path)
    async with gateway_server(runtime) as gateway, chromium() as browser:
        page = await _page(browser)
        problems = watch_page_errors(page)
        await log_in(page, gateway.url)
        await create_group(page, "Launch", ROSTER)
        await turn_team_mode_on(page)
        groups = await page.evaluate("fetch('/api/groups').then((r) => r.json())")
        listed = groups["groups"] if isinstance(groups, dict) else groups
        assert [g["settings"]["teamMode"] for g in listed if g["name"] == "Launch"] == [True]

        # -- the ask becomes a task, its nodes run side by side -------------------
        await page.evaluate(RECORD_RUNS)
        box = page.get_by_test_id("message-input")
        await box.fill(ASK)
        await box.press("Enter")
        card = page.get_by_test_id("task-card")
        await expect(card).to_have_count(1, timeout=TURN_TIMEOUT_MS)
        await expect(card.get_by_test_id("task-title")).to_have_text("Launch plan")
        runs = card.get_by_test_id("task-run")
        await expect(runs).to_have_count(5, timeout=TURN_TIMEOUT_MS)
        await expect(card.get_by_test_id("task-mode")).to_have_attribute("data-mode", "team")
        await expect(card.get_by_test_id("task-strategy")).to_have_text(PLAN["strategy"])
        await expect(card).to_have_attribute("data-status", "running")
        await expect(card.get_by_test_id("task-status")).to_have_text("running")
        # Only Abandon applies while the team works.
        await expect(card.get_by_test_id("task-abandon")).to_be_visible()
        await expect(card.get_by_test_id("task-accept")).to_be_hidden()
        await expect(card.get_by_test_id("task-revise")).to_be_hidden()
        market = card.locator('[data-testid="task-run"][data-run-id="market"]')
        await expect(market).to_contain_text("@steve")
        await expect(market).to_contain_text("size the market")
        await expect(card).to_have_attribute("data-status", "review", timeout=TURN_TIMEOUT_MS)
        await expect(card.get_by_test_id("task-status")).to_have_text("in review")
        for run in await runs.all():
            await expect(run).to_have_attribute("data-run-status", "done")
        await expect(market.get_by_test_id("task-run-skills")).to_contain_text("focus")
        final = card.locator('[data-testid="task-run"][data-final="true"]')
        await expect(final).to_have_attribute("data-run-id", "synthesis")
        await expect(final.get_by_test_id("task-run-final")).to_be_visible()

        # The card sits right under the message; the runs' row follows it.
        place = await card.evaluate(CARD_PLACE)
        assert place["before"] == "user-message" and ASK in place["beforeText"], place
        assert place["after"] == "thread", place
        # Each run is a bubble of its own, labelled with its node, in one row.
        bubbles = page.locator('[data-testid="vp-bubble"][data-task-id]')
        await expect(bubbles).to_have_count(5)
        labels = await page.get_by_test_id("task-label").all_text_contents()
        assert sorted(labels) == sorted([f"task · {r}" for r in NODE_RUNS] + ["synthesis"])
        row = page.locator('[data-testid="task-card"] + .thread [data-testid="replies"]')
        await expect(row.get_by_test_id("vp-bubble")).to_have_count(5)
        synthesis = page.locator('[data-testid="vp-bubble"][data-run-id="synthesis"]')
        await expect(synthesis).to_have_attribute("data-vp", "ada")
        await expect(synthesis.get_by_test_id("bubble-text").locator("h2")).to_have_text(
            "Launch plan"
        )
        # A task's runs are asked again with Revise on the card: no Regenerate on them.
        await expect(synthesis.get_by_test_id("copy-message")).to_be_attached()
        await expect(bubbles.get_by_test_id("regenerate")).to_have_count(0)
        martin = page.locator('[data-testid="vp-bubble"][data-run-id="message"]')
        await expect(martin.get_by_test_id("bubble-text")).to_contain_text("OUT-martin")

        samples: list[dict[str, list[str]]] = await page.evaluate("window.__runSamples")
        together = max((len(set(s["running"]) & NODE_RUNS) for s in samples), default=0)
        assert together >= 2, f"no two runs were running at once: {samples}"
        streaming = max((len(set(s["open"]) & NODE_RUNS) for s in samples), default=0)
        assert streaming >= 2, f"no two node bubbles were open at once: {samples}"
        # The dependent node waited for its dependency; the synthesis for every node.
        for sample in samples:
            if "message" in sample["running"]:
                assert "market" not in sample["running"], sample
            if "synthesis" in sample["running"]:
                assert not set(sample["running"]) & NODE_RUNS, sample
        await page.screenshot(path=str(shots / "yeaft-ui-task-review.png"))

        # -- evidence ----------------------------------------------------------------
        evidence = card.get_by_test_id("task-evidence-body")
        await expect(evidence).to_be_hidden()
        await card.get_by_test_id("task-evidence").click()
        await expect(evidence).to_be_visible()
        await expect(evidence.get_by_test_id("task-evidence-run")).to_have_count(5)
        await expect(evidence).to_contain_text("Attempt 1 · team")
        steve = evidence.locator('[data-testid="task-evidence-run"][data-run-id="market"]')
        await expect(steve.get_by_test_id("task-evidence-output")).to_contain_text("OUT-steve")
        await card.screenshot(path=str(shots / "yeaft-ui-task-evidence.png"))
        await card.get_by_test_id("task-evidence").click()
        await expect(evidence).to_be_hidden()

        # -- a revision from the card: a second attempt, by one VP --------------------
        await card.get_by_test_id("task-revise").click()
        await expect(card.get_by_test_id("task-revise-text")).to_be_focused()
        await card.get_by_test_id("task-revise-text").fill(REVISION)
        await card.get_by_test_id("task-revise-send").click()
        await expect(card.get_by_test_id("task-revise-text")).to_be_hidden()
        await expect(page.get_by_test_id("user-message").last).to_contain_text(REVISION)
        await expect(card.get_by_test_id("task-attempt")).to_have_text(
            "Attempt 2", timeout=TURN_TIMEOUT_MS
        )
        await expect(card).to_have_attribute("data-status", "review", timeout=TURN_TIMEOUT_MS)
        await expect(card.get_by_test_id("task-mode")).to_have_attribute("data-mode", "single")
        await expect(runs).to_have_count(1)
        await expect(runs).to_have_attribute("data-run-id", "single")
        single = page.locator('[data-testid="vp-bubble"][data-run-id="single"]')
        await expect(single).to_contain_text("Launch plan, short")

        # -- accepted; the skill draft it taught is published --------------------------
        await card.get_by_test_id("task-accept").click()
        await expect(card).to_have_attribute("data-status", "accepted")
        await expect(card.get_by_test_id("task-status")).to_have_text("accepted")
        await expect(card.get_by_test_id("task-note")).to_have_text(f"Accepted by {USER}.")
        for gone in ("task-accept", "task-revise", "task-abandon"):
            await expect(card.get_by_test_id(gone)).to_be_hidden()
        draft = card.get_by_test_id("task-draft")
        await expect(draft).to_be_visible(timeout=TURN_TIMEOUT_MS)
        await expect(draft.get_by_test_id("task-draft-name")).to_have_text(SKILL)
        await expect(draft).to_contain_text("Plan a product launch as a team")
        skills = await page.evaluate("fetch('/api/skills').then((r) => r.json())")
        assert SKILL not in [s["name"] for s in skills["skills"]]
        await draft.get_by_test_id("task-draft-publish").click()
        await expect(draft.get_by_test_id("task-draft-status")).to_have_text("published")
        await expect(draft.get_by_test_id("task-draft-publish")).to_have_count(0)
        skills = await page.evaluate("fetch('/api/skills').then((r) => r.json())")
        learned = [s for s in skills["skills"] if s["name"] == SKILL]
        assert learned and learned[0]["source"] == "learned", skills
        await page.screenshot(path=str(shots / "yeaft-ui-task-accepted.png"))

        # -- a reload draws the same card, under the same message ----------------------
        task_id = await card.get_attribute("data-task-id")
        await page.reload()
        await expect(page.get_by_test_id("connection")).to_have_attribute("data-state", "live")
        await expect(card).to_have_count(1)
        await expect(card).to_have_attribute("data-task-id", task_id or "")
        await expect(card).to_have_attribute("data-status", "accepted")
        await expect(card.get_by_test_id("task-attempt")).to_have_text("Attempt 2")
        await expect(card.get_by_test_id("task-draft-status")).to_have_text("published")
        place = await card.evaluate(CARD_PLACE)
        assert place["before"] == "user-message" and ASK in place["beforeText"], place
        # The stored replies name their runs: the bubbles keep their labels.
        await expect(page.get_by_test_id("task-label")).to_have_count(6)
        await expect(synthesis.get_by_test_id("task-label")).to_have_text("synthesis")
        await card.get_by_test_id("task-evidence").click()
        await expect(card.get_by_test_id("task-evidence-attempt")).to_have_count(2)
        await expect(evidence.locator(".task-accepted")).to_have_count(1)
    assert not problems, "the page reported errors:\n" + "\n".join(problems)
    print(f"team mode browser scenario took {time.monotonic() - started:.1f} s")


async def test_a_chinese_team_task_is_abandoned_while_it_runs(
    chromium: Callable[..., AbstractAsyncContextManager[Any]],
    gateway_server: Callable[[Runtime], AbstractAsyncContextManager[LiveGateway]],
    make_runtime: MakeRuntime,
    store_factory: StoreFactory,
) -> None:
    """A group in Chinese draws its card the same way; Abandon stops the running team."""
    from playwright.async_api import expect

    runtime = make_runtime(
        engine={"model": MODEL}, provider_overrides={"offline": ScriptedModel(launch_team)}
    )
    await add_user(await runtime.store(), USER, PASSWORD)
    settings = GroupSettingsPatch(team_mode=True, language="zh")
    await runtime.create_group("发布", ROSTER, members=[USER], settings=settings)
    async with gateway_server(runtime) as gateway, chromium() as browser:
        page = await _page(browser)
        problems = watch_page_errors(page)

        async def confirm(dialog: Any) -> None:
            assert ZH_TITLE in dialog.message
            await dialog.accept()

        page.on("dialog", confirm)
        await log_in(page, gateway.url)
        await expect(page.get_by_test_id("group-title")).to_have_text("发布")
        box = page.get_by_test_id("message-input")
        await box.fill(ZH_ASK)
        await box.press("Enter")
        card = page.get_by_test_id("task-card")
        await expect(card.get_by_test_id("task-title")).to_have_text(
            ZH_TITLE, timeout=TURN_TIMEOUT_MS
        )
        await expect(card.locator("b")).to_have_count(0)
        running = card.locator('[data-testid="task-run"][data-run-status="running"]')
        await expect(running.first).to_be_visible(timeout=TURN_TIMEOUT_MS)
        await expect(page.get_by_test_id("task-label").first).to_be_visible()
        await card.get_by_test_id("task-abandon").click()
        await expect(card).to_have_attribute("data-status", "abandoned")
        await expect(card.get_by_test_id("task-status")).to_have_text("abandoned")
        await expect(card.get_by_test_id("task-note")).to_have_text("Abandoned.")
        for gone in ("task-accept", "task-revise", "task-abandon"):
            await expect(card.get_by_test_id(gone)).to_be_hidden()
        # The team stops: its running nodes are aborted, the synthesis never starts.
        await expect(running).to_have_count(0, timeout=TURN_TIMEOUT_MS)
        failed = card.locator('[data-testid="task-run"][data-run-status="failed"]')
        await expect(failed.first).to_be_visible()
        await expect(failed.first.get_by_test_id("task-run-error")).not_to_be_empty()
        synthesis = card.locator('[data-testid="task-run"][data-run-id="synthesis"]')
        await expect(synthesis).to_have_attribute(
            "data-run-status", "skipped", timeout=TURN_TIMEOUT_MS
        )
        await expect(
            page.locator('[data-testid="vp-bubble"][data-run-id="synthesis"]')
        ).to_have_count(0)
    assert not problems, "the page reported errors:\n" + "\n".join(problems)
