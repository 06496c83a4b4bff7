"""User accounts: names, password hashes, and the functions the CLI calls.

Passwords are hashed with scrypt (``hashlib.scrypt``) and a random 16-byte
salt. The hash is stored as ``scrypt$<n>$<r>$<p>$<salt>$<key>`` (base64
parts), so the cost parameters travel with each hash: raising
``DEFAULT_PARAMS`` later only affects new hashes, and an older hash is
upgraded the next time its owner logs in. Comparison is constant-time, and a
login for an unknown name costs one hash too, so timing does not reveal
which names exist.

User records live in the store (``Store.get_user``/``put_user``) as
``{"username", "passwordHash", "createdAt"}``.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import hashlib
import hmac
import re
import secrets
import time
from dataclasses import dataclass

from gateway.auth import AuthError, issue_token, verify_token
from store.base import UserStore

__all__ = [
    "AuthError",
    "UserError",
    "add_user",
    "authenticate",
    "check_password",
    "check_username",
    "hash_password",
    "issue_token",
    "password_matches",
    "verify_token",
]

USERNAME_RE = re.compile(r"[A-Za-z0-9_.-]{1,40}")
MIN_PASSWORD_LENGTH = 8
MAX_PASSWORD_LENGTH = 1024

# Refused outright: the passwords every credential-stuffing list starts with.
_COMMON_PASSWORDS = frozenset(
    {
        "password",
        "password1",
        "password123",
        "passw0rd",
        "12345678",
        "123456789",
        "1234567890",
        "87654321",
        "11111111",
        "00000000",
        "qwertyui",
        "qwertyuiop",
        "asdfghjk",
        "iloveyou",
        "letmein1",
        "letmein!",
        "welcome1",
        "changeme",
        "changeme1",
        "sunshine",
        "football",
        "baseball",
        "princess",
        "trustno1",
        "admin123",
        "administrator",
        "abcdefgh",
        "abc12345",
        "yeaftyeaft",
    }
)


@dataclass(frozen=True, slots=True)
class ScryptParams:
    """scrypt's cost parameters; memory use is 128 * n * r bytes."""

    n: int
    r: int
    p: int

    def maxmem(self) -> int:
        # hashlib refuses to go over maxmem (32 MiB by default), so allow the
        # cost plus headroom explicitly.
        return 128 * self.n * self.r * (self.p + 1) + 1024 * 1024


DEFAULT_PARAMS = ScryptParams(n=2**15, r=8, p=1)
"""About 32 MiB and ~0.1 s per hash on a laptop core."""

# Stored hashes are data: refuse parameters that would make a login a DoS.
_MAX_N = 2**20

_KEY_BYTES = 32


class UserError(ValueError):
    """A user could not be added; the message says why, for a person."""


def check_username(username: str) -> None:
    """Raise :class:`UserError` unless ``username`` is 1-40 of ``[A-Za-z0-9_.-]``."""
    if not isinstance(username, str) or not USERNAME_RE.fullmatch(username):
        raise UserError(
            f"invalid username {username!r}: use 1 to 40 letters, digits, '_', '.' or '-'"
        )


def check_password(username: str, password: str) -> None:
    """Raise :class:`UserError` when ``password`` is too short or too easy to guess."""
    if len(password) < MIN_PASSWORD_LENGTH:
        raise UserError(f"the password is too short: use at least {MIN_PASSWORD_LENGTH} characters")
    if len(password) > MAX_PASSWORD_LENGTH:
        raise UserError(f"the password is too long: at most {MAX_PASSWORD_LENGTH} characters")
    lowered = password.lower()
    if lowered in _COMMON_PASSWORDS:
        raise UserError("the password is one of the most common passwords: choose another")
    if lowered == username.lower() or lowered in (username.lower() * 2, username.lower()[::-1]):
        raise UserError("the password must not be the username")
    if len(set(password)) < 4:
        raise UserError("the password uses too few different characters")


