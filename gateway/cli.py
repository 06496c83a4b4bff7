"""The ``yeaft`` command line.

Every subcommand is a small function; ``main`` only parses arguments and
dispatches. Subcommands that need the gateway or Ray import them lazily, so
``yeaft ask`` and ``yeaft schema`` start in well under a second.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from pathlib import Path
from typing import TextIO

from engine.call_context import CallContext, Speaker
from engine.events import (
    EngineEvent,
    NoticeEvent,
    StopEvent,
    StopReason,
    TextDelta,
    ThinkingDelta,
    ToolCallEvent,
    ToolOutputEvent,
    ToolResultEvent,
)
from gateway.chat_screen import question_line, typed_answer


def data_dir() -> Path:
    return Path(os.environ.get("YEAFT_DATA_DIR", "~/.yeaft")).expanduser()


def personas_dir() -> Path:
    return Path(os.environ.get("YEAFT_PERSONAS_DIR", str(data_dir() / "personas"))).expanduser()


class Style:
    """ANSI styling, off when the stream is not a terminal or NO_COLOR is set."""

    def __init__(self, stream: TextIO) -> None:
        self.on = stream.isatty() and not os.environ.get("NO_COLOR")

    def __call__(self, text: str, code: str) -> str:
        return f"\033[{code}m{text}\033[0m" if self.on else text

    def dim(self, text: str) -> str:
        return self(text, "2")

    def bold(self, text: str) -> str:
        return self(text, "1")

    def red(self, text: str) -> str:
        return self(text, "31")


class TerminalPrinter:
    """Prints one turn's events as they stream."""

    def __init__(self, out: TextIO = sys.stdout) -> None:
        self.out = out
        self.style = Style(out)
        self.in_thinking = False
        self.stop: StopEvent | None = None

    def write(self, text: str) -> None:
        self.out.write(text)
        self.out.flush()

    async def __call__(self, event: EngineEvent) -> None:
        s = self.style
        if isinstance(event, ThinkingDelta):
            if not self.in_thinking:
                self.write(s.dim("[thinking] "))
                self.in_thinking = True
            self.write(s.dim(event.text))
            return
        if self.in_thinking:
            self.write("\n")
            self.in_thinking = False
        if isinstance(event, TextDelta):
            self.write(event.text)
        elif isinstance(event, ToolCallEvent):
            args = json.dumps(event.arguments, ensure_ascii=False)
            self.write("\n" + s.bold(f"⚙ {event.name}") + s.dim(f" {args[:200]}") + "\n")
        elif isinstance(event, ToolOutputEvent):
            self.write(s.dim(event.text))
        elif isinstance(event, ToolResultEvent):
            body = event.content.replace("\n", " ")[:200]
            self.write((s.red if event.is_error else s.dim)(f"  → {body}") + "\n")
        elif isinstance(event, NoticeEvent):
            self.write("\n" + s.dim(f"[{event.kind}] {event.message}") + "\n")
        elif isinstance(event, StopEvent):
            self.stop = event

    def summary(self) -> str:
        stop = self.stop
        if stop is None:
            return ""
        u = stop.usage
        line = (
            f"{stop.reason} · {u.input_tokens} in / {u.output_tokens} out tokens · "
            f"${stop.cost_usd:.6f} · {stop.duration_ms} ms · {stop.model or '-'}"
        )
        return self.style.dim(line)


async def _terminal_ask(
    question: str,
    choices: list[str] | None,
    *,
    multi_select: bool = False,
    allow_other: bool = False,
) -> str | list[str]:
    if not sys.stdin.isatty():
        raise TimeoutError("no terminal to ask on")
    asked = {
        "prompt": question,
        "choices": choices,
        "multiSelect": multi_select,
        "allowOther": allow_other,
    }
    typed = await asyncio.to_thread(input, f"\n{question_line(asked)} ")
    return typed_answer(typed.removeprefix("/answer"), choices or [], multi_select)


