"""``yeaft serve`` and ``yeaft chat``: the commands that run or reach a server.

``gateway.cli`` adds them to its parser through :func:`register`.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import socket
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
    from gateway.users import UserError, add_user

    store = settings.open()
    try:
        if await store.list_users():
            return None
        password = secrets.token_urlsafe(12)
        try:
            await add_user(store, FIRST_USER, password)
        except UserError:
            return None  # another gateway starting at the same time made it first
        return FIRST_USER, password
    finally:
        await store.close()


def port_in_use(host: str, port: int) -> str | None:
    """Why ``host:port`` cannot be listened on, or None when it can (or is chosen by the OS).

    A bind test with the options uvicorn uses (``SO_REUSEADDR``), so a port a
    stopped server left in TIME_WAIT passes and one another process listens on
    does not. It runs before ``yeaft serve`` makes anything: a start that
    cannot listen must not create the store and its first password.
    """
    if not port:
        return None
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        return f"cannot listen on {host!r}: {exc.strerror}"
    for family, kind, proto, _, address in infos:
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind(address)
            except OSError as exc:
                return f"port {port} on {host} is not free ({exc.strerror})"
    return None


def cmd_serve(args: argparse.Namespace) -> int:
    from engine.settings import EngineSettings
    from gateway.server import run_server
    from store import redact_url
    from telemetry.config import TracingConfig, TracingConfigError

    settings = _settings(args)
    busy = port_in_use(settings.host, settings.port)
    if busy:
        print(
            f"yeaft: {busy}; is another server running? Choose another port with "
            "--port N or YEAFT_PORT (the interface: --host or YEAFT_HOST)",
            file=sys.stderr,
        )
        return 2
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    # Read once here, in the driver; the actors get it from the runtime config.
    try:
        engine = EngineSettings().to_config()
    except (OSError, ValueError) as exc:  # a bad YEAFT_PRICES_FILE, a malformed value
        print(f"yeaft: invalid engine settings: {exc}", file=sys.stderr)
        return 2
    try:
        TracingConfig.from_env(os.environ)
    except TracingConfigError as exc:
        print(f"yeaft: invalid tracing settings: {exc}", file=sys.stderr)
        return 2
    created = asyncio.run(_ensure_first_user(settings))
    model = engine.default_model()
    # The address is printed by the server once it answers there (READY_LINE).
    print("Yeaft is starting; its address follows once it answers there")
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


def chat_url(explicit: str | None) -> str:
    """Where ``yeaft chat`` connects: --url, else YEAFT_URL, else YEAFT_HOST/YEAFT_PORT."""
    if explicit:
        return explicit
    if os.environ.get("YEAFT_URL"):
        return os.environ["YEAFT_URL"]
    host = os.environ.get("YEAFT_HOST") or "127.0.0.1"
    if host in ("0.0.0.0", "::"):  # where a server listens, not an address to call
        host = "127.0.0.1"
    if ":" in host:
        host = f"[{host}]"
    port = os.environ.get("YEAFT_PORT") or "8765"
    if not port.isdigit():
        raise ValueError(f"YEAFT_PORT must be a port number, not {port!r}")
    return f"http://{host}:{port}"


def cmd_chat(args: argparse.Namespace) -> int:
    from gateway.chat_client import ChatClient, ChatError

    token = args.token or os.environ.get("YEAFT_TOKEN")
    if not token:
        print(
            "yeaft: chat needs a token: --token or YEAFT_TOKEN (see `yeaft token NAME`)",
            file=sys.stderr,
        )
        return 2
    try:
        client = ChatClient(chat_url(args.url), token, args.group, prompt=sys.stdin.isatty())
        if not sys.stdin.isatty():
            return asyncio.run(client.run())
        from gateway.chat_input import TerminalLines

        # Keys read by the client, not the kernel's line editor: a paste of
        # any length arrives whole (the kernel's line keeps 4,095 characters).
        with TerminalLines(sys.stdin.fileno(), sys.stdout.fileno()) as terminal:
            return asyncio.run(client.run(read_line=terminal.readline))
    except (ChatError, ValueError) as exc:
        print(f"yeaft: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except Exception as exc:
        # Whatever else went wrong, a person gets one line, not a traceback.
        print(f"yeaft: chat stopped: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1


def register(sub: Any) -> None:
    serve = sub.add_parser("serve", help="start the gateway and web UI on a local Ray instance")
    serve.add_argument("--host", help="interface to listen on (default 127.0.0.1)")
    serve.add_argument("--port", type=int, help="port (default 8765)")
    serve.add_argument("--ray-address", help="join a Ray cluster (GCS host:port or 'auto')")
    serve.set_defaults(func=cmd_serve)

    # `yeaft user` and `yeaft token` live with the account code.
    from gateway.cli_accounts import register as register_accounts

    register_accounts(sub)

    chat = sub.add_parser("chat", help="chat in a group from the terminal")
    chat.add_argument("group", help="group id or name")
    chat.add_argument(
        "--url", help="the server (default: $YEAFT_URL, else http://$YEAFT_HOST:$YEAFT_PORT)"
    )
    chat.add_argument("--token", help="a JWT (default: $YEAFT_TOKEN)")
    chat.set_defaults(func=cmd_chat)
