"""The offline model as a first-time user meets it: short, on topic, in the group's language, paced.

A demo model cannot be clever, but it must not embarrass: after many turns
with memory its replies stay short, answer the person's question, never
paste recalled memories or dream summaries, and never repeat the names of
the VPs a person @mentioned. Under ``yeaft serve`` it streams at a visible
pace; tests and benchmarks ask for no pauses explicitly.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from coordinator.commands import Ingest, WaitIdle
from engine.call_context import CallContext, Language, Speaker
from engine.messages import Message
from engine.providers.base import ModelRequest
from engine.providers.offline import OfflineProvider
from engine.providers.offline_voice import MAX_REPLY_WORDS, dream_summary, persona_reply
from engine.providers.registry import ProviderRegistry
from engine.settings import EngineConfig, EngineSettings
from protocol import GroupSettingsPatch
from tests.fixtures.ray_cluster import OFFLINE_ENGINE, MakeRuntime

ROOT = Path(__file__).resolve().parents[1]
LINUS = Speaker("linus", name="Linus Torvalds", name_zh="林纳斯", role="systems engineer")
# What a reply must never contain: memory-line labels, tags, dream summaries,
# speaker labels, @mentions or the mentioned names run together.
LEAKS = re.compile(
    r"- \[|#\w|Topics:|Recent discussion|\[ann\]|\[@|@\w|linus steve|steve linus", re.IGNORECASE
)


def request(
    *texts: str, memory: list[str] | None = None, language: Language | None = None
) -> ModelRequest:
    messages = [Message.user(t, speaker="ann") for t in texts]
    context = CallContext(speaker=LINUS, language=language, memory=tuple(memory or ()))
    return ModelRequest(model="default", system="", messages=messages, context=context)


def test_a_reply_quotes_the_question_without_mentions_or_labels() -> None:
    reply = persona_reply(request("[ann] @linus @steve how should we cache profile pages?"))
    assert '"how should we cache profile pages?"' in reply
    assert not LEAKS.search(reply) and reply.endswith("— Linus Torvalds")


def test_a_long_chain_answers_the_person_not_the_previous_vp() -> None:
    reply = persona_reply(
        request(
            "[ann] @steve what do we cut from the release?",
            "[@steve] Here is how I see it. On the release, I would cut the wizard. @linus?",
        )
    )
    assert "what do we cut from the release?" in reply and "Picking up from steve" in reply
    assert "wizard" not in reply and not LEAKS.search(reply)


def test_memories_are_a_short_clause_and_summaries_are_left_out() -> None:
    long_fact = "our cache is Redis with a five minute TTL behind a CDN in three regions " * 3
    memory = [
        "- [notes summary, 2026-11-01] Topics: how do we cache?; what to cut",
        f"- [user, 2026-11-01] {long_fact} #cache #infra",
    ]
    reply = persona_reply(request("[ann] and the cache?", memory=memory))
    assert "You told me earlier: our cache is Redis" in reply
    assert len(reply) < 400 and not LEAKS.search(reply)
    assert long_fact.strip() not in reply


def test_replies_follow_the_group_language() -> None:
    zh = persona_reply(request("[ann] @linus 缓存应该怎么做？", language="zh"))
    assert "缓存应该怎么做？" in zh and zh.endswith("—— 林纳斯") and "I would" not in zh
    # Without a group setting, a question in Chinese gets a Chinese reply.
    guessed = persona_reply(request("[ann] 我们先砍掉什么？"))
    assert "我会" in guessed
    assert "I would" in persona_reply(request("[ann] 缓存？", language="en"))


def test_a_dream_summary_lists_what_people_asked() -> None:
    transcript = "\n".join(
        [
            "Recent conversation in this group:",
            "ann: [ann] @linus how do we cache the profile pages across all regions at once?",
            "assistant: Here is how I see it. On caching, I would measure. — Linus",
            "steve: [@steve] cut the wizard",
            "bob: [bob] what should we cut?",
        ]
    )
    summary = dream_summary(transcript)
    assert summary.startswith("Topics: how do we cache the profile pages")
    assert summary.endswith("; what should we cut?") and "Here is how" not in summary
    assert "wizard" not in summary and "@" not in summary and len(summary) < 200


QUESTIONS = [
    "@linus @steve how should we cache the profile pages?",
    "@linus @steve remember that our cache is Redis with a five minute TTL",
    "@linus @steve what breaks first in the cache when traffic doubles?",
    "@steve what do we cut from the release?",
    "@linus is the cache invalidation by key good enough?",
    "@linus @steve who owns the session data?",
    "@all what should we measure first?",
    "@linus @steve should the cache live at the edge?",
    "@steve how do we explain the cache to customers?",
    "@linus @steve what is the smallest version we can ship?",
    "@linus how big can the cache grow?",
    "@linus @steve remember that the launch is on Friday",
    "@steve is Friday realistic for the launch?",
    "@linus @steve which metric tells us the cache works?",
    "@linus what do we log when the cache misses?",
    "@linus @steve do we need a second region?",
    "@steve what goes in the launch note?",
    "@linus @steve how do we roll back the cache change?",
    "@all anything else before Friday?",
    "@linus @steve one sentence each: ship or wait?",
]


async def test_twenty_turns_with_memory_stay_short_and_on_topic(
    make_runtime: MakeRuntime,
) -> None:
    # Dreams every 5 turns, so later turns recall dream summaries as well as facts.
    rt = make_runtime(dream_every_turns=5)
    group = await rt.create_group("team", ["linus", "steve"], members=["ann"])
    for text in QUESTIONS:
        await rt.send(Ingest(group.id, "ann", text))
        assert await rt.send(WaitIdle(group.id))
    log = await (await rt.store()).read_messages(group.id, limit=200)
    replies = [m for m in log if m.role == "assistant"]
    assert len(replies) >= 30
    recalled = 0
    for reply in replies:
        words = reply.text.split()
        assert 3 <= len(words) <= MAX_REPLY_WORDS + 4, reply.text
        assert not LEAKS.search(reply.text), reply.text
        recalled += "You told me earlier:" in reply.text
    assert recalled, "no reply used a recalled memory"
    # Each answer names the question it answers (cleaned of its mentions).
    by_trigger = {m.id: m for m in log if m.role == "user"}
    for reply in replies:
        trigger = by_trigger.get(str(reply.meta.get("causedBy", [""])[-1]))
        if trigger is None or "remember that" in trigger.text:
            continue
        question = re.sub(r"@\w+\s*", "", trigger.text).strip()
        assert question[:25] in reply.text, (question, reply.text)


async def test_a_chinese_group_gets_chinese_replies(make_runtime: MakeRuntime) -> None:
    rt = make_runtime()
    group = await rt.create_group(
        "团队", ["linus"], members=["ann"], settings=GroupSettingsPatch(language="zh")
    )
    await rt.send(Ingest(group.id, "ann", "@linus what should we cache?"))
    assert await rt.send(WaitIdle(group.id))
    log = await (await rt.store()).read_messages(group.id)
    assert "我会" in log[-1].text and "关于「what should we cache?」" in log[-1].text


# -- pace ------------------------------------------------------------------------
def test_serve_paces_the_offline_model_and_tests_do_not(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("YEAFT_OFFLINE_TPS", raising=False)
    served = EngineSettings().to_config()
    assert served.offline_tps == 40
    provider, _ = ProviderRegistry(served).resolve("offline:default")
    assert isinstance(provider, OfflineProvider) and provider.default_tps == 40
    monkeypatch.setenv("YEAFT_OFFLINE_TPS", "0")
    assert EngineSettings().to_config().offline_tps == 0
    # Engines built in code, and the tests' runtimes, stream without pauses.
    assert EngineConfig().offline_tps == 0 and OFFLINE_ENGINE.offline_tps == 0


async def _stream_seconds(provider: OfflineProvider, model: str) -> tuple[float, int]:
    started = time.monotonic()
    tokens = 0
    async for item in provider.stream(
        ModelRequest(model=model, system="", messages=[Message.user("pace?")])
    ):
        tokens += type(item).__name__ == "TextDelta"
    return time.monotonic() - started, tokens


async def test_the_default_pace_is_visible_and_a_model_string_overrides_it() -> None:
    paced = OfflineProvider(default_tps=40)
    seconds, tokens = await _stream_seconds(paced, "default?tokens=21")
    assert tokens == 21 and seconds >= 20 / 40  # 20 pauses of 1/40 s
    fast, tokens = await _stream_seconds(paced, "default?tokens=21&tps=0")
    assert tokens == 21 and fast < 0.2
    unpaced, _ = await _stream_seconds(OfflineProvider(), "default?tokens=21")
    assert unpaced < 0.2


def test_every_serve_the_tests_and_benchmarks_start_sets_the_pace() -> None:
    # A `yeaft serve` subprocess reads YEAFT_OFFLINE_TPS (default 40): each
    # place that starts one must say 0, or the suite and the numbers slow down.
    starters = [
        p
        for p in [*ROOT.joinpath("tests").glob("*.py"), *ROOT.joinpath("bench").glob("*.py")]
        if '"serve"' in p.read_text(encoding="utf-8") and p.name != Path(__file__).name
    ]
    assert {p.name for p in starters} >= {"test_restart.py", "serve.py", "overload.py"}
    for path in starters:
        text = path.read_text(encoding="utf-8")
        # tests.test_cli's ``yeaft`` helper sets the pace for the commands it runs.
        assert 'YEAFT_OFFLINE_TPS="0"' in text or "from tests.test_cli import yeaft" in text, path
