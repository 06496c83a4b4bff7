"""The frame that says where a VP's reply went on: the turns its @mentions started, or why none.

A VP's reply that names other VPs (``@linus``) is routed on by the
coordinator once the turn has ended: it starts the addressed VPs' turns,
unless its loop guard, a quota or the group's settings refuse, and then
writes one ``reply_routed`` frame into the group's event log. The reply's
turn says in its ``result`` which VPs it addresses (``mentions``), so a
client following what a person's message started (an AG-UI run, an A2A
task) knows a ``reply_routed`` follows, and that its turns belong to the
same chain. (A ``route_forward`` hand-off has a ``group_message`` of its
own, with ``handoff``; its turn names that message as its ``triggerId``.)
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from protocol.common import ServerModel


class ReplyRouted(ServerModel):
    """A VP's reply was routed on: ``turns`` it started, by VP id.

    ``messageId`` is the stored reply, ``fromVp`` the VP that wrote it and
    ``chainId`` the person's message the chain started from. ``refused``
    says why no turn (or not every one) started: a loop-guard rule,
    ``quota``, ``not_routed`` (the group does not let replies dispatch, or
    the turn ended in a way that routes nothing on).
    """

    type: Literal["reply_routed"] = "reply_routed"
    group_id: str
    chain_id: str
    from_vp: str
    message_id: str
    turns: dict[str, str] = Field(default_factory=dict)
    refused: str | None = None
    seq: int | None = Field(default=None, ge=0)
