"""What the unscripted offline model says: short, on-topic demo replies.

The offline model has no understanding, so it must not pretend to: a reply
names the question it answers (cleaned of mentions and speaker labels), adds
one persona-flavoured move and one question back, and stays within
:data:`MAX_REPLY_WORDS` words however long the conversation grows. Recalled
memories are used only as a short clause, never quoted whole, and the dream
summaries it writes list topics rather than copying the transcript. Replies
follow the group's language (``request.context.language``), or Chinese when
the question is written in it.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

from engine.messages import Message
from engine.providers.base import ModelRequest

MAX_REPLY_WORDS = 70
TOPIC_CHARS = 60
MEMORY_CHARS = 60

_MENTION = re.compile(r"(?<![\w.])@[\w.-]+")
# "[ann] text" (a person) and "[@steve] text" (another VP) in a group.
_SPEAKER = re.compile(r"^\[(@?)([^\]]{1,60})\]\s*")
# "@steve handed this to you (reason: ...):\ntext" (a route_forward hand-off).
_HANDOFF = re.compile(r"^@[\w.-]+ handed this to you[^\n]*:\n", re.DOTALL)
# Recalled memory lines: "- [user, 2026-05-01] text #tag".
_MEMORY_LINE = re.compile(r"^-?\s*\[([^\]]*)\]\s*(.*)$", re.DOTALL)
_TAGS = re.compile(r"(?:\s+#[\w-]+)+\s*$")
_CJK = re.compile(r"[\u3400-\u9fff]")

_EN = {
    "openers": [
        "Here is how I see it.",
        "Short answer first.",
        "Let me take this apart.",
        "I would start somewhere else.",
        "Good question; it turns on one thing.",
    ],
    "moves": [
        "name the one outcome that matters and cut the rest",
        "test the assumption we are most likely wrong about first",
        "make the smallest change that proves the idea, then measure",
        "watch what people actually do, not what we hope they do",
        "keep the interface boring and the inside replaceable",
        "find who owns the data before touching the code",
    ],
    "questions": [
        "What would make this unnecessary?",
        "How will we know it worked?",
        "What breaks first when load doubles?",
        "Who is this for, exactly?",
        "What could we ship this week?",
    ],
}
_ZH = {
    "openers": [
        "我的看法是这样。",
        "先说结论。",
        "我们拆开来看。",
        "我会换个起点。",
        "好问题，关键在一点。",
    ],
    "moves": [
        "先找出最重要的那个结果，其余的都砍掉",
        "先验证我们最可能想错的那个假设",
        "做一个最小的改动来证明想法，然后度量",
        "看用户实际怎么做，而不是我们希望他们怎么做",
        "让接口保持朴素，让实现可以替换",
        "动代码之前先弄清数据从哪来、归谁管",
    ],
    "questions": [
        "怎样才能让这件事变得不必要？",
        "我们怎么知道它成功了？",
        "负载翻倍时最先坏的是什么？",
        "这到底是为谁做的？",
        "这周能交付的最简版本是什么？",
    ],
}


def _pick(options: Sequence[str], seed: str, salt: str) -> str:
    digest = hashlib.sha256(f"{seed}|{salt}".encode()).digest()
    return options[int.from_bytes(digest[:4], "big") % len(options)]


def clean_text(text: str) -> str:
    """A message's words without speaker labels, hand-off headers or @mentions."""
    text = _HANDOFF.sub("", text.strip())
    text = _SPEAKER.sub("", text)
    text = _MENTION.sub(" ", text)
    return " ".join(text.split()).strip(" ,;:")


