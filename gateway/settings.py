"""Typed gateway configuration: every field is a ``YEAFT_*`` environment variable.

``GatewaySettings`` extends the store settings (``YEAFT_DATA_DIR``,
``YEAFT_REDIS_URL``, ``YEAFT_REDIS_PREFIX``, ``YEAFT_EVENT_RETENTION``), so a
gateway opens the same store every other process of the deployment opens.

The JWT secret is the one setting with a side effect: when
``YEAFT_JWT_SECRET`` is unset, a random secret is generated once and kept in
``<data_dir>/jwt_secret`` (mode 0600), so tokens survive a restart and every
gateway sharing the data directory accepts the same tokens. Gateways on
several machines must be given the same ``YEAFT_JWT_SECRET``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import secrets
import stat
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

from pydantic import Field, PrivateAttr, SecretStr, field_validator, model_validator
from pydantic_settings import SettingsConfigDict

from actors.config import Placement
from engine.a2a import A2aConfig, load_a2a_config
from engine.mcp import McpConfig, load_mcp_config
from gateway.attachments import AttachmentLimits
from protocol.common import MAX_ATTACHMENTS
from store import StoreSettings

log = logging.getLogger(__name__)

JWT_SECRET_FILENAME = "jwt_secret"
MIN_SECRET_LENGTH = 32

# Values people paste from tutorials; any of them, in any case, is refused.
_WEAK_SECRETS = frozenset(
    {
        "secret",
        "changeme",
        "change-me",
        "change_me",
        "password",
        "default",
        "jwt-secret",
        "jwt_secret",
        "yeaft",
        "yeaft-secret",
        "your-secret-key",
        "supersecret",
        "test",
    }
)


class WeakSecretError(ValueError):
    """A configured or stored JWT secret is too easy to guess."""


def secret_problem(secret: str) -> str | None:
    """Why ``secret`` is too weak to sign tokens with, or None when it is fine."""
    if secret.strip().lower() in _WEAK_SECRETS:
        return "it is a well-known placeholder value"
    if len(secret) < MIN_SECRET_LENGTH:
        return f"it is shorter than {MIN_SECRET_LENGTH} characters"
    if len(set(secret)) < 8:
        return "it repeats too few distinct characters"
    return None


_DURATION = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*", re.IGNORECASE)
_UNIT_SECONDS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(text: str) -> timedelta | str:
    """``"90"``, ``"90s"``, ``"15m"``, ``"12h"`` or ``"3d"`` as a timedelta.

    Anything else is returned unchanged for pydantic to parse (ISO 8601).
    """
    match = _DURATION.fullmatch(text)
    if match is None:
        return text
    return timedelta(seconds=float(match.group(1)) * _UNIT_SECONDS[match.group(2).lower()])


class GatewaySettings(StoreSettings):
    """Everything the gateway reads from the environment, with its default."""

    model_config = SettingsConfigDict(env_prefix="YEAFT_", extra="ignore")

    # YEAFT_HOST / YEAFT_PORT: where the HTTP and WebSocket server listens.
    host: str = "127.0.0.1"
    port: int = Field(default=8765, ge=0, le=65535)
    # YEAFT_JWT_SECRET: HS256 key for session tokens; unset = generated and
    # kept in <data_dir>/jwt_secret. At least 32 characters.
    jwt_secret: SecretStr | None = None
    # YEAFT_JWT_TTL: lifetime of a session token: seconds, "3d", "12h", "30m"
    # or ISO 8601 ("P3D").
    jwt_ttl: timedelta = timedelta(days=3)
    # YEAFT_JWT_RENEW_BEFORE: an HTTP request made with a token that expires
    # sooner than this gets a fresh one (X-New-Token header and cookie).
    jwt_renew_before: timedelta = timedelta(days=1)
    # YEAFT_COOKIE_SECURE: mark the session cookie Secure (set behind HTTPS).
    cookie_secure: bool = False
    # YEAFT_ALLOWED_ORIGINS: JSON list of extra browser origins allowed to use
    # the session cookie (the server's own origin is always allowed).
    allowed_origins: list[str] = Field(default_factory=list)
    # YEAFT_FRAME_MAX_BYTES: a client frame larger than this gets a
    # frame_too_large error (the connection stays open).
    frame_max_bytes: int = Field(default=256 * 1024, ge=1024)
    # YEAFT_WS_MAX_MESSAGE_BYTES: hard cap enforced by the WebSocket layer; a
    # message above it closes the connection with 1009.
    ws_max_message_bytes: int = Field(default=1024 * 1024, ge=1024)
    # YEAFT_WS_COMPRESSION: negotiate permessage-deflate with clients that
    # offer it (less bandwidth, more CPU per client and message).
    ws_compression: bool = True
    # YEAFT_RATE_LIMIT_PER_S / YEAFT_RATE_LIMIT_BURST: per-connection token bucket.
    rate_limit_per_s: float = Field(default=20.0, gt=0)
    rate_limit_burst: int = Field(default=40, ge=1)
    # YEAFT_USER_RATE_LIMIT_PER_S / YEAFT_USER_RATE_LIMIT_BURST: a token bucket
    # per user, shared by all of that user's connections to this gateway
    # process (two connections at the full per-connection rate by default).
    user_rate_limit_per_s: float = Field(default=40.0, gt=0)
    user_rate_limit_burst: int = Field(default=80, ge=1)
    # YEAFT_CHAT_IN_FLIGHT: chat frames of one connection handled at once, off
    # its receive loop; a chat frame beyond them gets a busy error.
    chat_in_flight: int = Field(default=8, ge=1)
    # YEAFT_MAX_GROUP_PENDING_TURNS / YEAFT_MAX_VP_PENDING_TURNS: turns waiting
    # (dispatched, not finished) per group and per VP actor; a message that
    # would pass either is refused with busy before it is stored.
    max_group_pending_turns: int = Field(default=64, ge=1)
    max_vp_pending_turns: int = Field(default=256, ge=1)
    # YEAFT_LANE_GAP_S: how long a VP holds a turn that reached it before a
    # turn sent earlier to the same (group, VP) lane; then it runs anyway.
    lane_gap_s: float = Field(default=2.0, ge=0)
    # YEAFT_AGENT_HEARTBEAT_S: a VP answering writes agent_status busy (with
    # its turn's phase) at least this often; 0 turns the heartbeat off.
    agent_heartbeat_s: float = Field(default=10.0, ge=0)
    # YEAFT_ABUSE_MAX_ERRORS within YEAFT_ABUSE_WINDOW_S error replies close
    # the connection with 4429.
    abuse_max_errors: int = Field(default=200, ge=1)
    abuse_window_s: float = Field(default=60.0, gt=0)
    # YEAFT_CLIENT_QUEUE_SIZE: frames buffered per client; overflow closes 4409.
    client_queue_size: int = Field(default=2000, ge=1)
    # YEAFT_MAX_SUBSCRIPTIONS: groups one connection may watch at once.
    max_subscriptions: int = Field(default=64, ge=1)
    # YEAFT_PING_INTERVAL / YEAFT_PING_TIMEOUT: WebSocket protocol pings sent
    # by the server; a peer that does not answer in time is closed with 1011.
    ping_interval: float = Field(default=25.0, gt=0)
    ping_timeout: float = Field(default=20.0, gt=0)
    # YEAFT_IDLE_TIMEOUT: a client that sends no frame for this long is closed
    # with 4408; clients send {"type":"ping"} every 25 s to stay connected.
    idle_timeout: float = Field(default=60.0, gt=0)
    # YEAFT_CLOSE_TIMEOUT: how long closing a connection may wait for a peer
    # that does not read before it is abandoned.
    close_timeout: float = Field(default=5.0, gt=0)
    # YEAFT_SHUTDOWN_TIMEOUT: how long a shutdown waits for connections to
    # finish before their handlers are cancelled.
    shutdown_timeout: float = Field(default=10.0, gt=0)
    # YEAFT_DRAIN_TIMEOUT: on a graceful stop of a server that runs its own
    # Ray instance, how long running turns may go on before they are ended
    # with an error result (queued ones are ended at once).
    drain_timeout: float = Field(default=10.0, ge=0)
    # YEAFT_TAIL_WAIT_S / YEAFT_TAIL_BATCH: one blocking event-log read per
    # watched group waits this long and returns at most this many envelopes
    # (never more than YEAFT_CLIENT_QUEUE_SIZE: a batch must fit in a queue).
    tail_wait_s: float = Field(default=5.0, gt=0)
    tail_batch: int = Field(default=500, ge=1)
    # YEAFT_SSE_KEEP_ALIVE_S: an AG-UI run's event stream sends an SSE
    # comment after this many seconds without an event, so proxies keep a
    # quiet run's connection open (the A2A streams ping every 15 s).
    sse_keep_alive_s: float = Field(default=15.0, gt=0, le=300)
    # YEAFT_HISTORY_PAGE_MAX: the largest ``limit`` of the history endpoint.
    history_page_max: int = Field(default=500, ge=1)
    # YEAFT_LOGIN_MAX_FAILURES failed logins for one username (from any
    # addresses, on any gateway) within YEAFT_LOGIN_WINDOW_S lock the addresses
    # that failed out of that account for YEAFT_LOGIN_LOCKOUT_S (429 with
    # retryAfter); an address that has not failed for it is not refused.
    # YEAFT_LOGIN_ADDRESS_MAX_FAILURES failed logins from one address over any
    # usernames in the window lock it out of every account. An administrator
    # lifts a lockout (DELETE /api/admin/lockouts/NAME, `yeaft user unlock NAME`).
    login_max_failures: int = Field(default=10, ge=1)
    login_window_s: float = Field(default=300.0, gt=0)
    login_lockout_s: float = Field(default=300.0, gt=0)
    login_address_max_failures: int = Field(default=30, ge=1)
    # YEAFT_PERSONAS_DIR: the user's persona files (unset: <data_dir>/personas).
    personas_dir: Path | None = None
    # YEAFT_RAY_NAMESPACE / YEAFT_COORDINATOR_SHARDS: how actors are named and
    # sharded. Unset: one shard for a local instance (a process less), two on
    # a cluster; every gateway of a cluster must use the same number.
    ray_namespace: str = Field(
        default="yeaft", description="The Ray namespace the coordinator and VP actors live in."
    )
    coordinator_shards: int | None = Field(default=None, ge=1)
    # YEAFT_VP_HOSTS: the processes the VPs run in. 0 gives every VP a
    # process of its own (the default on a cluster: Ray spreads them over the
    # nodes); N > 0 runs all VPs in N processes (the default for a local
    # instance: the machine's cores, at most 4). Every gateway of a cluster
    # must use the same number.
    vp_hosts: int | None = Field(default=None, ge=0)
    # YEAFT_VP_RESOURCES / YEAFT_COORDINATOR_RESOURCES: custom Ray resources
    # (a JSON object, e.g. {"yeaft_vp": 1}) each VP / coordinator actor asks
    # for, to keep them on the nodes started with those resources.
    vp_resources: dict[str, float] = Field(default_factory=dict)
    coordinator_resources: dict[str, float] = Field(default_factory=dict)
    # YEAFT_ACTOR_PLACEMENT: spread (Ray's SPREAD strategy, the default) or
    # default (Ray's default: near the caller): how those actors are placed.
    actor_placement: Placement = Placement.SPREAD
    # YEAFT_LOG_LEVEL: the server's log level.
    log_level: str = "info"
    # YEAFT_MCP_CONFIG: the MCP servers file, in the mcpServers shape
    # (unset: <data_dir>/mcp.json; no file: no servers).
    mcp_config: Path | None = None
    # YEAFT_MCP_CONNECT_TIMEOUT / YEAFT_MCP_CALL_TIMEOUT: seconds to start a
    # server and list its tools; seconds one tool call may take (a server's
    # own "timeout" wins).
    mcp_connect_timeout: float = Field(default=15.0, gt=0)
    mcp_call_timeout: float = Field(default=60.0, gt=0)
    # YEAFT_A2A_CONFIG: the remote A2A agents VPs may call, in the a2aAgents
    # shape (unset: <data_dir>/a2a.json; no file: no agents).
    a2a_config: Path | None = None
    # YEAFT_A2A_CARD_TIMEOUT / YEAFT_A2A_CALL_TIMEOUT: seconds to read an
    # agent's card; seconds one call may take (an agent's own "timeout" wins).
    a2a_card_timeout: float = Field(default=10.0, gt=0)
    a2a_call_timeout: float = Field(default=300.0, gt=0)
    # YEAFT_ATTACHMENT_MAX_BYTES / YEAFT_ATTACHMENT_MAX_COUNT /
    # YEAFT_ATTACHMENT_MAX_MESSAGE_BYTES: bytes per file, files per message
    # and bytes of all of a message's files; over them: attachment_too_large.
    attachment_max_bytes: int = Field(default=10 * 1024 * 1024, ge=1)
    attachment_max_count: int = Field(default=8, ge=1, le=MAX_ATTACHMENTS)
    attachment_max_message_bytes: int = Field(default=20 * 1024 * 1024, ge=1)
    # YEAFT_ADMINS: the users (comma-separated) who may add and remove MCP
    # servers from the web UI and the HTTP API, and list and lift login
    # lockouts (/api/admin/lockouts); the first user of a fresh install is
    # "admin".
    admins: str = "admin"
    # YEAFT_OWNER_INVITES: let a group's owner make invite links to their own
    # group (POST /api/groups/{id}/invites); administrators always may.
    # Off: only administrators make invite links.
    owner_invites: bool = False
    # YEAFT_OIDC_ISSUER / YEAFT_OIDC_CLIENT_ID / YEAFT_OIDC_CLIENT_SECRET:
    # sign in with the team's OpenID Connect provider (authorization code
    # flow with PKCE; the provider's configuration is discovered from the
    # issuer URL). Unset issuer: password sign-in only.
    oidc_issuer: str | None = Field(default=None, pattern=r"^https?://")
    oidc_client_id: str | None = None
    oidc_client_secret: SecretStr | None = None
    # YEAFT_OIDC_NAME: the provider's name on the login page ("Sign in with ...").
    oidc_name: str = "your identity provider"
    # YEAFT_OIDC_ALLOWED_DOMAINS: JSON list of e-mail domains whose people may
    # sign in (their verified e-mail's domain); empty: anyone the provider signs in.
    oidc_allowed_domains: list[str] = Field(default_factory=list)
    # YEAFT_OIDC_ADMIN_CLAIM: the ID token claim that makes a person's new
    # account an administrator: "name=value" (the claim is value, or a list
    # holding it, e.g. groups=yeaft-admins) or "name" (the claim is true).
    # It seeds the role of an account made by a first sign-in only.
    oidc_admin_claim: str | None = None
    # YEAFT_OIDC_ONLY: offer only the provider on the login page (password
    # accounts still work over the API and the terminal client).
    oidc_only: bool = False
    # YEAFT_PUBLIC_URL: the address people reach this server at (behind a
    # proxy); the provider sends them back to <public_url>/api/auth/oidc/callback.
    # Unset: the address of the request.
    public_url: str | None = Field(default=None, pattern=r"^https?://")

    _secret: str | None = PrivateAttr(default=None)

    @field_validator("jwt_secret")
    @classmethod
    def _refuse_weak_secret(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None:
            problem = secret_problem(value.get_secret_value())
            if problem is not None:
                raise WeakSecretError(
                    f"YEAFT_JWT_SECRET is too weak: {problem}. Use at least "
                    f"{MIN_SECRET_LENGTH} random characters (python -c 'import secrets; "
                    "print(secrets.token_urlsafe(48))'), or unset it to have one generated."
                )
        return value

    @field_validator("jwt_ttl", "jwt_renew_before", mode="before")
    @classmethod
    def _duration(cls, value: object) -> object:
        return parse_duration(value) if isinstance(value, str) else value

    @field_validator("personas_dir")
    @classmethod
    def _expand_personas_dir(cls, value: Path | None) -> Path | None:
        return value.expanduser() if value is not None else None

    @model_validator(mode="after")
    def _frame_limits_nest(self) -> GatewaySettings:
        # Frames between the two limits get a frame_too_large error; with the
        # hard cap below the soft one, every oversized frame would close the
        # connection instead.
        if self.ws_max_message_bytes < self.frame_max_bytes:
            raise ValueError(
                "YEAFT_WS_MAX_MESSAGE_BYTES must be at least YEAFT_FRAME_MAX_BYTES "
                f"({self.ws_max_message_bytes} < {self.frame_max_bytes})"
            )
        return self

    @model_validator(mode="after")
    def _oidc_complete(self) -> GatewaySettings:
        if self.oidc_issuer and not (self.oidc_client_id and self.oidc_client_secret):
            raise ValueError(
                "YEAFT_OIDC_ISSUER is set: YEAFT_OIDC_CLIENT_ID and YEAFT_OIDC_CLIENT_SECRET "
                "must be set too"
            )
        return self

    def admin_names(self) -> frozenset[str]:
        return frozenset(n.strip() for n in self.admins.split(",") if n.strip())

    def call_host(self) -> str:
        """The address to call this server at from this machine (never 0.0.0.0 or ::)."""
        return "127.0.0.1" if self.host in ("0.0.0.0", "::") else self.host

    def mcp_path(self) -> Path:
        """The MCP servers file (it may not exist yet)."""
        return (self.mcp_config or self.data_dir / "mcp.json").expanduser()

    def mcp(self) -> McpConfig:
        """The MCP servers, read by the driver at start and after each change."""
        return load_mcp_config(
            self.mcp_path(),
            connect_timeout_s=self.mcp_connect_timeout,
            call_timeout_s=self.mcp_call_timeout,
        )

    def a2a_path(self) -> Path:
        """The remote A2A agents file (it may not exist yet)."""
        return (self.a2a_config or self.data_dir / "a2a.json").expanduser()

    def a2a(self) -> A2aConfig:
        """The remote A2A agents, read by the driver at start."""
        return load_a2a_config(
            self.a2a_path(),
            card_timeout_s=self.a2a_card_timeout,
            call_timeout_s=self.a2a_call_timeout,
        )

    def persona_dir(self) -> Path:
        """Where the user's persona files are (``personas_dir`` or ``<data_dir>/personas``)."""
        return self.personas_dir or self.data_dir / "personas"

    def attachment_limits(self) -> AttachmentLimits:
        """The attachment limits these settings name."""
        return AttachmentLimits(
            max_file_bytes=self.attachment_max_bytes,
            max_count=self.attachment_max_count,
            max_message_bytes=self.attachment_max_message_bytes,
        )

    def jwt_key(self) -> str:
        """The secret that signs tokens: configured, or read from (or made in) the data dir."""
        if self._secret is None:
            if self.jwt_secret is not None:
                self._secret = self.jwt_secret.get_secret_value()
            else:
                self._secret = load_or_create_secret(self.data_dir / JWT_SECRET_FILENAME)
        return self._secret


