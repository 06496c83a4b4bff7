"""``yeaft chat GROUP``: a terminal client for one group.

Each VP's reply streams under its own coloured label, one reply live at a
time while the others wait their turn (:mod:`gateway.chat_screen`), so
parallel replies stay readable. What other people write (and what this person writes
elsewhere, in a browser say) appears as it is sent, and so does a VP's
``route_forward`` hand-off; a line typed here is not printed again. Lines
typed are sent as chat messages (``@mentions`` work as in the web UI).
Commands are handled here: ``/help`` lists them, ``/cancel [vp]`` stops one
VP or everyone and says which turns it stopped, ``/answer`` replies to a
VP's question, ``/thread`` and ``/main`` open a thread and leave it
(:mod:`gateway.chat_threads`), ``/quit`` leaves. A server it cannot reach, or a token it
refuses, is a :class:`ChatError` (one line for the person, no traceback).

Across a lost connection or a server restart it resumes like the web
client: it notices a dead connection within seconds (WebSocket pings), says
it is reconnecting, subscribes again with the ``lastSeq`` it has shown, and
sends again every message the server has not acknowledged (the server keeps
a ``clientMessageId`` once, so nothing is answered twice). A ``lastSeq``
the server's log has not reached (its store was reset) is answered with a
``conflict`` that gives the log's head; the client continues from there
instead of dropping every new envelope as already seen.
"""

from __future__ import annotations

import asyncio
import json
import mimetypes
import sys
import threading
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import quote

import httpx

from gateway.chat_screen import Screen, files_line, render, said_line, typed_answer
from gateway.chat_threads import ThreadView
from protocol.common import MAX_TEXT_LENGTH

PING_INTERVAL_S = 20.0
# WebSocket pings: a server that stops answering (hung, or gone behind a
# proxy that keeps the connection open) is left after about ten seconds.
LIVENESS_PING_S = 5.0
LIVENESS_TIMEOUT_S = 5.0
OPEN_TIMEOUT_S = 10.0
QUIT = ("/quit", "/exit")
HELP = """commands:
  /help            this list
  /cancel [VP]     stop every running turn of the group, or only VP's
  /answer TEXT     answer the question a VP asked you (a choice's number, or 1,3 for several)
  /attach PATH     upload a file; it goes with your next message
  /thread [N]      list the recent messages, or open the thread under number N
  /main            leave the thread, back to the main timeline
  /quit            leave (Ctrl-D too)
anything else is sent to the group; @name addresses a VP, @all everyone;
start a line with // to send text that begins with /"""


class ChatError(Exception):
    """A problem the user must fix (bad token, unknown group, server down)."""


