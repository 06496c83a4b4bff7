"""``yeaft serve``, ``yeaft user`` and ``yeaft token``: the server-side commands.

``gateway.cli`` adds them to its parser through :func:`register`.
"""

from __future__ import annotations

import argparse
import asyncio
import getpass
import secrets
import sys
from typing import Any

FIRST_USER = "admin"


def _settings(args: argparse.Namespace | None = None) -> Any:
    from gateway.settings import GatewaySettings

    overrides: dict[str, Any] = {}
    if args is not None:
        for name in ("host", "port"):
            if getattr(args, name, None) is not None:
                overrides[name] = getattr(args, name)
    return GatewaySettings(**overrides)


async def _ensure_first_user(settings: Any) -> tuple[str, str] | None:
    """On a fresh install, create an ``admin`` account so the UI can be used at once."""
    from gateway.users import add_user

    store = settings.open()
    try:
        if await store.list_users():
            return None
        password = secrets.token_urlsafe(12)
        await add_user(store, FIRST_USER, password)
        return FIRST_USER, password
    finally:
        await store.close()


def cmd_serve(args: argparse.Namespace) -> int:
    from engine.settings import EngineSettings
    from gateway.server import run_server
    from store import redact_url

    settings = _settings(args)
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    # Read once here, in the driver; the actors get it from the runtime config.
    try:
        engine = EngineSettings().to_config()
    except (OSError, ValueError) as exc:  # a bad YEAFT_PRICES_FILE, a malformed value
        print(f"yeaft: invalid engine settings: {exc}", file=sys.stderr)
        return 2
    created = asyncio.run(_ensure_first_user(settings))
    host = "127.0.0.1" if settings.host in ("0.0.0.0", "::") else settings.host
    model = engine.default_model()
    print(f"Yeaft is starting on http://{host}:{settings.port}")
    print(
        f"  data: {settings.data_dir}   store: {redact_url(settings.redis_url) or 'embedded'}"
        f"   model: {model}"
    )
    if created:
        print(f"  first start: log in as '{created[0]}' with password '{created[1]}'")
        print("  (shown once; add people with `yeaft user add NAME`)")
    else:
        print("  log in with a user created by `yeaft user add NAME`")
    sys.stdout.flush()
    try:
        run_server(settings, ray_address=args.ray_address, engine=engine)
    except KeyboardInterrupt:
        pass
    except ValueError as exc:
        print(f"yeaft: {exc}", file=sys.stderr)
        return 2
    return 0


def _read_password(args: argparse.Namespace) -> str:
    if args.password_stdin or not sys.stdin.isatty():
        return sys.stdin.readline().rstrip("\n")
    first = getpass.getpass("password: ")
    if first != getpass.getpass("again: "):
        raise ValueError("the passwords differ")
    return first


def cmd_user(args: argparse.Namespace) -> int:
    from gateway.users import UserError, add_user

    settings = _settings()

    async def run() -> int:
        store = settings.open()
        try:
            if args.action == "list":
                for user in await store.list_users():
                    print(user["username"])
                return 0
            await add_user(store, args.name, _read_password(args))
            print(f"created user {args.name}")
            return 0
        finally:
            await store.close()

    try:
        return asyncio.run(run())
    except (UserError, ValueError) as exc:
        print(f"yeaft: {exc}", file=sys.stderr)
        return 2


def cmd_token(args: argparse.Namespace) -> int:
    from gateway.auth import issue_token

    settings = _settings()

    async def exists() -> bool:
        store = settings.open()
        try:
            return await store.get_user(args.name) is not None
        finally:
            await store.close()

    if not asyncio.run(exists()):
        print(
            f"yeaft: no user {args.name!r}; create it with `yeaft user add {args.name}`",
            file=sys.stderr,
        )
        return 2
    print(issue_token(settings, args.name))
    return 0


def cmd_chat(args: argparse.Namespace) -> int:
    import os

    from gateway.chat_client import ChatClient, ChatError

    token = args.token or os.environ.get("YEAFT_TOKEN")
    if not token:
        print(
            "yeaft: chat needs a token: --token or YEAFT_TOKEN (see `yeaft token NAME`)",
            file=sys.stderr,
        )
        return 2
    try:
        return asyncio.run(ChatClient(args.url, token, args.group).run())
    except ChatError as exc:
        print(f"yeaft: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


def register(sub: Any) -> None:
    serve = sub.add_parser("serve", help="start the gateway and web UI on a local Ray instance")
    serve.add_argument("--host", help="interface to listen on (default 127.0.0.1)")
    serve.add_argument("--port", type=int, help="port (default 8765)")
    serve.add_argument("--ray-address", help="join a Ray cluster (GCS host:port or 'auto')")
    serve.set_defaults(func=cmd_serve)

    user = sub.add_parser("user", help="manage users")
    user.add_argument("action", choices=["add", "list"])
    user.add_argument("name", nargs="?", help="user name (add)")
    user.add_argument(
        "--password-stdin", action="store_true", help="read the password from standard input"
    )
    user.set_defaults(func=cmd_user)

    token = sub.add_parser("token", help="print a JWT for a user (for scripts and `chat`)")
    token.add_argument("name")
    token.set_defaults(func=cmd_token)

    chat = sub.add_parser("chat", help="chat in a group from the terminal")
    chat.add_argument("group", help="group id or name")
    chat.add_argument("--url", default="http://127.0.0.1:8765")
    chat.add_argument("--token", help="a JWT (default: $YEAFT_TOKEN)")
    chat.set_defaults(func=cmd_chat)
