"""What the offline model answers to team mode's calls: small, deterministic JSON.

Team mode (``team/``) asks a model narrow questions, each marked by the
request's ``context.purpose`` (:class:`~engine.call_context.CallContext`):
route this message, plan this attempt, pick skills, write guidance, draft a
skill. With no API key the offline model stands in, so each question gets a
plausible answer made by simple rules from the prompt's own headings (the
prompts keep them fixed for this):

- the router (``Active task:``, ``Current user message:``): without an
  open task, a message that asks for work (a work verb, or six words or
  more that are neither a greeting nor a question) is ``new_task``,
  anything else ``simple_chat``; with one, words of dropping it, asking
  for changes or accepting it pick ``abandon_task``, ``revise_task`` or
  ``close_task`` (in that order of precedence), and anything else is
  ``continue_task``;
- the planner (``Roster:``, ``Task goal:``): a roster of two or more is a
  team of one node per VP (at most :data:`TEAM_NODES`), the last depending
  on the first once there are three, so dependency ordering is exercised;
  a roster of one is ``single``;
- skill selection (``Candidate skills:``) names the first candidate shown,
  the retriever's best (a shortlist: as many as it may), or ``[]`` when
  none is shown; guidance (``Node task:``) and skill drafts (``Task
  summaries:``, ``Called tool names:``) are a generic procedure for the
  prompt's task.

The answers are JSON text, exactly what a real model is asked for, so the
team code parses them the same way. This module may not import ``team/``
(a lower layer); it reads the prompts as text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from engine.call_context import CallMode
from engine.providers.base import ModelRequest

__all__ = ["TEAM_NODES", "TEAM_PURPOSES", "team_answer", "team_reply"]

ROUTER = "team.router"
PLANNER = "team.planner"
SHORTLIST = "team.skills.shortlist"
SKILL_PURPOSES = frozenset({"team.skills.node", SHORTLIST, "team.skills.final"})
GUIDANCE = "team.guidance"
DRAFT = "team.draft"
TEAM_PURPOSES = frozenset({ROUTER, PLANNER, GUIDANCE, DRAFT} | SKILL_PURPOSES)

TEAM_NODES = 4
TITLE_CHARS = 60

_CJK = re.compile(r"[\u3400-\u9fff]")
_WORK = re.compile(
    r"\b(?:plan|design|write|draft|build|analy[sz]e|analysis|strategy|launch|create|prepare|"
    r"report|proposal|outline|research)\b|计划|方案|设计|写|分析|策划|报告|调研",
    re.IGNORECASE,
)
_ABANDON = re.compile(
    r"\b(?:abandon|drop|cancel|stop|never\s?mind|forget it)\b|放弃|算了|取消|不用了",
    re.IGNORECASE,
)
_REVISE = re.compile(
    r"\b(?:change|revise|instead|but|modify|rewrite|adjust)\b|修改|改",
    re.IGNORECASE,
)
_CLOSE = re.compile(
    r"\b(?:accept(?:ed)?|done|thanks|thank you|looks good|lgtm|perfect|great)\b|"
    r"完成|好了|可以了|谢谢|没问题",
    re.IGNORECASE,
)
_GREETING = re.compile(r"^\s*(?:hi|hello|hey|good (?:morning|evening))\b|^\s*你好", re.IGNORECASE)


def team_reply(request: ModelRequest) -> str | None:
    """The JSON answer to ``request`` when it is a team call of a known purpose, else None."""
    purpose = request.context.purpose
    if request.context.mode is not CallMode.TASK or purpose not in TEAM_PURPOSES:
        return None
    last = request.messages[-1] if request.messages else None
    prompt = last.content if last is not None and isinstance(last.content, str) else ""
    return team_answer(purpose, request.system, prompt)


def team_answer(purpose: str, system: str, prompt: str) -> str | None:
    """The offline model's JSON answer to a team call of ``purpose``; None if it is not one."""
    if purpose in SKILL_PURPOSES:
        return _skills(purpose, system, prompt)
    handler = _HANDLERS.get(purpose)
    return handler(prompt) if handler else None


