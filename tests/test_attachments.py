"""Attachments below the gateway: the frame model, both stores, what a VP's model gets.

The provider tests send through the real ``openai`` and ``anthropic`` SDKs
to the fake LLM server and check the request it captured.
"""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator

import pytest

from actors.attachments import MAX_TEXT_CHARS, open_files
from actors.visibility import group_view
from engine.attachments import drop_images, for_model, kind_of, supports_vision
from engine.messages import ImagePart, Message, message_tokens
from engine.providers.anthropic import AnthropicProvider
from engine.providers.base import ModelRequest
from engine.providers.openai import OpenAIProvider
from protocol import ErrorCode, ProtocolError, parse_client_frame
from protocol.attachments import message_attachments
from store.attachments import AttachmentRecord, AttachmentStore, new_attachment_id
from store.attachments.model import AttachmentExists
from store.base import GroupMessage
from tests.fixtures.llm_server import FakeLLM
from tests.fixtures.stores import StoreFactory

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)


def attachment_record(group_id: str, name: str, mime: str, data: bytes) -> AttachmentRecord:
    return AttachmentRecord(
        id=new_attachment_id(),
        group_id=group_id,
        owner="ann",
        name=name,
        mime=mime,
        size=len(data),
        sha256="x",
        ts=1.0,
    )


# --- the frame ------------------------------------------------------------------


def _chat(*attachments: dict[str, object]) -> dict[str, object]:
    return {
        "type": "yeaft_session_chat",
        "groupId": "g",
        "text": "hi",
        "attachments": list(attachments),
    }


def test_an_attachment_is_inline_or_an_uploaded_id() -> None:
    inline = parse_client_frame(_chat({"name": "a.txt", "mime": "text/plain", "base64": "aGk="}))
    uploaded = parse_client_frame(_chat({"id": "att_1"}))
    assert inline.attachments[0].base64 == "aGk="  # type: ignore[union-attr]
    assert uploaded.attachments[0].id == "att_1"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("attachment", "field"),
    [
        ({"id": "att_1", "base64": "aGk="}, "attachments.0.base64"),
        ({"name": "a", "base64": "aGk="}, "attachments.0.mime"),
        ({"mime": "text/plain", "base64": "aGk="}, "attachments.0.name"),
        ({"id": "../etc"}, "attachments.0.id"),
        ({"name": "a", "mime": "text/plain", "base64": "not base64!"}, "attachments.0.base64"),
    ],
)
def test_a_bad_attachment_is_a_typed_error_naming_its_field(
    attachment: dict[str, object], field: str
) -> None:
    with pytest.raises(ProtocolError) as info:
        parse_client_frame(_chat(attachment))
    assert (info.value.code, info.value.field) == (ErrorCode.INVALID_FRAME, field)


def test_too_many_attachments_are_refused_at_the_door() -> None:
    with pytest.raises(ProtocolError) as info:
        parse_client_frame(_chat(*[{"id": f"a{i}"} for i in range(17)]))
    assert (info.value.code, info.value.field) == (ErrorCode.INVALID_FRAME, "attachments")


def test_stored_references_become_wire_models_with_a_download_url() -> None:
    refs = [{"id": "att_1", "name": "a.png", "mime": "image/png", "size": 3}, {"bad": 1}]
    [view] = message_attachments("grp_1", refs) or []
    assert view.url == "/api/groups/grp_1/attachments/att_1"
    assert (view.name, view.mime, view.size) == ("a.png", "image/png", 3)
    assert message_attachments("grp_1", None) is None


# --- both stores ----------------------------------------------------------------


@pytest.fixture
async def attachments(store_factory: StoreFactory) -> AsyncIterator[AttachmentStore]:
    opened = store_factory.config.open_attachments()
    yield opened
    await opened.aclose()


async def test_attachments_are_durable_across_store_objects(
    store_factory: StoreFactory, attachments: AttachmentStore
) -> None:
    record = attachment_record("grp_1", "pic.png", "image/png", PNG)
    await attachments.put(record, PNG)
    with pytest.raises(AttachmentExists):
        await attachments.put(record, b"other bytes")

    again = store_factory.config.open_attachments()
    try:
        assert await again.get(record.id) == record
        assert await again.data(record.id) == PNG
        assert await again.get("att_missing") is None
        assert await again.data("att_missing") is None
        assert await again.get("../../etc/passwd") is None
    finally:
        await again.aclose()


async def test_deleting_a_group_deletes_its_attachments_only(
    attachments: AttachmentStore,
) -> None:
    mine = [attachment_record("grp_1", f"f{i}.txt", "text/plain", b"mine") for i in range(3)]
    theirs = attachment_record("grp_2", "g.txt", "text/plain", b"theirs")
    for record in [*mine, theirs]:
        await attachments.put(record, b"mine" if record.group_id == "grp_1" else b"theirs")

    assert await attachments.delete_group("grp_1") == 3
    for record in mine:
        assert await attachments.get(record.id) is None
        assert await attachments.data(record.id) is None
    assert await attachments.data(theirs.id) == b"theirs"
    assert await attachments.delete_group("grp_1") == 0
    assert await attachments.delete_group("grp_unknown") == 0


