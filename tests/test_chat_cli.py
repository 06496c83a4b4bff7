"""``yeaft chat``: where it connects, one-line errors, and the commands it handles itself."""

from __future__ import annotations

import asyncio
import io
import queue
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

from gateway.chat_client import ChatClient
from gateway.chat_screen import Screen, render
from gateway.cli_server import chat_url
from tests.fixtures.gateway import StartGateway, WsClient
from tests.fixtures.ray_cluster import MakeRuntime
from tests.test_cli import PROVIDER_VARS, ROOT, yeaft
from tests.test_cli_server import eventually


def closed_port() -> int:
    """A port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def chat_process(group: str, lines: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``yeaft chat GROUP`` with ``lines`` on its (non-terminal) standard input."""
    import os

    clean = {
        k: v
        for k, v in os.environ.items()
        if k not in PROVIDER_VARS and k not in ("YEAFT_URL", "YEAFT_PORT", "YEAFT_TOKEN")
    }
    clean.update(NO_COLOR="1", **env)
    return subprocess.run(
        [sys.executable, "-m", "gateway.cli", "chat", group],
        cwd=ROOT,
        env=clean,
        input=lines,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_chat_url_follows_the_environment(monkeypatch: Any) -> None:
    for var in ("YEAFT_URL", "YEAFT_HOST", "YEAFT_PORT"):
        monkeypatch.delenv(var, raising=False)
    assert chat_url(None) == "http://127.0.0.1:8765"
    monkeypatch.setenv("YEAFT_PORT", "9000")
    assert chat_url(None) == "http://127.0.0.1:9000"
    monkeypatch.setenv("YEAFT_HOST", "0.0.0.0")  # where a server listens: call localhost
    assert chat_url(None) == "http://127.0.0.1:9000"
    monkeypatch.setenv("YEAFT_URL", "https://chat.example")
    assert chat_url(None) == "https://chat.example"
    assert chat_url("http://other:1") == "http://other:1"


def test_unreachable_server_is_one_line(tmp_path: Path) -> None:
    port = closed_port()
    out = chat_process("team", "", YEAFT_PORT=str(port), YEAFT_TOKEN="x.y.z")
    assert out.returncode == 2
    assert "Traceback" not in out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    assert f"cannot reach the Yeaft server at http://127.0.0.1:{port}" in lines[0]
    assert "yeaft serve" in lines[0]
    # Without a token it says where to get one.
    missing = yeaft("chat", "team", tmp=tmp_path, YEAFT_TOKEN="")
    assert missing.returncode == 2 and "yeaft token NAME" in missing.stderr


async def test_chat_follows_yeaft_url_and_handles_commands_itself(
    start_gateway: StartGateway,
) -> None:
    gw = await start_gateway()
    token = await gw.user("ann")
    made = await gw.http.post(
        "/api/groups", json={"name": "team", "roster": ["linus"]}, headers=gw.auth("ann")
    )
    assert made.status_code == 201, made.text
    out = await asyncio.to_thread(
        chat_process,
        "team",
        "/help\n/nonsense\n/answer yes\n/cancel\n/quit\n",
        YEAFT_URL=gw.base_url,
        YEAFT_TOKEN=token,
    )
    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stderr
    assert "/cancel [VP]" in out.stdout and "/quit" in out.stdout  # the help
    assert "unknown command /nonsense" in out.stdout
    assert "no question is waiting" in out.stdout
    assert "nothing to cancel: no VP is answering right now" in out.stdout
    # None of the commands reached the group as a message.
    history = await gw.http.get(f"/api/groups/{made.json()['id']}/messages", headers=gw.auth("ann"))
    assert history.json()["messages"] == []
    # A refused token is one line too.
    bad = await asyncio.to_thread(
        chat_process, "team", "", YEAFT_URL=gw.base_url, YEAFT_TOKEN="not.a.token"
    )
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1
    assert "refused the token" in bad.stderr and "Traceback" not in bad.stderr


def streaming(client: ChatClient) -> set[str]:
    """The VPs whose replies are on their way to the screen (live or waiting)."""
    keys = [client.screen.owner, *client.screen.waiting]
    return {key[0] for key in keys if key is not None}


def test_parallel_replies_are_shown_one_at_a_time() -> None:
    out = io.StringIO()
    screen = Screen(out, colour=False, prompt="team> ")
    screen.show_prompt()
    screen.stream("linus", "t1", "Cache")
    screen.stream("steve", "t2", "Cut")
    screen.turn_line("steve", "t2", "  steve ⚙ recall {}")
    screen.stream("linus", "t1", " at the edge.")
    screen.stream("steve", "t2", " the wizard.")
    screen.line("bob: what about search?")  # a person's message is shown at once
    screen.stream("linus", "t1", " Measure.")
    screen.show_prompt()  # not while replies are on their way
    screen.end("steve", "t2")  # steve ends first, but waits for linus
    assert "Cut" not in out.getvalue()
    screen.end("linus", "t1")
    screen.show_prompt()
    assert out.getvalue() == (
        "team> \n"
        "linus› Cache at the edge.\n"
        "bob: what about search?\n"
        "linus› Measure.\n"
        "steve› Cut\n"
        "  steve ⚙ recall {}\n"
        "steve› the wizard.\n"
        "team> "
    )


def test_a_turns_init_is_skipped_and_its_errors_and_max_turns_end_are_shown() -> None:
    out = io.StringIO()
    screen = Screen(out, colour=False, prompt="team> ")

    def output(data: dict[str, Any]) -> dict[str, Any]:
        return {"type": "yeaft_output", "vpId": "steve", "turnId": "t1", "data": data}

    init = {"type": "system", "subtype": "init", "model": "openai:m", "tools": ["rethink"]}
    render(screen, output({**init, "session_id": "g1", "message": "turn started on openai:m"}))
    render(screen, output({"type": "system", "subtype": "error", "message": "compaction failed"}))
    render(
        screen,
        output(
            {
                "type": "result",
                "subtype": "error_max_turns",
                "is_error": True,
                "error": "The tool budget ran out",
            }
        ),
    )

    assert "turn started" not in out.getvalue()
    assert "! compaction failed" in out.getvalue()
    assert "steve: The tool budget ran out" in out.getvalue()


async def test_cancel_says_which_turns_it_stopped(
    start_gateway: StartGateway, make_runtime: MakeRuntime
) -> None:
    # Slow replies (2 tokens/s: half a minute or more), so both are still streaming
    # when each /cancel comes, however loaded the machine.
    gw = await start_gateway(make_runtime(engine={"model": "offline:default?tps=2"}))
    token = await gw.user("ann")
    made = await gw.http.post(
        "/api/groups", json={"name": "team", "roster": ["linus", "steve"]}, headers=gw.auth("ann")
    )
    lines: queue.Queue[str] = queue.Queue()
    out = io.StringIO()
    client = ChatClient(gw.base_url, token, "team", out=out, prompt=True)
    task = asyncio.create_task(client.run(read_line=lines.get))
    await eventually(lambda: "team> " in out.getvalue())  # the prompt, once connected
    lines.put("@linus @steve tell me everything about page caches\n")
    # One reply streams live; the other waits its turn on screen, but both run.
    await eventually(lambda: "linus›" in out.getvalue() or "steve›" in out.getvalue())
    await eventually(lambda: streaming(client) == {"linus", "steve"})
    lines.put("/cancel steve\n")
    await eventually(lambda: "cancelled the replies of steve (1 running turn" in out.getvalue())
    lines.put("/cancel\n")
    await eventually(lambda: "cancelled the replies of linus (1 running turn" in out.getvalue())
    lines.put("/cancel\n")
    await eventually(lambda: "nothing to cancel" in out.getvalue())
    lines.put("/quit\n")
    assert await asyncio.wait_for(task, 20) == 0
    assert "— Linus" not in out.getvalue()  # neither reply ran to its end
    # The terminal client names its channel; the message keeps it for the VPs' prompts.
    sent = await (await gw.runtime.store()).read_messages(made.json()["id"])
    assert [m.meta.get("channel") for m in sent if m.role == "user"] == ["terminal"]


async def test_attach_uploads_a_file_for_the_next_message_and_files_are_shown_by_name(
    start_gateway: StartGateway, tmp_path: Path
) -> None:
    gw = await start_gateway()
    token = await gw.user("ann")
    made = await gw.http.post(
        "/api/groups", json={"name": "team", "roster": ["linus"]}, headers=gw.auth("ann")
    )
    notes = tmp_path / "notes.txt"
    notes.write_text("remember the milk")
    out = io.StringIO()
    client = ChatClient(gw.base_url, token, "team", out)
    await client.resolve_group()

    assert await client.local("/attach /no/such/file")
    assert await client.local(f"/attach {notes}")
    assert "cannot read /no/such/file" in out.getvalue()
    assert "attached notes.txt (17 bytes)" in out.getvalue()
    frame = client.command("see the file")
    assert frame is not None and len(frame["attachments"]) == 1
    assert "attachments" not in (client.command("and nothing else") or {})

    ws = await WsClient.open(gw, "ann")
    ack = await ws.request(frame)
    assert ack["type"] == "ack", ack
    history = await gw.http.get(f"/api/groups/{made.json()['id']}/messages", headers=gw.auth("ann"))
    client.show_history(history.json()["messages"])
    assert "ann: see the file\n  files: notes.txt (17 bytes)" in out.getvalue()
    await ws.close()


def test_terminal_lines_edit_and_take_a_paste_whole() -> None:
    import os
    import pty
    import termios

    from gateway.chat_input import TerminalLines

    master, slave = pty.openpty()
    try:
        before = termios.tcgetattr(slave)
        with TerminalLines(slave) as terminal:
            # Canonical mode is off: the kernel no longer cuts a line at 4,095.
            assert not termios.tcgetattr(slave)[3] & termios.ICANON
            os.write(master, b"helo\x7flo wrold\x17world\n")
            assert terminal.readline() == "hello world\n"
            os.write(master, b"junk\x15\x1b[Dok\n")  # Ctrl-U clears; an arrow is ignored
            assert terminal.readline() == "ok\n"
            paste = "x" * 5000 + "\r" + "y" * 10  # a paste's newline stays in the message
            os.write(master, f"\x1b[200~{paste}\x1b[201~\n".encode())
            assert terminal.readline() == "x" * 5000 + "\n" + "y" * 10 + "\n"
            os.write(master, b"\x04")  # Ctrl-D on an empty line: leave
            assert terminal.readline() == ""
        assert termios.tcgetattr(slave) == before  # the terminal is given back as it was
    finally:
        os.close(master)
        os.close(slave)


def test_a_mention_in_another_group_is_a_line_and_counts_are_not() -> None:
    out = io.StringIO()
    client = ChatClient("http://x", "t", "team", out)
    client.group_id = "g1"
    summary = {"type": "inbox_summary", "groupId": "g1", "unread": 1, "mentions": 1}
    mention = {"groupId": "g2", "messageId": "m", "author": "ann", "excerpt": "@bob look", "ts": 1}
    client.on_frame({**summary, "mention": {**mention, "groupId": "g1"}})  # the open group
    client.on_frame({**summary, "groupId": "g2"})  # counts alone
    assert out.getvalue() == ""
    client.on_frame({**summary, "groupId": "g2", "mention": mention})
    assert out.getvalue() == "  @ann mentioned you in g2: @bob look\n"