class ChatClient:
    """One person in one group, from a terminal; ``prompt`` shows ``GROUP> `` when idle."""

    def __init__(
        self,
        url: str,
        token: str,
        group: str,
        out: TextIO = sys.stdout,
        *,
        prompt: bool = False,
    ) -> None:
        self.url = url.rstrip("/")
        self.token = token
        self.group_ref = group
        self.group_id = ""
        self.last_seq = 0
        # The question waiting for /answer, and the one answered last (asked
        # again when the server refuses its answer).
        self.pending_question: dict[str, Any] | None = None
        self.answered: dict[str, Any] | None = None
        # Messages already on screen: the ones typed here (by clientMessageId)
        # and the history (by message id), which a replay may repeat.
        self.sent: set[str] = set()
        self.shown: set[str] = set()
        self.screen = Screen(out, out.isatty())
        self.want_prompt = prompt
        self._ws: Any = None
        # Uploaded with /attach, sent with the next message.
        self.files: list[str] = []
        # Chat frames sent but not acknowledged, by clientMessageId: sent
        # again after a reconnect, until the server acks (or refuses) them.
        self.outbox: dict[str, dict[str, Any]] = {}
        # The main timeline, or the thread open here (gateway.chat_threads).
        self.threads = ThreadView()

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    def _http(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(base_url=self.url, headers=self._headers(), timeout=10.0)

    def _unreachable(self, exc: Exception) -> ChatError:
        reason = str(exc).strip() or type(exc).__name__
        return ChatError(
            f"cannot reach the Yeaft server at {self.url} ({reason}); is `yeaft serve` "
            "running there? Set YEAFT_URL (or YEAFT_PORT) or pass --url"
        )

    async def resolve_group(self) -> list[dict[str, Any]]:
        """Find the group by id or name and return its recent history."""
        try:
            return await self._resolve_group()
        except httpx.HTTPStatusError as exc:
            status = exc.response.status_code
            raise ChatError(
                f"the server at {self.url} answered {status} to {exc.request.url.path}"
            ) from exc
        except (httpx.TransportError, httpx.InvalidURL) as exc:
            raise self._unreachable(exc) from exc
        except ValueError as exc:  # a body that is not JSON: not a Yeaft server
            raise ChatError(f"{self.url} does not look like a Yeaft server ({exc})") from exc

    async def _resolve_group(self) -> list[dict[str, Any]]:
        async with self._http() as http:
            listed = await http.get("/api/groups")
            if listed.status_code == 401:
                raise ChatError(
                    "the server refused the token (bad or expired); get a new one with "
                    "`yeaft token NAME` and put it in YEAFT_TOKEN"
                )
            listed.raise_for_status()
            groups = listed.json()
            groups = groups.get("groups", groups) if isinstance(groups, dict) else groups
            match = [g for g in groups if self.group_ref in (g["id"], g["name"])]
            if not match:
                names = ", ".join(g["name"] for g in groups) or "none"
                raise ChatError(f"no group {self.group_ref!r} (yours: {names})")
            self.group_id = match[0]["id"]
            if self.want_prompt:
                self.screen.prompt = f"{match[0]['name']}> "
            hist = await http.get(
                f"/api/groups/{quote(self.group_id)}/messages", params={"limit": 30}
            )
            hist.raise_for_status()
            body = hist.json()
            self.last_seq = int(body.get("lastSeq", 0))
            return list(body.get("messages", []))

    async def local(self, line: str) -> bool:
        """Handle a command that needs no frame; True when ``line`` was one."""
        word, _, rest = line.strip().partition(" ")
        if not word.startswith("/") or word.startswith("//"):
            return False
        if word == "/help":
            self.screen.line(HELP)
        elif word == "/attach":
            self.screen.line(await self.attach(rest.strip()))
        elif word == "/cancel":
            self.screen.line(await self.cancel(rest.strip().lstrip("@") or None))
        elif word == "/main" or (word == "/thread" and rest.strip() == "off"):
            self.threads.open_id = None
            self.screen.line("── main timeline ──")
        elif word == "/thread":
            self.screen.line(await self.open_thread(rest.strip()))
        elif word == "/answer" and not self.pending_question:
            self.screen.line("  no question is waiting for an answer")
        elif word != "/answer":
            self.screen.line(f"  unknown command {word}: /help lists the commands")
        else:
            return False
        return True

    async def attach(self, path: str) -> str:
        """Upload the file at ``path`` for the next message; what happened, as a line."""
        if not path:
            return "  /attach needs a file: /attach PATH"
        file = Path(path)
        try:
            data = await asyncio.to_thread(lambda: file.expanduser().read_bytes())
        except OSError as exc:
            return f"  cannot read {path}: {exc.strerror or exc}"
        mime = mimetypes.guess_type(file.name)[0] or "application/octet-stream"
        try:
            async with self._http() as http:
                reply = await http.post(
                    f"/api/groups/{quote(self.group_id)}/attachments",
                    params={"name": file.name},
                    content=data,
                    headers={"Content-Type": mime},
                )
        except httpx.TransportError as exc:
            return f"  upload failed: {self._unreachable(exc)}"
        if reply.status_code != 201:
            return f"  upload refused: {_refusal(reply)}"
        self.files.append(str(reply.json()["id"]))
        return f"  attached {file.name} ({len(data)} bytes); it goes with your next message"

    async def open_thread(self, ref: str) -> str:
        """List the threads (no ``ref``), or open one and print it; what to say, as lines."""
        if not ref:
            return self.threads.listing()
        root = self.threads.pick(ref)
        if root is None:
            return f"  no message {ref!r}: /thread lists them by number"
        path = f"/api/groups/{quote(self.group_id)}/threads/{quote(root)}"
        try:
            async with self._http() as http:
                reply = await http.get(path)
        except httpx.TransportError as exc:
            return f"  cannot open the thread: {self._unreachable(exc)}"
        if reply.status_code != 200:
            return f"  cannot open the thread: {_refusal(reply)}"
        thread = reply.json()
        self.threads.open_id = root
        for line in self.threads.header(thread):
            self.screen.line(line)
        self._print([thread["root"], *thread.get("messages", [])])
        return "  (lines you type now go to this thread)"

    async def cancel(self, vp: str | None) -> str:
        """Stop the group's running turns (or one VP's); what was stopped, as a line."""
        path = f"/api/groups/{quote(self.group_id)}/cancel"
        try:
            async with self._http() as http:
                reply = await http.post(path, json={"vpId": vp} if vp else {})
        except httpx.TransportError as exc:
            return f"  cancel failed: {self._unreachable(exc)}"
        if reply.status_code != 200:
            return f"  cancel refused: {_refusal(reply)}"
        body = reply.json()
        count, vps = int(body.get("cancelled", 0)), [str(v) for v in body.get("vps", [])]
        if not vps:
            who = f"{vp} is not" if vp else "no VP is"
            return f"  nothing to cancel: {who} answering right now"
        # ``cancelled`` counts the turns the VPs had begun; one still on its
        # way to its VP is stopped when it arrives, so the VPs are the news.
        running = f" ({count} running {'turn' if count == 1 else 'turns'} stopped)" if count else ""
        return f"  cancelled the replies of {', '.join(vps)}{running}"

    def command(self, line: str) -> dict[str, Any] | None:
        """The frame a typed line stands for (None: nothing to send)."""
        line = line.strip()
        if not line:
            return None
        if line.startswith("//"):
            line = line[1:]
        elif line.startswith("/answer") and self.pending_question:
            question, self.pending_question = self.pending_question, None
            self.answered = question
            choices = [str(c) for c in question.get("choices") or []]
            answer = typed_answer(
                line.removeprefix("/answer"), choices, bool(question.get("multiSelect"))
            )
            return {
                "type": "ask_user_answer",
                "groupId": self.group_id,
                "requestId": question.get("requestId"),
                "answer": answer,
            }
        client_message_id = uuid.uuid4().hex
        self.sent.add(client_message_id)
        frame: dict[str, Any] = {
            "type": "yeaft_session_chat",
            "groupId": self.group_id,
            "text": line,
            "clientMessageId": client_message_id,
        }
        if self.threads.open_id is not None:
            frame["threadId"] = self.threads.open_id
        if self.files:
            frame["attachments"] = [{"id": file_id} for file_id in self.files]
            self.files = []
        self.outbox[client_message_id] = frame
        return frame

    def too_long(self, line: str) -> str | None:
        """Why ``line`` cannot be sent as it is (longer than a message may be), or None."""
        size = len(line.strip())
        if size <= MAX_TEXT_LENGTH:
            return None
        return (
            f"  not sent: the message has {size:,} characters and the limit is "
            f"{MAX_TEXT_LENGTH:,}; send it as a file with /attach PATH"
        )

    def on_frame(self, frame: dict[str, Any]) -> None:
        seq = frame.get("seq")
        if isinstance(seq, int):
            if seq <= self.last_seq:
                return
            self.last_seq = seq
        kind = frame.get("type")
        if kind == "inbox_summary":
            # The group list's counts: only a mention elsewhere is worth a line here.
            mention = frame.get("mention")
            if not mention or frame.get("groupId") == self.group_id:
                return
            who, excerpt = mention.get("author", "?"), mention.get("excerpt", "")
            self.screen.line(f"  @{who} mentioned you in {frame.get('groupId')}: {excerpt}")
            self.screen.show_prompt()
            return
        if kind == "ack":
            self.outbox.pop(str(frame.get("clientMessageId")), None)
            return
        if kind == "error":
            self._on_error(frame)
        if frame.get("type") == "ask_user_question":
            self.pending_question = frame
        if frame.get("type") == "error" and frame.get("field") == "answer" and self.answered:
            # An answer that did not fit: the question is still open, answer again.
            if frame.get("requestId") == self.answered.get("requestId"):
                self.pending_question = self.answered
        shown_here, note = self.threads.route(frame)
        if not shown_here:
            if note and frame.get("clientMessageId") not in self.sent:
                self.screen.line(note)
                self.screen.show_prompt()
            return
        if frame.get("type") == "group_message":
            if frame.get("clientMessageId") in self.sent or frame.get("messageId") in self.shown:
                return
            self.shown.add(str(frame.get("messageId")))
        render(self.screen, frame)
        self.screen.show_prompt()

    def _on_error(self, frame: dict[str, Any]) -> None:
        # A refused message is not sent again: the error line says why.
        self.outbox.pop(str(frame.get("requestId")), None)
        detail = frame.get("detail") or {}
        if frame.get("code") == "conflict" and frame.get("field") == "lastSeq":
            # The log is behind what was shown (its store was reset): go on
            # from its head, or every new envelope would look already seen.
            head = detail.get("lastSeq")
            if isinstance(head, int) and detail.get("groupId") == self.group_id:
                self.last_seq = head

    def show_history(self, messages: list[dict[str, Any]]) -> None:
        """Print the main timeline's stored messages the way they read live."""
        for msg in messages:
            self.threads.seen(msg)
        self._print([m for m in messages if not (m.get("meta") or {}).get("threadId")])

    def _print(self, messages: list[dict[str, Any]]) -> None:
        for msg in messages:
            self.shown.add(str(msg.get("id")))
            who, text, meta = msg.get("author", "?"), msg.get("text", ""), msg.get("meta") or {}
            if meta.get("injectedBy") == "route_forward":
                handoff = {
                    "from": meta.get("senderVpId", who),
                    "to": meta.get("routeForwardTarget"),
                }
                self.screen.line(said_line(self.screen, who, text, handoff))
            elif msg.get("role") == "assistant":
                self.screen.stream(who, str(msg.get("id", "")), text)
                self.screen.end(who, str(msg.get("id", "")))
            else:
                self.screen.line(f"{who}: {text}")
            if msg.get("attachments"):
                self.screen.line(files_line(msg["attachments"]))

    async def run(self, read_line: Callable[[], str] | None = None) -> int:
        import websockets

        self.show_history(await self.resolve_group())
        # The VP's prompt says the person writes from the terminal.
        ws_url = self.url.replace("http", "ws", 1) + "/ws?client=terminal"
        # One reader for the whole session: a reader per connection would
        # leave a thread blocked on stdin that swallows the next line.
        lines: asyncio.Queue[str] = asyncio.Queue()
        self._read_lines(read_line, lines)
        backoff = 0.5
        lost = False
        while True:
            try:
                async with websockets.connect(
                    ws_url,
                    additional_headers=self._headers(),
                    ping_interval=LIVENESS_PING_S,
                    ping_timeout=LIVENESS_TIMEOUT_S,
                    open_timeout=OPEN_TIMEOUT_S,
                    close_timeout=LIVENESS_TIMEOUT_S,
                    max_size=None,
                ) as ws:
                    backoff = 0.5
                    await self._resume(ws, lost)
                    lost = False
                    if await self._session(ws, lines):
                        return 0
            except websockets.ConnectionClosed as closed:
                if closed.rcvd and closed.rcvd.code == 4401:
                    raise ChatError("the session expired; get a new token") from closed
            except (OSError, TimeoutError, websockets.InvalidHandshake) as exc:
                if not lost:
                    self.screen.line(f"  (cannot reach the server: {exc}; retrying)")
            if not lost:
                self.screen.line("  (connection lost; reconnecting…)")
                lost = True
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 10)

    async def _resume(self, ws: Any, lost: bool) -> None:
        """Subscribe after what was shown, then send again what was not acknowledged."""
        subscribe = {"type": "subscribe", "groupId": self.group_id, "lastSeq": self.last_seq}
        await ws.send(json.dumps(subscribe))
        if lost:
            unsent = f"; sending {len(self.outbox)} unacknowledged" if self.outbox else ""
            self.screen.line(f"  (reconnected: resuming after seq {self.last_seq}{unsent})")
        for frame in list(self.outbox.values()):
            await ws.send(json.dumps(frame))

    @staticmethod
    def _read_lines(
        read_line: Callable[[], str] | None, out: asyncio.Queue[str]
    ) -> threading.Thread:
        """Read lines on a daemon thread: a blocked read must never hold up exit.

        (The event loop's default executor is joined when ``asyncio.run``
        ends, so a read left waiting there would hang ``/quit``.)
        """
        reader = read_line or sys.stdin.readline
        loop = asyncio.get_running_loop()

        def pump() -> None:
            while True:
                line = reader()
                try:
                    loop.call_soon_threadsafe(out.put_nowait, line)
                except RuntimeError:  # the loop has closed: nobody is listening
                    return
                if line == "" or line.strip() in QUIT:
                    return

        thread = threading.Thread(target=pump, name="yeaft-chat-input", daemon=True)
        thread.start()
        return thread

    async def _session(self, ws: Any, lines: asyncio.Queue[str]) -> bool:
        """Run one connection; True when the user quit."""

        async def receive() -> None:
            async for raw in ws:
                self.on_frame(json.loads(raw))

        async def send() -> bool:
            while True:
                self.screen.show_prompt()
                line = await lines.get()
                self.screen.typed()
                if line == "" or line.strip() in QUIT:
                    return True
                if await self.local(line):
                    continue
                refused = self.too_long(line)
                if refused:
                    self.screen.line(refused)
                    continue
                frame = self.command(line)
                if frame is not None:
                    await ws.send(json.dumps(frame))

        async def keep_alive() -> None:
            # The server closes a client that sends nothing for a minute.
            while True:
                await asyncio.sleep(PING_INTERVAL_S)
                await ws.send(json.dumps({"type": "ping"}))

        recv_task = asyncio.create_task(receive())
        send_task = asyncio.create_task(send())
        ping_task = asyncio.create_task(keep_alive())
        done, pending = await asyncio.wait(
            {recv_task, send_task, ping_task}, return_when=asyncio.FIRST_COMPLETED
        )
        for task in pending:
            task.cancel()
        if send_task in done:
            return send_task.result()
        for task in done:
            task.result()  # re-raises ConnectionClosed for the reconnect loop
        return False


def _refusal(reply: httpx.Response) -> str:
    """What the server said when it refused a request: its error message, else the status."""
    error = reply.json().get("error", {}) if reply.content else {}
    return str(error.get("message") or reply.status_code)