def hash_password(password: str, params: ScryptParams | None = None) -> str:
    """A salted scrypt hash of ``password`` that records its own parameters."""
    params = params or DEFAULT_PARAMS
    salt = secrets.token_bytes(16)
    key = _derive(password, salt, params)
    return "$".join(["scrypt", str(params.n), str(params.r), str(params.p), _b64(salt), _b64(key)])


def password_matches(password: str, stored: str) -> bool:
    """Whether ``password`` hashes to ``stored``; False for a malformed hash."""
    parsed = _parse(stored)
    if parsed is None:
        return False
    params, salt, expected = parsed
    return hmac.compare_digest(_derive(password, salt, params, len(expected)), expected)


def needs_rehash(stored: str) -> bool:
    """Whether a hash was made with parameters other than today's defaults."""
    parsed = _parse(stored)
    return parsed is None or parsed[0] != DEFAULT_PARAMS


async def taken_names(store: UserStore) -> dict[str, str]:
    """Every account's name, by its lower-case form: names are unique whatever their case."""
    return {
        str(u.get("username", "")).lower(): str(u.get("username", ""))
        for u in await store.list_users()
    }


async def add_user(store: UserStore, username: str, password: str) -> None:
    """Create a user; raises :class:`UserError` for a taken name or a weak password.

    Names are compared case-insensitively here (``Ann`` is refused when
    ``ann`` exists) so two accounts can never look alike in a member list.
    """
    check_username(username)
    check_password(username, password)
    taken = await taken_names(store)
    if username.lower() in taken:
        raise UserError(f"a user named {taken[username.lower()]!r} already exists")
    # Hashing takes ~0.1 s of CPU: keep it off the event loop.
    password_hash = await asyncio.to_thread(hash_password, password)
    record = {"username": username, "passwordHash": password_hash, "createdAt": time.time()}
    # Created only if absent: of two processes adding the same name at once
    # (two gateways' first start), one wins and the other is told.
    if not await store.create_user(record):
        raise UserError(f"a user named {username!r} already exists")


async def authenticate(store: UserStore, username: str, password: str) -> bool:
    """Whether ``password`` is ``username``'s; never says which of the two was wrong."""
    user = await store.get_user(username) if USERNAME_RE.fullmatch(username or "") else None
    stored = user.get("passwordHash") if user else None
    if not isinstance(stored, str):
        # Spend the same time as a real check so the answer's timing does not
        # tell an attacker whether the name exists.
        await asyncio.to_thread(password_matches, password, _dummy_hash())
        return False
    if not await asyncio.to_thread(password_matches, password, stored):
        return False
    if user is not None and needs_rehash(stored):
        upgraded = await asyncio.to_thread(hash_password, password)
        await store.put_user({**user, "passwordHash": upgraded})
    return True


def _derive(password: str, salt: bytes, params: ScryptParams, size: int = _KEY_BYTES) -> bytes:
    return hashlib.scrypt(
        password.encode("utf-8", "surrogatepass"),
        salt=salt,
        n=params.n,
        r=params.r,
        p=params.p,
        maxmem=params.maxmem(),
        dklen=size,
    )


def _parse(stored: str) -> tuple[ScryptParams, bytes, bytes] | None:
    parts = stored.split("$")
    if len(parts) != 6 or parts[0] != "scrypt":
        return None
    try:
        params = ScryptParams(int(parts[1]), int(parts[2]), int(parts[3]))
        salt = base64.b64decode(parts[4], validate=True)
        key = base64.b64decode(parts[5], validate=True)
    except ValueError:
        return None
    # n must be a power of two above 1; bounds keep a tampered hash from
    # turning one login into minutes of CPU or gigabytes of memory.
    if not (1 < params.n <= _MAX_N and params.n & (params.n - 1) == 0):
        return None
    if not (1 <= params.r <= 32 and 1 <= params.p <= 16 and 16 <= len(key) <= 64):
        return None
    return params, salt, key


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


@functools.cache
def _dummy_hash() -> str:
    # Made on first use rather than at import, so importing this module (the
    # CLI does) costs no hashing.
    return hash_password(secrets.token_urlsafe(16))
