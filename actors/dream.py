"""Dream: memory maintenance for one VP in one group.

After enough turns, or when the group goes quiet, the VP re-reads its recent
transcript in the group and writes resident memories (summaries recall
always considers). It runs on the same engine with only the memory tools and
emits nothing to the group: maintenance is invisible to the people in it.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from actors.transcripts import load_conversation
from engine.compaction import render_transcript
from engine.messages import Conversation, Message
from engine.tools.registry import ToolContext
from personas.prompts import build_system_prompt

if TYPE_CHECKING:
    from actors.vp_actor import VPWorker

log = logging.getLogger(__name__)

DREAM_TOOLS = frozenset({"remember", "recall"})
RECENT_MESSAGES = 40


async def dream(worker: VPWorker, group_id: str, turns: int) -> dict[str, object]:
    """Run one dream for ``group_id`` covering ``turns`` new turns; returns what it did."""
    store = await worker.store()
    conv = await load_conversation(store, group_id, worker.vp_id)
    if conv is None or turns <= 0:
        return {"ran": False, "reason": "nothing new"}
    before = len(await worker.memory.list(_scope(group_id, worker.vp_id), kind="resident"))
    transcript = render_transcript(conv.summary, conv.messages[-RECENT_MESSAGES:])
    ctx = ToolContext(
        conversation_id=f"{group_id}:{worker.vp_id}:dream",
        vp_id=worker.vp_id,
        group_id=group_id,
        mode="dream",
        services={"memory": worker.memory, "memory_kind": "resident"},
    )
    system = build_system_prompt(persona=worker.persona, mode="dream", tools=sorted(DREAM_TOOLS))
    result = await worker.engine.run_turn(
        Conversation(id=ctx.conversation_id),
        Message.user(f"Recent conversation in this group:\n{transcript}"),
        system=system,
        ctx=ctx,
        allowed_tools=DREAM_TOOLS,
        options={"persona": worker.persona_hint(), "mode": "dream"},
    )
    after = len(await worker.memory.list(_scope(group_id, worker.vp_id), kind="resident"))
    log.info(
        "dream of %s in %s: %s, %d new memories",
        worker.vp_id,
        group_id,
        result.reason,
        after - before,
    )
    return {"ran": True, "reason": result.reason, "written": after - before}


def _scope(group_id: str, vp_id: str) -> str:
    from store.memory import vp_scope

    return vp_scope(group_id, vp_id)