def section(prompt: str, heading: str) -> str | None:
    """The text under ``heading`` (a line ending in ``:``) up to the next blank line.

    A heading that is the prompt's last section (``Current user message:``)
    keeps everything after it, blank lines included. None when it is absent.
    """
    match = re.search(rf"(?:^|\n){re.escape(heading)}\n", prompt)
    if match is None:
        return None
    rest = prompt[match.end() :]
    end = rest.find("\n\n")
    if heading in _LAST_SECTIONS or end == -1:
        return rest.strip()
    return rest[:end].strip()


_LAST_SECTIONS = frozenset({"Current user message:"})


def _json(text: str | None) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


def _zh(text: str) -> bool:
    return bool(_CJK.search(text))


def _title(message: str) -> str:
    words = " ".join(message.split())
    return words if len(words) <= TITLE_CHARS else words[: TITLE_CHARS - 1].rstrip() + "…"


def _router(prompt: str) -> str:
    message = section(prompt, "Current user message:") or ""
    active = _json(section(prompt, "Active task:"))
    action, reason = _route(message, isinstance(active, dict))
    title = _title(message) if action == "new_task" else ""
    if isinstance(active, dict) and action != "new_task":
        title = str(active.get("title") or "")
    return json.dumps(
        {"action": action, "reason": reason, "short_title": title}, ensure_ascii=False
    )


def _route(message: str, has_task: bool) -> tuple[str, str]:
    """The action for ``message`` and why, by the rules of the module docstring."""
    if has_task:
        if _ABANDON.search(message):
            return "abandon_task", "the person drops the active task"
        if _REVISE.search(message):
            return "revise_task", "the person asks for changes to the active task"
        if _CLOSE.search(message):
            return "close_task", "the person accepts the active task"
        return "continue_task", "more work on the active task"
    if _WORK.search(message):
        return "new_task", "the person asks for a piece of work"
    text = message.strip()
    question = text.endswith(("?", "？"))
    long_enough = len(text.split()) >= 6 or len(_CJK.findall(text)) >= 12
    if _GREETING.search(text) or question or not long_enough:
        return "simple_chat", "conversation, no deliverable asked for"
    return "new_task", "a substantial request"


def _planner(prompt: str) -> str:
    roster = _json(section(prompt, "Roster:"))
    people = [r for r in roster if isinstance(r, dict) and r.get("id")] if roster else []
    goal = section(prompt, "Task goal:") or section(prompt, "Current user request:") or ""
    zh = _zh(goal)
    if len(people) < 2:
        vp = str(people[0]["id"]) if people else ""
        reason = "只有一位成员，由其单独完成" if zh else "one VP can do this attempt alone"
        return json.dumps(
            {"mode": "single", "reason": reason, "strategy": "", "vp": vp, "nodes": []},
            ensure_ascii=False,
        )
    team = people[:TEAM_NODES]
    nodes = [_node(i, person, goal, zh) for i, person in enumerate(team, 1)]
    if len(nodes) >= 3:
        nodes[-1]["depends_on"] = ["n1"]
    answer = {
        "mode": "team",
        "reason": "目标涉及多位成员的专长" if zh else "the goal spans several VPs' expertise",
        "strategy": (
            "每位成员负责自己擅长的部分，最后汇总"
            if zh
            else "each VP takes the part their expertise covers; one VP combines them"
        ),
        "nodes": nodes,
        "final_synthesis_instruction": (
            "把各部分合成一个完整的回答，注明仍不确定的地方"
            if zh
            else "Merge the parts into one answer and note what is still uncertain."
        ),
        "synthesizer": str(team[0]["id"]),
    }
    return json.dumps(answer, ensure_ascii=False)


def _node(index: int, person: dict[str, Any], goal: str, zh: bool) -> dict[str, Any]:
    """One node: the goal seen from ``person``'s side (their description, or their name)."""
    name = str(person.get("name") or person["id"])
    focus = str(person.get("description") or "").strip() or name
    focus = " ".join(focus.split())[:120]
    if zh:
        task = f"从「{focus}」的角度处理：{goal}。交付你的专长负责的那一部分。"
        expected = f"{name} 负责部分的简短结果"
    else:
        task = f'For the goal "{goal}", work out the part that {focus} covers and deliver it.'
        expected = f"a short section from {name}"
    return {
        "id": f"n{index}",
        "vp": str(person["id"]),
        "task": task,
        "capabilities": [focus],
        "expected_output": expected,
        "depends_on": [],
        "skill_query": f"{focus} {goal}".strip(),
    }


