"""``web_fetch`` against a local HTTP server: the allowlist, address checks, redirects, limits.

The server is the standard library's, on 127.0.0.1 in a thread. Loopback is
not a public address, so every fetch that reaches it names it in the
allowlist, as a deployment would name an intranet host. Refused addresses are
refused before any connection is made (the test session's network guard
would fail a connection to anything but loopback anyway).
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from pydantic import SecretStr

from actors.config import RuntimeConfig
from actors.turns import TurnOrigin, TurnRequest
from actors.vp_actor import VPActor
from actors.vp_commands import RunTurn
from engine.messages import ToolCall
from engine.settings import EngineConfig
from engine.tools.registry import ToolContext, ToolRegistry
from engine.tools.web import WebFetchConfig, html_to_text, web_fetch_tool
from protocol.settings import GroupSettings
from store.base import Group, GroupMessage
from tests.fixtures.llm_server import FakeLLM, ScriptedToolCall
from tests.fixtures.stores import StoreFactory

PAGE = (
    "<html><head><title>The  Plan</title><style>p {color: red}</style>"
    "<script>alert('x')</script></head><body><h1>Caching</h1><p>Use a <b>write-through</b>"
    " cache &amp; measure.</p><ul><li>one</li><li>two</li></ul></body></html>"
)


class _Site(BaseHTTPRequestHandler):
    release: threading.Event

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        port = self.server.server_address[1]
        routes = {
            "/page": (200, "text/html; charset=utf-8", PAGE.encode()),
            "/plain": (200, "text/plain", b"just text"),
            "/big": (200, "text/plain", b"a" * 5000),
            "/bin": (200, "image/png", b"\x89PNG\r\n\x1a\n" + b"\x00" * 40),
            "/gone": (404, "text/plain", b"no such page"),
        }
        redirects = {
            "/to-page": f"http://127.0.0.1:{port}/page",
            "/to-metadata": "http://169.254.169.254/latest/meta-data/",
            "/to-other-loopback": f"http://127.0.0.2:{port}/page",
            "/loop": "/loop",
        }
        if self.path in redirects:
            self.send_response(302)
            self.send_header("Location", redirects[self.path])
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if self.path == "/slow":
            self.release.wait(10)
        status, kind, body = routes.get(self.path, (200, "text/plain", b"slow"))
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def site() -> Iterator[str]:
    release = threading.Event()
    handler = type("Site", (_Site,), {"release": release})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        release.set()
        server.shutdown()
        server.server_close()
        thread.join(5)


async def fetch(url: str, **config: Any) -> tuple[str, bool]:
    tools = ToolRegistry([web_fetch_tool(WebFetchConfig(**config))])
    out = await tools.execute(
        ToolCall(id="c", name="web_fetch", arguments={"url": url}), ToolContext("x")
    )
    return out.content, out.is_error


async def test_a_page_comes_back_as_readable_text(site: str) -> None:
    text, error = await fetch(f"{site}/page", allow=("127.0.0.1",))
    assert not error
    head, body = text.split("\n\n", 1)
    assert head.splitlines() == [
        f"URL: {site}/page",
        "Status: 200",
        "Content-Type: text/html",
        "Title: The Plan",
    ]
    assert body == "Caching\nUse a write-through cache & measure.\none\ntwo"
    assert "alert" not in text and "color" not in text


async def test_without_the_allowlist_loopback_is_refused(site: str) -> None:
    text, error = await fetch(f"{site}/page")
    assert error and "127.0.0.1, which is not a public address" in text
    text, error = await fetch(site.replace("127.0.0.1", "localhost") + "/page")
    assert error and "not a public address" in text


@pytest.mark.parametrize(
    "url",
    [
        "http://10.1.2.3/",
        "http://192.168.0.1/",
        "http://172.16.5.5/",
        "http://169.254.169.254/latest/meta-data/",
        "http://100.64.0.1/",
        "http://0.0.0.0/",
        "http://[::1]/",
        "http://[fe80::1]/",
        "http://[fd00::1]/",
        "http://[::ffff:127.0.0.1]/",
        "http://224.0.0.1/",
    ],
)
async def test_private_and_special_addresses_are_refused(url: str) -> None:
    text, error = await fetch(url, allow=("127.0.0.1",))
    assert error and "not a public address" in text, text


async def test_redirects_are_followed_through_the_same_check(site: str) -> None:
    text, error = await fetch(f"{site}/to-page", allow=("127.0.0.1",))
    assert not error and "write-through" in text and f"URL: {site}/page" in text
    text, error = await fetch(f"{site}/to-metadata", allow=("127.0.0.1",))
    assert error and "169.254.169.254, which is not a public address" in text
    text, error = await fetch(f"{site}/to-other-loopback", allow=("127.0.0.1",))
    assert error and "127.0.0.2, which is not a public address" in text
    text, error = await fetch(f"{site}/loop", allow=("127.0.0.0/8",), max_redirects=3)
    assert error and "more than 3 redirects" in text


async def test_size_time_and_kind_limits(site: str) -> None:
    allow = ("127.0.0.1",)
    text, error = await fetch(f"{site}/big", allow=allow, max_bytes=1000)
    assert not error and text.endswith("a" * 1000 + "\n[the page was cut at 1000 bytes]")
    text, _ = await fetch(f"{site}/big", allow=allow, max_chars=10)
    assert text.endswith("a" * 10 + "\n[the text was cut at 10 characters]")
    text, error = await fetch(f"{site}/slow", allow=allow, timeout=0.3)
    assert error and "no complete answer within 0.3 s" in text
    text, error = await fetch(f"{site}/bin", allow=allow)
    assert not error and "[binary content, 48 bytes: not shown]" in text
    text, error = await fetch(f"{site}/gone", allow=allow)
    assert error and "Status: 404" in text and "no such page" in text
    for bad in ["file:///etc/passwd", "ftp://x/", "not a url"]:
        text, error = await fetch(bad, allow=allow)
        assert error and "http://" in text


def test_html_is_reduced_with_the_standard_parser() -> None:
    title, text = html_to_text("<p>a&lt;b</p><noscript>no</noscript><div>c<br>d</div>")
    assert (title, text) == ("", "a<b\nc\nd")


async def test_a_vp_fetches_a_page_in_its_turn(site: str, fake_llm: FakeLLM, tmp_path: Any) -> None:
    store_factory = StoreFactory("embedded", tmp_path / "data", None, "unused")
    config = RuntimeConfig(
        store=store_factory.config,
        engine=EngineConfig(
            model="openai:gpt-test",
            openai_api_key=SecretStr("sk-test-0123456789"),
            openai_base_url=fake_llm.openai_base_url,
            max_retries=0,
            web_fetch_allow=("127.0.0.1",),
        ),
        dream_idle_s=0,
        dream_every_turns=0,
    )
    vp = VPActor("linus", config)
    try:
        store = vp.services.store
        gid = f"grp_{uuid.uuid4().hex[:10]}"
        allowed = GroupSettings(auto_approve=True)  # web_fetch asks first by default
        await store.create_group(Group(id=gid, name="g", roster=["linus"], settings=allowed))
        msg, _ = await store.append_message(
            gid, GroupMessage(author="ann", role="user", text="read it")
        )
        fake_llm.tool_calls(ScriptedToolCall("web_fetch", {"url": f"{site}/page"}))
        fake_llm.text("It says write-through.")
        origin = TurnOrigin(trigger_id=msg.id, chain_id=msg.id, user_id="ann")
        outcome = await vp.call(RunTurn(TurnRequest(gid, "linus", uuid.uuid4().hex, origin)))
        assert outcome.text == "It says write-through."
        (result,) = [
            m["content"] for m in fake_llm.requests[1].body["messages"] if m["role"] == "tool"
        ]
        assert "Use a write-through cache & measure." in result
    finally:
        await vp.close()