def shorten(text: str, limit: int) -> str:
    """``text`` cut at a word boundary to at most ``limit`` characters, marked with an ellipsis."""
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    if " " in cut[limit // 2 :]:
        cut = cut[: cut.rindex(" ")]
    return cut.rstrip(" ,;:.") + "…"


def _question(messages: Sequence[Message]) -> tuple[str, str | None]:
    """The newest thing a person asked, and the VP that passed it on (if one did).

    Replies of other VPs arrive as ``[@vp] text``; they are never the topic,
    so a long chain keeps answering the person's question instead of
    quoting the previous VP's reply back.
    """
    via: str | None = None
    for message in reversed(messages):
        if message.role != "user" or not isinstance(message.content, str):
            continue
        label = _SPEAKER.match(message.content.strip())
        if label and label.group(1) == "@":
            via = via or label.group(2)
            continue
        if _HANDOFF.match(message.content.strip()):
            via = via or message.speaker
        return clean_text(message.content), via
    return "", via


def memory_clause(lines: Sequence[object], zh: bool) -> str:
    """One recalled fact as a short clause; summaries and dumps are left out."""
    for raw in lines:
        match = _MEMORY_LINE.match(str(raw).strip())
        label, text = (match.group(1), match.group(2)) if match else ("", str(raw))
        if "summary" in label:
            continue
        fact = clean_text(_TAGS.sub("", text)).rstrip(".!。")
        if not fact or fact.lower().startswith(("recent discussion", "topics:")):
            continue
        fact = shorten(fact, MEMORY_CHARS)
        end = "" if fact.endswith("…") else ("。" if zh else ".")
        told = label.strip().startswith("user")  # what this person said, in their words
        if zh:
            return f"{'你之前说过' if told else '我记得'}：{fact}{end}"
        return f" {'You told me earlier' if told else 'I also recall'}: {fact}{end}"
    return ""


def wants_chinese(request: ModelRequest, topic: str) -> bool:
    language = request.context.language
    if language is not None:
        return language == "zh"
    return bool(_CJK.search(topic))


def persona_reply(request: ModelRequest) -> str:
    """A deterministic, bounded reply in the persona's voice to the newest question."""
    speaker = request.context.speaker
    name = (speaker.name if speaker else "") or "Assistant"
    role = (speaker.role if speaker else "") or "generalist"
    topic, via = _question(request.messages)
    zh = wants_chinese(request, topic)
    # The turn number varies the wording when a question comes back.
    turns = sum(1 for m in request.messages if m.role == "assistant")
    seed = f"{name}|{topic}|{turns}"
    memory = memory_clause(request.context.memory, zh)
    if zh:
        words = _ZH
        who = (speaker.name_zh if speaker else None) or name
        about = f"关于「{shorten(topic, TOPIC_CHARS)}」，" if topic else ""
        lead = f"接着 {via} 的话说，" if via else ""
        return (
            f"{_pick(words['openers'], seed, 'o')}{lead}{about}我会"
            f"{_pick(words['moves'], seed, 'm')}。{memory}"
            f"{_pick(words['questions'], seed, 'q')} —— {who}"
        )
    words = _EN
    about = f'On "{shorten(topic, TOPIC_CHARS)}", as a {shorten(role, 40)}' if topic else "Here"
    lead = f" Picking up from {via}." if via else ""
    text = (
        f"{_pick(words['openers'], seed, 'o')}{lead} {about}, I would "
        f"{_pick(words['moves'], seed, 'm')}.{memory} {_pick(words['questions'], seed, 'q')}"
    )
    return f"{_cap_words(text, MAX_REPLY_WORDS)} — {name}"


def _cap_words(text: str, limit: int) -> str:
    words = text.split()
    return text if len(words) <= limit else " ".join(words[:limit]) + "…"


def dream_summary(transcript: str) -> str:
    """A short list of what people asked lately, for the VP's resident memory.

    Only people's lines count (a VP's replies would make the summary a copy
    of the offline model's own phrasing); each is cleaned and cut short.
    """
    topics: list[str] = []
    for line in transcript.splitlines()[1:]:
        _, _, said = line.partition(": ")
        label = _SPEAKER.match(said.strip())
        if not label or label.group(1) == "@":
            continue
        topic = shorten(clean_text(said), 50)
        if topic and topic not in topics:
            topics.append(topic)
    picked = topics[-3:] or ["nothing new"]
    return "Topics: " + "; ".join(picked)
