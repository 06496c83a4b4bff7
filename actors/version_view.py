"""What a VP sees of edited messages and of replies with several versions.

The rule (docs/architecture.md, "Versions in a VP's context"):

- an edited message is seen as it reads now, wherever it sits in the VP's
  context: its entry in the transcript is rewritten with the current text
  when the turn's catch-up read holds it (as a deleted one is blanked);
- of another VP's reply with several versions, the VP sees one, the
  version the group shows (``store.versions.chosen_versions``), in the
  place of the first version it read: a transcript entry of another
  version is rewritten to it, and the versions the group's log holds
  after the VP's cursor are not added again;
- the VP's own replies stay in its transcript as it ran them: a turn that
  regenerates one rewinds the transcript and replaces it
  (``actors.visibility.rewind``); picking an older version of it later
  does not rewrite the VP's own memory of its turn.

Only messages in the catch-up read are looked at, as for deletions: one
edited after it left that window stays as the VP read it until the
transcript is compacted.
"""

from __future__ import annotations

from actors.visibility import seen_text
from engine.messages import Message
from store.base import GroupMessage
from store.versions import chosen_versions, family_roots


def refresh_versions(messages: list[Message], log: list[GroupMessage], vp_id: str) -> set[str]:
    """Bring ``messages`` (a VP's transcript) up to date with edits and chosen versions.

    Returns the ids of group messages :func:`actors.visibility.group_view`
    must leave out: versions of a reply that are not the one to show, or
    whose reply the transcript holds already.
    """
    by_id = {m.id: m for m in log}
    roots = family_roots(log)
    chosen = chosen_versions(log)
    present: set[str] = set()
    for i, msg in enumerate(messages):
        gid = msg.meta.get("group_message_id")
        gm = by_id.get(str(gid)) if gid else None
        if gm is None or gm.author == vp_id:
            continue
        root = roots.get(gm.id)
        if root is not None and root in chosen:
            present.add(root)
            shown = by_id[chosen[root]]
            if shown.id != gm.id or msg.content != seen_text(shown, vp_id):
                meta = {**msg.meta, "group_message_id": shown.id}
                messages[i] = msg.model_copy(
                    update={"content": seen_text(shown, vp_id), "meta": meta}
                )
        elif gm.meta.get("editedAt") and not gm.meta.get("deleted"):
            text = seen_text(gm, vp_id)
            if msg.content != text:
                messages[i] = msg.model_copy(update={"content": text})
    return {
        member for member, root in roots.items() if root in present or chosen.get(root) != member
    }
