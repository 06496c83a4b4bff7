"""``yeaft user`` and ``yeaft token``: accounts, straight against the store.

Both say on standard error which store they use (the data directory, or
the Redis URL without its password), so a token made against the wrong
``YEAFT_DATA_DIR`` is noticed at once. Neither creates a store that is not
there yet: a typo in ``YEAFT_DATA_DIR`` would otherwise give an empty store
that no server reads. ``yeaft serve`` makes the store on its first start;
``yeaft user add NAME --create`` makes it beforehand. What ``yeaft user``
changes is recorded in the audit log (``gateway.audit``), by nobody, from
no address, ``detail.via`` ``cli``.
"""

from __future__ import annotations

import argparse
import asyncio
import getpass
import sys
from collections.abc import Awaitable, Callable
from typing import Any

from store import Store, StoreError, redact_url


class NoStore(Exception):
    """The store the settings name does not exist; the message says how to make it."""


def store_location(settings: Any) -> str:
    """Which store ``settings`` name, for a person: a directory or a redacted Redis URL."""
    if settings.redis_url:
        return f"Redis {redact_url(settings.redis_url)} (key prefix {settings.redis_prefix!r})"
    return f"data directory {settings.data_dir}"


async def store_exists(settings: Any, store: Store) -> bool:
    """Whether there is a store to use (never creates one; ``store`` is not used when embedded)."""
    if not settings.redis_url:
        from store.embedded import DB_FILENAME

        return bool((settings.data_dir / DB_FILENAME).is_file())
    # A Redis store has no file: it exists once it holds a user or a group.
    return bool(await store.list_users() or await store.list_groups())


def missing_store_message(settings: Any, command: str) -> str:
    where = store_location(settings)
    hint = (
        "set YEAFT_REDIS_URL / YEAFT_REDIS_PREFIX to the server's"
        if settings.redis_url
        else "set YEAFT_DATA_DIR to the server's data directory"
    )
    return (
        f"no Yeaft store in the {where}. Start `yeaft serve` once to create it, "
        f"{hint}, or run `yeaft {command} --create` to create an empty one there"
    )


async def with_store(
    settings: Any,
    command: str,
    create: bool,
    run: Callable[[Store], Awaitable[int]],
) -> int:
    """Open the store, refusing a missing one unless ``create``, and run ``run`` on it."""
    print(f"yeaft: using the {store_location(settings)}", file=sys.stderr)
    if create and not settings.redis_url:
        settings.data_dir.mkdir(parents=True, exist_ok=True)
    elif not settings.redis_url and not settings.data_dir.is_dir():
        raise NoStore(missing_store_message(settings, command))
    store = settings.open()
    try:
        if not create and not await store_exists(settings, store):
            raise NoStore(missing_store_message(settings, command))
        return await run(store)
    finally:
        await store.close()


def _settings() -> Any:
    from gateway.settings import GatewaySettings

    return GatewaySettings()


def read_password(args: argparse.Namespace) -> str:
    """The new password: typed twice on a terminal, else one line of standard input."""
    if args.password_stdin or not sys.stdin.isatty():
        password = sys.stdin.readline().rstrip("\r\n")
        if not password:
            raise ValueError("no password on standard input")
        return password
    first = getpass.getpass("new password: ")
    if first != getpass.getpass("again: "):
        raise ValueError("the passwords differ")
    return first


def cmd_user(args: argparse.Namespace) -> int:
    from gateway import disabling
    from gateway.accounts import set_password, unlock_user
    from gateway.audit import record
    from gateway.users import UserError, add_user
    from store.audit import AuditAction

    if args.action != "list" and not args.name:
        print(f"yeaft: user {args.action} needs a NAME", file=sys.stderr)
        return 2
    settings = _settings()
    command = f"user {args.action}" + (f" {args.name}" if args.name else "")

    async def run(store: Store) -> int:
        if args.action == "add":
            await add_user(store, args.name, read_password(args))
            await record(store, AuditAction.USER_ADDED, actor=None, target=args.name, cli=True)
            print(f"created user {args.name}")
        elif args.action == "passwd":
            if await store.get_user(args.name) is None:
                raise UserError(f"no user {args.name!r}")
            await set_password(store, args.name, read_password(args))
            action = AuditAction.PASSWORD_CHANGED
            await record(store, action, actor=None, target=args.name, cli=True)
            print(f"changed the password of {args.name}; older sessions must log in again")
        elif args.action == "disable":
            done = await disabling.disable(store, args.name, None, cli=True)
            was = "" if done.changed else " (it was disabled already)"
            print(
                f"disabled {args.name}{was}: {done.ended_sessions} session(s) ended; "
                "running gateways close their connections"
            )
        elif args.action == "enable":
            changed = await disabling.enable(store, args.name, None, cli=True)
            was = "" if changed else " (it was not disabled)"
            print(f"enabled {args.name}{was}: they may log in again")
        elif args.action == "list":
            for user in await store.list_users():
                print(user["username"])
        else:
            was_locked = await unlock_user(store, args.name)
            detail = {"wasLocked": was_locked}
            action = AuditAction.LOCKOUT_LIFTED
            await record(store, action, actor=None, target=args.name, detail=detail, cli=True)
            was = "" if was_locked else " (it was not locked)"
            print(f"unlocked {args.name}{was}: failed logins so far no longer count")
        return 0

    try:
        return asyncio.run(with_store(settings, command, args.create, run))
    except (NoStore, UserError, ValueError) as exc:
        print(f"yeaft: {exc}", file=sys.stderr)
        return 2
    except StoreError as exc:
        print(f"yeaft: the store failed: {exc}", file=sys.stderr)
        return 1


def cmd_token(args: argparse.Namespace) -> int:
    from gateway.auth import issue_token

    settings = _settings()

    async def exists(store: Store) -> int:
        return 0 if await store.get_user(args.name) is not None else 1

    try:
        missing = asyncio.run(with_store(settings, f"token {args.name}", False, exists))
    except NoStore as exc:
        print(f"yeaft: {exc}", file=sys.stderr)
        return 2
    except StoreError as exc:
        print(f"yeaft: the store failed: {exc}", file=sys.stderr)
        return 1
    if missing:
        print(
            f"yeaft: no user {args.name!r}; create it with `yeaft user add {args.name}`",
            file=sys.stderr,
        )
        return 2
    print(issue_token(settings, args.name))
    return 0


def register(sub: Any) -> None:
    user = sub.add_parser(
        "user",
        help=(
            "manage users: add, list, passwd (new password), unlock (lift a login lockout), "
            "disable (sign out and refuse), enable"
        ),
    )
    user.add_argument("action", choices=["add", "list", "passwd", "unlock", "disable", "enable"])
    user.add_argument("name", nargs="?", help="user name (add, passwd, unlock, disable, enable)")
    user.add_argument(
        "--password-stdin", action="store_true", help="read the password from standard input"
    )
    user.add_argument(
        "--create",
        action="store_true",
        help="create the store if there is none yet (before the first `yeaft serve`)",
    )
    user.set_defaults(func=cmd_user)

    token = sub.add_parser("token", help="print a JWT for a user (for scripts and `chat`)")
    token.add_argument("name")
    token.set_defaults(func=cmd_token)