_CANDIDATE = re.compile(r"^- ([^:\n]+):", re.MULTILINE)
_AT_MOST = re.compile(r"at most (\d+)")


def _skills(purpose: str, system: str, prompt: str) -> str:
    """The first candidates shown (the retriever's best): one, or a shortlist's worth."""
    start = prompt.find("Candidate skills:\n")
    if start == -1:
        return "[]"
    end = prompt.find("\n\nReturn ", start)
    block = prompt[start : end if end != -1 else len(prompt)]
    names = [name.strip() for name in _CANDIDATE.findall(block)]
    limit = 1
    if purpose == SHORTLIST:
        found = _AT_MOST.search(system) or _AT_MOST.search(prompt)
        limit = int(found.group(1)) if found else len(names)
    return json.dumps(names[:limit], ensure_ascii=False)


def _subject(prompt: str) -> str:
    """What a guidance or draft call is about: the first of its task headings present."""
    for heading in ("Node task:", "Task goal:", "Current user request:"):
        found = section(prompt, heading)
        if found and found != "(none)":
            return " ".join(found.split())
    # A draft's prompt has the task as "- Title: ..." and "  Goal: ..." lines.
    fields: dict[str, str] = {}
    for line in (section(prompt, "Task summaries:") or "").splitlines():
        label, colon, value = line.strip().removeprefix("- ").partition(":")
        if colon:
            fields.setdefault(label.strip(), value.strip())
    return fields.get("Goal") or fields.get("Title") or ""


def _slug(text: str, fallback: str) -> str:
    words = re.findall(r"[a-z0-9]+", text.lower())[:5]
    return "-".join(words) or fallback


def _guidance(prompt: str) -> str:
    subject = _subject(prompt)
    zh = _zh(subject)
    if zh:
        content = (
            f"目标：{subject or '完成交给你的子任务'}\n"
            "做法：先列出要回答的问题，再逐条给出结论和依据，标明不确定之处。\n"
            "输出：简洁的结果，便于其他成员直接使用。"
        )
        description = "为当前子任务临时生成的做法"
    else:
        content = (
            f"Objective: {subject or 'do the delegated sub-task'}\n"
            "Approach: list the questions to answer, answer each with its basis, "
            "and mark what is uncertain.\n"
            "Output: a concise result the other VPs can use as it is."
        )
        description = "Procedure made for this sub-task only"
    answer = {
        "guidance_name": _slug(subject, "node-guidance"),
        "description": description,
        "content": content,
        "tags": ["ephemeral"],
    }
    return json.dumps(answer, ensure_ascii=False)


def _draft(prompt: str) -> str:
    subject = _subject(prompt)
    zh = _zh(subject)
    # The tools the runs called, listed as "a, b" or "(none)".
    listed = section(prompt, "Called tool names:") or ""
    names = [t.strip() for t in listed.split(",") if t.strip() and t.strip() != "(none)"]
    what = subject or ("完成此类任务" if zh else "this kind of task")
    if zh:
        description = f"如何完成：{what[:80]}"
        steps = [f"1. 明确目标：{what}", "2. 分工并收集材料。", "3. 汇总结果，说明不确定之处。"]
        content = "# 做法\n\n" + "\n".join(steps)
        reason = "从被接受的任务中总结"
    else:
        description = f"How to do: {what[:80]}"
        content = (
            f"# Procedure\n\n1. Pin down the goal: {what}\n2. Split the work and gather "
            "material.\n3. Combine the results and state what is uncertain."
        )
        reason = "learned from an accepted task"
    answer = {
        "frontmatter": {
            "name": _slug(subject, "learned-skill"),
            "description": description,
            "tools": names,
        },
        "content": content,
        "change_reason": reason,
    }
    return json.dumps(answer, ensure_ascii=False)


_HANDLERS: dict[str, Callable[[str], str]] = {
    ROUTER: _router,
    PLANNER: _planner,
    GUIDANCE: _guidance,
    DRAFT: _draft,
}