def load_or_create_secret(path: Path, make: Callable[[], str] | None = None) -> str:
    """Read the secret kept at ``path``, creating it (mode 0600) on first use.

    ``make`` produces a new secret (default: 48 random URL-safe bytes).

    The file appears atomically with its whole content (written aside, then
    hard-linked into place), so a second process starting at the same moment
    either wins the race or reads the winner's complete secret.
    """
    existing = _read_secret(path)
    if existing is not None:
        return existing
    path.parent.mkdir(parents=True, exist_ok=True)
    secret = make() if make is not None else secrets.token_urlsafe(48)
    scratch = path.with_name(f".{path.name}.{secrets.token_hex(6)}")
    fd = os.open(scratch, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(secret + "\n")
        try:
            os.link(scratch, path)
        except FileExistsError:
            pass  # another process won; its secret is read below
    finally:
        with contextlib.suppress(FileNotFoundError):
            scratch.unlink()
    stored = _read_secret(path)
    if stored is None:
        raise OSError(f"could not create the JWT secret file {path}")
    if stored == secret:
        log.info("generated a secret in %s", path)
    return stored


def _read_secret(path: Path) -> str | None:
    try:
        mode = path.stat().st_mode
        text = path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        return None
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        # Anyone who can read this file can forge sessions, so it is made
        # private again rather than used as it is.
        log.warning("%s was readable by others; setting its mode to 0600", path)
        path.chmod(0o600)
    problem = secret_problem(text)
    if problem is not None:
        raise WeakSecretError(
            f"the secret in {path} is too weak: {problem}. Delete the file to have a "
            "new one generated."
        )
    return text