# --- what a VP's model gets -------------------------------------------------------


async def test_files_are_opened_as_image_text_or_description(
    store_factory: StoreFactory, attachments: AttachmentStore
) -> None:
    notes = "line one\n" + "x" * (MAX_TEXT_CHARS + 10)
    files = [
        (attachment_record("g", "pic.png", "image/png", PNG), PNG),
        (attachment_record("g", "notes.md", "text/markdown", notes.encode()), notes.encode()),
        (attachment_record("g", "conf.json", "application/json", b'{"a": 1}'), b'{"a": 1}'),
        (attachment_record("g", "blob.bin", "application/octet-stream", b"\0\1\2"), b"\0\1\2"),
    ]
    for record, data in files:
        await attachments.put(record, data)
    gone = attachment_record("g", "gone.txt", "text/plain", b"")
    refs = [r.ref() for r, _ in files] + [gone.ref()]
    [msg] = await open_files([Message.user("look", meta={"attachments": refs})], attachments)

    assert msg.images == [
        ImagePart(
            name="pic.png", mime="image/png", data=base64.b64encode(PNG).decode(), size=len(PNG)
        )
    ]
    assert '<file name="notes.md" type="text/markdown">\nline one' in msg.content
    assert "19 more characters not shown" in msg.content
    assert '{"a": 1}' in msg.content
    assert "blob.bin (application/octet-stream, 3 bytes)" in msg.content
    assert "gone.txt (text/plain); it could not be read" in msg.content
    # Opened once: a second pass changes nothing.
    assert await open_files([msg], attachments) == [msg]


def test_kinds_and_vision_patterns() -> None:
    assert kind_of("a.png", "image/png") == "image"
    assert kind_of("a.svg", "image/svg+xml") == "other"
    assert kind_of("main.py", "application/octet-stream") == "text"
    assert kind_of("a.zip", "application/zip") == "other"
    assert supports_vision("openai:gpt-4o-mini", ("openai:gpt-4o*",))
    assert not supports_vision("offline:default", ("openai:gpt-4o*",))


def test_a_model_without_vision_gets_a_description_and_stored_transcripts_drop_images() -> None:
    image = ImagePart(name="pic.png", mime="image/png", data="AAAA", size=3)
    messages = [Message.user("see this", images=[image]), Message.assistant("ok")]
    assert message_tokens(messages[0]) > 1000  # an image counts against the budget

    [seen, _] = for_model(messages, vision=False)
    assert seen.images == []
    assert "pic.png (image/png, 3 bytes)] (this model cannot see images)" in seen.content
    assert for_model(messages, vision=True) is messages

    [kept, _] = drop_images(messages)
    assert kept.images == [] and "(shown earlier)" in kept.content
    assert "AAAA" not in kept.model_dump_json()


def test_files_follow_the_visibility_of_their_message() -> None:
    refs = [{"id": "att_1", "name": "a.png", "mime": "image/png", "size": 3}]
    log = [
        GroupMessage(id="m1", author="ann", role="user", text="hi", meta={"attachments": refs}),
        GroupMessage(
            id="m2",
            author="linus",
            role="assistant",
            text="for grace only",
            meta={
                "injectedBy": "route_forward",
                "routeForwardTarget": "grace",
                "attachments": refs,
            },
        ),
        GroupMessage(id="m3", author="ann", role="user", text="next"),
    ]
    context, trigger = group_view(log, "ada", None, "m3")
    assert [m.meta.get("attachments") for m in context] == [refs]  # not the forward
    context, _ = group_view(log, "grace", None, "m3")
    assert [m.meta.get("attachments") for m in context] == [refs, refs]
    _, trigger = group_view(log, "ada", None, "m1")
    assert trigger is not None and trigger.meta["attachments"] == refs


# --- the wire shapes, at the fake provider servers ----------------------------------


def _image_request(model: str) -> ModelRequest:
    image = ImagePart(name="pic.png", mime="image/png", data="iVBORw0K", size=6)
    return ModelRequest(
        model=model, system="s", messages=[Message.user("what is it?", images=[image])]
    )


async def test_openai_gets_an_image_url_content_part(fake_llm: FakeLLM) -> None:
    fake_llm.text("a dot")
    provider = OpenAIProvider(api_key="sk-test", base_url=fake_llm.openai_base_url)
    try:
        _ = [item async for item in provider.stream(_image_request("gpt-test"))]
    finally:
        await provider.aclose()
    user = fake_llm.last_request.body["messages"][1]
    assert user == {
        "role": "user",
        "content": [
            {"type": "text", "text": "what is it?"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0K"}},
        ],
    }


async def test_anthropic_gets_an_image_block_with_a_base64_source(fake_llm: FakeLLM) -> None:
    fake_llm.text("a dot")
    provider = AnthropicProvider(api_key="sk-ant-test", base_url=fake_llm.anthropic_base_url)
    try:
        _ = [item async for item in provider.stream(_image_request("claude-test"))]
    finally:
        await provider.aclose()
    assert fake_llm.last_request.body["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "what is it?"},
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0K"},
                },
            ],
        }
    ]
