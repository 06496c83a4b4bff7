"""One-to-one conversations on behalf of their owner, for the WebSocket and the HTTP API.

A conversation is a group record of kind ``conversation`` (see
``store.conversation``): one VP, one owner. Only its owner sees it: to
anyone else it does not exist (``not_found``, as for an id never used), and
the group frames and endpoints do not show it at all. Changes go through the
conversation's coordinator, like a group's; reads go to the store.

``cancel_execution`` and ``ask_user_answer`` may name a group or a
conversation, or (for an answer) nothing but the question: :meth:`chat_target`
and :meth:`answer` find and authorise the one they mean.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from actors.commands import GroupCommand
from actors.vp_commands import AnswerVerdict
from coordinator.commands import Answer, Cancel, DeleteGroup, EditGroup, Ingest
from coordinator.membership import GroupEdit
from gateway.audit import edit_detail, record
from gateway.errors import GatewayError, coordinator_refusal, not_found
from gateway.traces import received
from personas.loader import PersonaLibrary
from protocol import Channel, ErrorCode, SessionReady
from protocol.common import is_id
from protocol.conversations import ConversationSummary, Folder
from protocol.settings import ConversationSettingsPatch, conversation_settings
from store.audit import AuditAction
from store.base import Group, Store
from store.conversation import PROVIDER, ConversationInfo, GroupKind
from store.workspaces import (
    DEFAULT_WORKSPACE,
    WorkspaceNameError,
    check_name,
    ensure_workspace,
    list_workspaces,
)

if TYPE_CHECKING:
    from coordinator.results import IngestResult
    from coordinator.runtime import Runtime
    from gateway.groups import GroupService

log = logging.getLogger(__name__)

T = TypeVar("T")

TITLE_LENGTH = 60
PREVIEW_LENGTH = 200

CAPABILITIES: dict[str, Any] = {
    "streaming": True,
    "thinking": True,
    "tools": True,
    "askUser": True,
    "cancel": True,
    "resume": True,
    "attachments": True,
}
"""What a conversation on this server can do, as ``session_ready`` reports it."""


def default_title(vp_name: str) -> str:
    return f"Chat with {vp_name}"


def title_from(text: str) -> str:
    """A conversation title from its first message: one line, at most 60 characters."""
    line = " ".join(text.split())
    return line if len(line) <= TITLE_LENGTH else line[: TITLE_LENGTH - 1].rstrip() + "…"


def is_conversation(group: Group) -> bool:
    return group.kind is GroupKind.CONVERSATION and group.conversation is not None


class ConversationService:
    """What a user may do with their conversations, checked and carried out."""

    def __init__(
        self,
        runtime: Runtime,
        groups: GroupService,
        personas: PersonaLibrary,
        data_dir: Path,
    ) -> None:
        self.runtime = runtime
        self.groups = groups
        self.personas = personas
        self.data_dir = data_dir

    async def store(self) -> Store:
        return await self.runtime.store()

    # -- reads ---------------------------------------------------------------
    async def owned(self, username: str, conversation_id: str) -> Group:
        """The conversation, if ``username`` owns it; else ``not_found``."""
        if not is_id(conversation_id):
            raise not_found("conversation")
        group = await (await self.store()).get_group(conversation_id)
        if (
            group is None
            or group.conversation is None
            or group.kind is not GroupKind.CONVERSATION
            or group.conversation.owner != username
        ):
            raise not_found("conversation")
        return group

    async def list_for(
        self, username: str, work_dir: str | None = None
    ) -> list[ConversationSummary]:
        """The user's conversations (in ``work_dir`` if given), newest activity first."""
        store = await self.store()
        summaries = []
        for group in await store.list_groups(member=username):
            info = group.conversation
            if not is_conversation(group) or info is None or info.owner != username:
                continue
            if work_dir is not None and info.work_dir != work_dir:
                continue
            summaries.append(await self.summary(group))
        summaries.sort(key=lambda s: s.last_activity, reverse=True)
        return summaries

    async def summary(self, group: Group) -> ConversationSummary:
        """How a conversation shows in a list: its title and newest message."""
        info = group.conversation
        assert info is not None
        newest = await (await self.store()).read_messages(group.id, limit=1)
        last = newest[-1] if newest else None
        preview = None
        if last is not None:
            preview = last.text if len(last.text) <= PREVIEW_LENGTH else last.text[:PREVIEW_LENGTH]
        return ConversationSummary(
            conversation_id=group.id,
            session_id=group.id,
            title=group.name,
            vp_id=info.vp_id,
            provider=info.provider,
            work_dir=info.work_dir,
            created_at=group.created_at,
            last_activity=last.ts if last is not None else group.created_at,
            last_message=preview,
            last_author=last.author if last is not None else None,
        )

    def folders(self, summaries: list[ConversationSummary]) -> list[Folder]:
        """Every workspace folder, with how many of these conversations use it.

        A workspace a conversation names but whose folder is gone is listed too.
        """
        counts: dict[str, int] = {}
        newest: dict[str, float] = {}
        for s in summaries:
            counts[s.work_dir] = counts.get(s.work_dir, 0) + 1
            newest[s.work_dir] = max(newest.get(s.work_dir, 0.0), s.last_activity)
        names = {w.name for w in list_workspaces(self.data_dir)} | set(counts)
        return [
            Folder(name=n, conversations=counts.get(n, 0), last_activity=newest.get(n))
            for n in sorted(names)
        ]

    def session_ready(self, group: Group, last_seq: int) -> SessionReady:
        info = group.conversation
        assert info is not None
        return SessionReady(
            conversation_id=group.id,
            session_id=group.id,
            model=group.settings.model or self.model_of(info.vp_id),
            capabilities={**CAPABILITIES, "workDir": info.work_dir, "provider": info.provider},
            model_info=self.model_info(group),
            last_seq=last_seq,
        )

    def model_of(self, vp_id: str) -> str:
        """The model the VP answers with, as its actor will choose it."""
        engine = self.runtime.config.engine
        persona = self.personas.get(vp_id)
        if persona is not None and persona.model:
            return persona.model
        if persona is not None and persona.model_hint == "fast" and engine.fast_model:
            return engine.fast_model
        return engine.default_model()

    def model_info(self, group: Group) -> dict[str, Any]:
        info = group.conversation
        assert info is not None
        persona = self.personas.get(info.vp_id)
        # The conversation's own model, when its owner chose one, as its turns use it.
        model = group.settings.model or self.model_of(info.vp_id)
        return {
            "vpId": info.vp_id,
            "name": persona.name if persona is not None else info.vp_id,
            "role": persona.role if persona is not None else None,
            "model": model,
            "provider": model.split(":", 1)[0],
        }

    def settings_view(self, group: Group) -> dict[str, Any]:
        """What a conversation's header and settings show: owner, VP, model, settings."""
        info = group.conversation
        assert info is not None
        model = self.model_info(group)
        return {
            "conversationId": group.id,
            "title": group.name,
            "owner": info.owner,
            "vpId": info.vp_id,
            "vpName": model["name"],
            "model": model["model"],
            "workDir": info.work_dir,
            "createdAt": group.created_at,
            "settings": conversation_settings(group.settings),
        }

    # -- changes -------------------------------------------------------------
    async def edit(
        self,
        username: str,
        conversation_id: str,
        title: str | None,
        settings: ConversationSettingsPatch | None,
    ) -> Group:
        """The owner renames the conversation or changes its settings; announced in its log.

        The coordinator's edit of a group does it (the owner of a conversation
        is the owner of its record), so a change is checked, stored and told
        to every tab of the owner exactly as a group's is.
        """
        await self.owned(username, conversation_id)
        group = await self._call(
            EditGroup(conversation_id, GroupEdit(name=title, settings=settings), username)
        )
        # The title is left out: it may be words of the conversation itself.
        detail = {**edit_detail(GroupEdit(settings=settings)), "kind": "conversation"}
        if title is not None:
            detail["renamed"] = True
        action = AuditAction.GROUP_SETTINGS_CHANGED
        await record(self.runtime, action, actor=username, target=conversation_id, detail=detail)
        return group

    async def create(
        self,
        username: str,
        vp_id: str,
        work_dir: str | None = None,
        title: str | None = None,
        provider: str | None = None,
    ) -> Group:
        """Create a conversation with one VP in a workspace (made when missing)."""
        check_provider(provider)
        workspace = check_work_dir(work_dir)
        persona = self.personas.resolve(vp_id)
        if persona is None:
            known = ", ".join(p.id for p in self.personas.all())
            raise GatewayError(
                ErrorCode.NOT_FOUND,
                f"unknown VP {vp_id!r}; known: {known}",
                field="options.vpId",
            )
        ensure_workspace(self.data_dir, workspace)
        info = ConversationInfo(
            owner=username, vp_id=persona.id, work_dir=workspace, auto_title=not title
        )
        name = (title or "").strip() or default_title(persona.name)
        try:
            return await self.runtime.create_conversation(name, info)
        except Exception as exc:
            raise _refusal(exc) from exc

    async def delete(self, username: str, conversation_id: str) -> None:
        await self.owned(username, conversation_id)
        # Every connection of the owner, on every process, is told through the
        # directory log (gateway.people): ``conversation_deleted``. The files
        # sent in it go too; its folder (the user's workDir) stays.
        await self._call(DeleteGroup(conversation_id, username))
        detail = {"kind": "conversation"}
        action = AuditAction.GROUP_DELETED
        await record(self.runtime, action, actor=username, target=conversation_id, detail=detail)
        await self.groups.attachments.delete_group(conversation_id)

    async def send(
        self,
        username: str,
        conversation_id: str,
        text: str,
        client_message_id: str | None,
        attachments: list[dict[str, Any]] | None = None,
        channel: Channel = Channel.API,
    ) -> IngestResult:
        """Store the owner's message and have the VP answer it; returns once stored.

        The first message of a conversation with no chosen title names it.
        """
        group = await self.owned(username, conversation_id)
        with received(username, conversation_id, text, channel):
            result = await self._call(
                Ingest(
                    conversation_id,
                    username,
                    text,
                    None,
                    client_message_id,
                    attachments,
                    channel=channel,
                )
            )
        info = group.conversation
        persona = self.personas.get(info.vp_id) if info is not None else None
        untitled = persona is not None and group.name == default_title(persona.name)
        title = title_from(text)
        if info is not None and info.auto_title and untitled and title and not result.duplicate:
            try:
                await self._call(EditGroup(conversation_id, GroupEdit(name=title)))
            except GatewayError as exc:
                # The message is stored and answered: a title is not worth failing it.
                log.warning("conversation %s kept its title: %s", conversation_id, exc.message)
        return result

    # -- turns in a group or a conversation ------------------------------------
    async def chat_target(self, username: str, target_id: str) -> Group:
        """A group the user is a member of, or a conversation they own; else not_found."""
        if not is_id(target_id):
            raise not_found("group or conversation")
        group = await (await self.store()).get_group(target_id)
        if group is None or username not in group.members:
            raise not_found("group or conversation")
        if group.kind is GroupKind.CONVERSATION and (
            group.conversation is None or group.conversation.owner != username
        ):
            raise not_found("group or conversation")
        return group

    async def cancel(self, username: str, target_id: str, vp_id: str | None) -> None:
        """Cancel the running turns of a group (one VP's, or all) or of a conversation."""
        group = await self.chat_target(username, target_id)
        await self._call(Cancel(group.id, vp_id))

    async def answer(
        self, username: str, target_id: str | None, request_id: str, answer: str | list[str]
    ) -> None:
        """Deliver an answer; without ``target_id`` the question's own group is found.

        A question that is not open (or not the user's to answer) is
        ``not_found`` on ``requestId``, whichever way it was named; an answer
        that does not fit the question (not one of its choices, a list for a
        single-select question, nothing) is ``invalid_frame`` on ``answer``,
        with the VP's reason, and the question stays open.
        """
        located = target_id or await self.runtime.question_group(request_id)
        gone = GatewayError(
            ErrorCode.NOT_FOUND,
            f"no open question {request_id}: it was answered, expired or never asked",
            field="requestId",
        )
        if located is None:
            raise gone
        try:
            group = await self.chat_target(username, located)
        except GatewayError:
            if target_id is not None:
                raise
            raise gone from None
        given = answer if isinstance(answer, str) else tuple(answer)
        receipt = await self._call(Answer(group.id, request_id, given))
        if receipt.verdict is AnswerVerdict.NOT_OPEN:
            raise gone
        if not receipt:
            raise GatewayError(
                ErrorCode.INVALID_FRAME,
                receipt.reason,
                field="answer",
                detail={"reason": receipt.verdict.value, "choices": list(receipt.choices)},
            )

    async def _call(self, command: GroupCommand[T]) -> T:
        try:
            return await self.runtime.send(command)
        except Exception as exc:
            raise _refusal(exc) from exc


def check_provider(provider: str | None) -> None:
    if provider not in (None, PROVIDER):
        raise GatewayError(
            ErrorCode.INVALID_FRAME,
            f"unknown provider {provider!r}: this server runs conversations on {PROVIDER!r}",
            field="provider",
        )


def check_work_dir(work_dir: str | None) -> str:
    """The workspace name a ``workDir`` gives (the default one when absent)."""
    if work_dir is None:
        return DEFAULT_WORKSPACE
    try:
        return check_name(work_dir)
    except WorkspaceNameError as exc:
        raise GatewayError(ErrorCode.INVALID_FRAME, str(exc), field="workDir") from exc


def _refusal(exc: Exception) -> GatewayError:
    return coordinator_refusal(exc, "conversation service")