async def run_ask(question: str, vp: str | None, model: str | None) -> int:
    from engine.engine import Engine
    from engine.messages import Conversation, Message
    from engine.settings import EngineSettings
    from engine.tools.registry import ToolContext
    from personas.loader import load_personas
    from personas.prompts import build_system_prompt

    library = load_personas(personas_dir())
    persona = library.resolve(vp) if vp else library.default()
    if persona is None:
        print(f"yeaft: unknown VP {vp!r}; try `yeaft personas list`", file=sys.stderr)
        return 2
    try:
        config = EngineSettings().to_config()
        if model:
            config.registry().qualify(model, strict=True)
        engine = Engine(model=model, settings=config)
    except (OSError, ValueError) as exc:  # an unknown model, a bad models or keys file
        print(f"yeaft: invalid engine settings: {exc}", file=sys.stderr)
        return 2
    ctx = ToolContext(conversation_id="cli", vp_id=persona.id, ask_user=_terminal_ask)
    tools = [t.name for t in engine.tools.offered(ctx)]
    system = build_system_prompt(persona=persona, mode="chat", tools=tools)
    printer = TerminalPrinter()
    try:
        result = await engine.run_turn(
            Conversation(id="cli"),
            Message.user(question),
            system=system,
            emit=printer,
            ctx=ctx,
            context=CallContext(speaker=Speaker.of(persona)),
        )
    finally:
        await engine.providers.aclose()
    printer.write("\n")
    if result.error:
        print(printer.style.red(f"error: {result.error}"), file=sys.stderr)
    print(printer.summary(), file=sys.stderr)
    return 0 if result.reason not in (StopReason.ERROR, StopReason.ABORTED) else 1


def cmd_ask(args: argparse.Namespace) -> int:
    try:
        return asyncio.run(run_ask(" ".join(args.question), args.vp, args.model))
    except KeyboardInterrupt:
        return 130


def cmd_schema(args: argparse.Namespace) -> int:
    from protocol import json_schema

    print(json.dumps(json_schema(), indent=2, ensure_ascii=False))
    return 0


def cmd_personas(args: argparse.Namespace) -> int:
    from personas.loader import load_personas, new_persona_file, persona_detail
    from personas.model import PersonaError

    library = load_personas(personas_dir())
    for error in library.errors:
        print(f"warning: {error}", file=sys.stderr)
    if args.action == "list":
        for p in library.all():
            origin = "" if p.builtin else "  (yours)"
            print(f"{p.id:<12} {p.name:<24} {p.role}{origin}")
        return 0
    if args.action == "show":
        persona = library.resolve(args.id or "")
        if persona is None:
            print(f"yeaft: unknown persona {args.id!r}", file=sys.stderr)
            return 2
        detail = persona_detail(persona)
        body = detail.pop("body", persona.body)
        print(json.dumps(detail, indent=2, ensure_ascii=False))
        print()
        print(body)
        return 0
    try:
        path = new_persona_file(personas_dir(), args.id or "", args.name, args.role)
    except (PersonaError, FileExistsError) as exc:
        print(f"yeaft: {exc}", file=sys.stderr)
        return 2
    print(f"created {path}; edit it, then `yeaft personas show {args.id}`")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="yeaft",
        description="Multi-agent group chat: AI personas (VPs) answering in parallel.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    ask = sub.add_parser("ask", help="stream one answer from one VP to the terminal")
    ask.add_argument("question", nargs="+", help="the question")
    ask.add_argument("--vp", help="persona id or alias (default: omni)")
    ask.add_argument("--model", help="provider:model, e.g. openai:gpt-4o-mini, offline:default")
    ask.set_defaults(func=cmd_ask)

    schema = sub.add_parser("schema", help="print the JSON Schema of the wire protocol")
    schema.set_defaults(func=cmd_schema)

    personas = sub.add_parser("personas", help="list, show or create personas")
    personas.add_argument("action", choices=["list", "show", "new"])
    personas.add_argument("id", nargs="?", help="persona id (show, new)")
    personas.add_argument("--name", help="display name (new)")
    personas.add_argument("--role", help="one-line role (new)")
    personas.set_defaults(func=cmd_personas)

    # The server-side commands live in their own module to keep this one small.
    from gateway.cli_server import register

    register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 0
    if args.command == "personas" and args.action in ("show", "new") and not args.id:
        parser.error(f"personas {args.action} needs an ID")
    if args.command == "user" and args.action == "add" and not args.name:
        parser.error("user add needs a NAME")
    try:
        result: int = args.func(args)
    except BrokenPipeError:
        # Output piped into `head` and friends: stop quietly, like other tools.
        sys.stderr.close()
        return 0
    return result


if __name__ == "__main__":
    sys.exit(main())
