"""Building the app and running the server.

``create_app(settings, runtime)`` builds the FastAPI app on a runtime the
caller made (tests pass their own). ``run_server(settings)`` is what
``yeaft serve`` calls: it configures Ray's token authentication, starts (or
connects to) Ray as a driver, builds the runtime, serves with uvicorn until
interrupted, and shuts down what it started.

This module does not import Ray at import time: Ray reads ``RAY_AUTH_MODE``
when it is first imported, so ``run_server`` must set it up before that.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import socket
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import uvicorn
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, Response
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException

from actors.process import settle
from gateway import (
    admin_groups_http,
    admin_http,
    api_tokens,
    attachments_http,
    audit_http,
    conversations_http,
    edits,
    files_http,
    http,
    http_members,
    invites_http,
    me_http,
    messages_api,
    oidc_http,
    reactions,
    tasks_http,
    threads,
    usage_http,
    ws,
)
from gateway.agui import router as agui_router
from gateway.attachments import AttachmentService
from gateway.audit import AuditOrigin
from gateway.context import GatewayContext
from gateway.conversations import ConversationService
from gateway.errors import GatewayError
from gateway.groups import GroupService
from gateway.inbox_push import InboxPush
from gateway.limits import LagMeter, LagProbe, UserBuckets
from gateway.lockout import LoginLockout
from gateway.log_filters import install_log_filters
from gateway.mcp import McpCatalog
from gateway.mcp_admin import McpServersFile
from gateway.mcp_http import router as mcp_router
from gateway.metrics import Metrics
from gateway.people import People
from gateway.quota_meter import QuotaMeters
from gateway.settings import GatewaySettings, load_or_create_secret
from gateway.tail import Hub
from personas.loader import load_personas
from protocol import ErrorCode
from telemetry import tracing
from telemetry.config import TracingConfig

if TYPE_CHECKING:
    from actors.config import RuntimeConfig
    from coordinator.runtime import Runtime
    from engine.settings import EngineConfig

log = logging.getLogger(__name__)

# How long one part of the gateway may take to close before shutdown goes on.
CLOSE_TIMEOUT_S = 5.0


async def _closing(what: str, closing: Awaitable[None]) -> None:
    """Await one part's close, but never let it hold the whole shutdown up."""
    task = asyncio.ensure_future(closing)
    done, _ = await asyncio.wait({task}, timeout=CLOSE_TIMEOUT_S)
    if done:
        task.result()
        return
    others = asyncio.all_tasks() - {task, asyncio.current_task()}
    where = "\n".join(_awaiting(task.get_coro()))
    pending = "\n".join(
        f"  {other.get_name()}:{(_awaiting(other.get_coro()) or [' ?'])[-1]}"
        for other in sorted(others, key=lambda t: t.get_name())
    )
    log.warning(
        "shutdown: %s did not close within %.0f s; going on. "
        "It was waiting in:\n%s\nOther tasks wait in:\n%s",
        what,
        CLOSE_TIMEOUT_S,
        where,
        pending,
    )
    task.cancel()


def _awaiting(coro: Any) -> list[str]:
    """Where a suspended coroutine waits: its chain of awaits, outermost first."""
    chain: list[str] = []
    while coro is not None and len(chain) < 40:
        frame = getattr(coro, "cr_frame", None) or getattr(coro, "ag_frame", None)
        if frame is not None:
            chain.append(f"  {frame.f_code.co_filename}:{frame.f_lineno} {frame.f_code.co_name}")
        coro = getattr(coro, "cr_await", None)
    return chain


STATIC_DIR = Path(__file__).resolve().with_name("static")
RAY_TOKEN_FILENAME = "ray_auth_token"
# What `yeaft serve` prints, then the URL, once it accepts connections.
READY_LINE = "Yeaft is ready on"
# How often the server's main loop wakes while nothing happens.
DATE_REFRESH_S = 1.0
PROJECT_ROOT = Path(__file__).resolve().parents[1]

_PLACEHOLDER = """<!doctype html><meta charset="utf-8"><title>Yeaft</title>
<p>The Yeaft gateway is running, but its web UI files are missing from
<code>gateway/static</code>. The API is at <code>/api</code> and the WebSocket at
<code>/ws</code>.</p>"""


def create_app(
    settings: GatewaySettings,
    runtime: Runtime,
    on_stop: Callable[[], Awaitable[None]] | None = None,
) -> FastAPI:
    """The gateway app: HTTP API, ``/ws``, metrics and the static UI, on ``runtime``.

    ``on_stop`` runs when the app shuts down, after its connections closed
    (a server that owns its deployment drains its turns there).
    """
    install_log_filters()
    metrics = Metrics()
    hub = Hub(runtime.store, settings, metrics)
    personas_dir = runtime.config.personas_dir
    attachments = runtime.config.store.open_attachments()
    groups = GroupService(runtime, hub, attachments)
    personas = load_personas(Path(personas_dir) if personas_dir else None)
    people = People(runtime.store, hub, wait_s=settings.tail_wait_s)
    meters = QuotaMeters(runtime.store, hub)
    ctx = GatewayContext(
        settings=settings,
        runtime=runtime,
        metrics=metrics,
        hub=hub,
        groups=groups,
        personas=personas,
        logins=LoginLockout(
            settings.login_max_failures,
            settings.login_window_s,
            settings.login_lockout_s,
            settings.login_address_max_failures,
        ),
        user_rates=UserBuckets(settings.user_rate_limit_per_s, settings.user_rate_limit_burst),
        lag=LagProbe(LagMeter()),
        mcp=McpCatalog(runtime.config.mcp, McpServersFile.of(settings), runtime.mcp_reports),
        people=people,
        inbox=InboxPush(
            runtime.store, people, wait_s=settings.tail_wait_s, on_spent=meters.person_spent
        ),
        conversations=ConversationService(runtime, groups, personas, settings.data_dir),
        attachments=AttachmentService(attachments, settings.attachment_limits()),
        meters=meters,
    )

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # Resolve the secret now, so a weak or unreadable one stops the
        # server at start rather than at the first login.
        settings.jwt_key()
        tracing.install(runtime.config.tracing, "gateway")
        lag_probe = asyncio.create_task(ctx.lag.run(), name="lag-probe")
        try:
            yield
        finally:
            lag_probe.cancel()
            await asyncio.gather(lag_probe, return_exceptions=True)
            await _closing("the presence tail", ctx.people.close())
            await _closing("the activity tail", ctx.inbox.close())
            await _closing("the group tails", hub.close())
            await _closing("the MCP catalog", ctx.mcp.aclose())
            await _closing("the attachment store", ctx.attachments.store.aclose())
            await _closing("the quota meters", ctx.meters.close())
            await asyncio.to_thread(tracing.flush)
        if on_stop is not None:
            await on_stop()

    app = FastAPI(
        title="Yeaft gateway",
        lifespan=lifespan,
        docs_url="/api/docs",
        openapi_url="/api/openapi.json",
        redoc_url=None,
    )
    app.state.gateway = ctx
    app.add_middleware(AuditOrigin)
    _install_error_handlers(app)
    app.include_router(http.router)
    app.include_router(conversations_http.router)
    app.include_router(mcp_router)
    app.include_router(oidc_http.router)
    app.include_router(http_members.router)
    app.include_router(me_http.router)
    app.include_router(api_tokens.router)
    app.include_router(messages_api.router)
    app.include_router(attachments_http.router)
    app.include_router(files_http.router)
    app.include_router(tasks_http.router)
    app.include_router(admin_http.router)
    app.include_router(admin_groups_http.router)
    app.include_router(reactions.router)
    app.include_router(edits.router)
    app.include_router(threads.router)
    app.include_router(audit_http.router)
    app.include_router(invites_http.router)
    app.include_router(usage_http.router)
    app.include_router(agui_router)
    app.add_api_websocket_route("/ws", ws.websocket_endpoint)
    # Imported here: the MCP and A2A SDKs load with the gateway's app, not with
    # every process that imports this module (a VP host's, for one).
    from gateway.a2a_serve import mount as mount_a2a
    from gateway.mcp_serve import mount as mount_mcp_server

    mount_mcp_server(app)
    mount_a2a(app)
    # The UI's files are written separately and may not exist yet; the mount
    # is made anyway and answers 404 until they do.
    app.mount("/static", StaticFiles(directory=STATIC_DIR, check_dir=False), name="static")
    app.add_api_route("/", _index, methods=["GET"], include_in_schema=False)
    return app


async def _index() -> Response:
    index = STATIC_DIR / "index.html"
    if index.is_file():
        return FileResponse(index, headers={"Cache-Control": "no-cache"})
    return HTMLResponse(_PLACEHOLDER)


def _error_response(error: GatewayError) -> JSONResponse:
    body = error.to_json()
    if error.code is ErrorCode.INVALID_FRAME:
        # "frame" is the WebSocket's word; over HTTP it is a request.
        body["error"]["code"] = "invalid_request"
    return JSONResponse(body, status_code=error.status, headers=error.headers())


def _install_error_handlers(app: FastAPI) -> None:
    async def gateway_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, GatewayError)
        return _error_response(exc)

    async def validation_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, RequestValidationError)
        first = exc.errors()[0] if exc.errors() else {"loc": (), "msg": "invalid request"}
        loc = [str(p) for p in first.get("loc", ()) if p not in ("body", "query", "path")]
        field = ".".join(loc) or None
        message = f"'{field}' is invalid: {first['msg']}" if field else str(first["msg"])
        return _error_response(GatewayError(ErrorCode.INVALID_FRAME, message, field=field))

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, StarletteHTTPException)
        codes = {401: ErrorCode.UNAUTHORIZED, 403: ErrorCode.FORBIDDEN, 404: ErrorCode.NOT_FOUND}
        code = codes.get(exc.status_code, ErrorCode.INVALID_FRAME)
        body = GatewayError(code, str(exc.detail)).to_json()
        if exc.status_code not in codes:
            body["error"]["code"] = f"http_{exc.status_code}"
        return JSONResponse(body, status_code=exc.status_code, headers=exc.headers)

    async def internal_error(request: Request, exc: Exception) -> Response:
        log.error("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
        return _error_response(GatewayError(ErrorCode.INTERNAL, "internal server error"))

    app.add_exception_handler(GatewayError, gateway_error)
    app.add_exception_handler(RequestValidationError, validation_error)
    app.add_exception_handler(StarletteHTTPException, http_error)
    app.add_exception_handler(Exception, internal_error)


def uvicorn_config(app: FastAPI, settings: GatewaySettings, **overrides: Any) -> uvicorn.Config:
    """The uvicorn configuration the gateway runs with (tests and benchmarks reuse it).

    WebSocket keepalive: uvicorn sends a protocol-level ping every
    ``ping_interval`` seconds and closes (1011) a peer that does not answer
    within ``ping_timeout``; browsers and the ``websockets`` library answer
    pings on their own.
    """
    options: dict[str, Any] = {
        "host": settings.host,
        "port": settings.port,
        "ws": "websockets-sansio",
        "ws_max_size": settings.ws_max_message_bytes,
        "ws_ping_interval": settings.ping_interval,
        "ws_ping_timeout": settings.ping_timeout,
        "ws_per_message_deflate": settings.ws_compression,
        "lifespan": "on",
        "timeout_graceful_shutdown": settings.shutdown_timeout,
        "log_level": settings.log_level,
        "server_header": False,
    }
    options.update(overrides)
    return uvicorn.Config(app, **options)


def configure_ray_auth(data_dir: Path, *, local: bool) -> None:
    """Set up Ray token authentication in the environment, before Ray is imported.

    For a local instance, token mode is on unless ``RAY_AUTH_MODE`` says
    otherwise, and when no token is configured (``RAY_AUTH_TOKEN``,
    ``RAY_AUTH_TOKEN_PATH``) one is generated in ``<data_dir>/ray_auth_token``
    (mode 0600). Joining a cluster uses whatever token the environment names.
    """
    if "ray" in sys.modules and os.environ.get("RAY_AUTH_MODE") != "token":
        log.warning(
            "ray was imported before the gateway configured token authentication; "
            "set RAY_AUTH_MODE=token in the environment to be sure it is on"
        )
    if not local:
        return
    os.environ.setdefault("RAY_AUTH_MODE", "token")
    if os.environ["RAY_AUTH_MODE"] != "token":
        log.warning(
            "RAY_AUTH_MODE=%s: the local Ray instance runs without token authentication",
            os.environ["RAY_AUTH_MODE"],
        )
        return
    if not os.environ.get("RAY_AUTH_TOKEN") and not os.environ.get("RAY_AUTH_TOKEN_PATH"):
        path = data_dir / RAY_TOKEN_FILENAME
        load_or_create_secret(path, lambda: secrets.token_hex(32))
        os.environ["RAY_AUTH_TOKEN_PATH"] = str(path)


# Coordinator shards of a gateway that joins a cluster, unless configured.
CLUSTER_SHARDS = 2
# The most VP host processes a local instance starts, unless configured.
LOCAL_VP_HOSTS = 4


def with_actor_layout(settings: GatewaySettings, *, local: bool) -> GatewaySettings:
    """``settings`` with its actor layout decided where it is not configured.

    Coordinator shards: one for a local instance (an actor process less),
    two on a cluster. VP hosts: on a local instance one per core, at most
    four (several VPs to a process); on a cluster a process per VP.
    """
    update: dict[str, int] = {}
    if settings.coordinator_shards is None:
        update["coordinator_shards"] = 1 if local else CLUSTER_SHARDS
    if settings.vp_hosts is None:
        update["vp_hosts"] = min(os.cpu_count() or 1, LOCAL_VP_HOSTS) if local else 0
    return settings.model_copy(update=update) if update else settings


def runtime_config(settings: GatewaySettings, engine: EngineConfig) -> RuntimeConfig:
    """The RuntimeConfig the server's actors share: the gateway settings plus ``engine``.

    Built once, in the driver; the actors get provider keys and every other
    engine setting from it, not from the environment of the node they run on.
    """
    from actors.config import RuntimeConfig

    return RuntimeConfig(
        namespace=settings.ray_namespace,
        store=settings.store_config(),
        engine=engine,
        personas_dir=str(settings.persona_dir()),
        coordinator_shards=settings.coordinator_shards or CLUSTER_SHARDS,
        vp_hosts=settings.vp_hosts or 0,
        vp_resources=settings.vp_resources,
        coordinator_resources=settings.coordinator_resources,
        actor_placement=settings.actor_placement,
        max_group_pending_turns=settings.max_group_pending_turns,
        max_vp_pending_turns=settings.max_vp_pending_turns,
        lane_gap_s=settings.lane_gap_s,
        heartbeat_s=settings.agent_heartbeat_s,
        mcp=settings.mcp(),
        a2a=settings.a2a(),
        tracing=TracingConfig.from_env(os.environ),
    )


def run_server(
    settings: GatewaySettings | None = None,
    *,
    ray_address: str | None = None,
    engine: EngineConfig | None = None,
) -> None:
    """Serve until interrupted: Ray (local, or ``ray_address``/``RAY_ADDRESS``), then uvicorn.

    The gateway is always a Ray driver; ``ray://`` (Ray Client) addresses are
    refused because every actor call through them costs several times more.
    ``engine`` defaults to the engine settings in this process's environment.
    """
    settings = settings or GatewaySettings()
    if engine is None:
        from engine.settings import EngineSettings

        engine = EngineSettings().to_config()
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    settings.jwt_key()
    TracingConfig.from_env(os.environ)  # a bad OTEL_* value stops the start before Ray's
    address = ray_address or os.environ.get("RAY_ADDRESS") or None
    if address and address.startswith("ray://"):
        raise ValueError(
            f"{address!r} is a Ray Client address; the gateway must be a Ray driver: "
            "use the cluster's GCS address (host:6379) or run the gateway in the cluster"
        )
    local = address is None
    settings = with_actor_layout(settings, local=local)
    configure_ray_auth(settings.data_dir, local=local)

    import ray  # only now: RAY_AUTH_MODE must be set before ray is imported

    from coordinator.runtime import Runtime

    init: dict[str, Any] = {"namespace": settings.ray_namespace, "logging_level": logging.WARNING}
    if local:
        pythonpath = os.pathsep.join(
            filter(None, [str(PROJECT_ROOT), os.environ.get("PYTHONPATH")])
        )
        # Ray's processes import the project from this tree: the raylet this
        # process starts inherits its environment, and so does every worker
        # the raylet starts. Not a runtime env: the workers Ray starts (one a
        # core) as the first driver connects carry none, and an actor takes
        # only a worker whose runtime env matches its job's, so with one the
        # coordinator and the VP hosts each waited for a new process.
        os.environ["PYTHONPATH"] = pythonpath
        init.update(include_dashboard=False)
    else:
        init["address"] = address
    ray.init(**init)
    try:
        runtime = Runtime(runtime_config(settings, engine))
        asyncio.run(_serve(settings, runtime, owns_cluster=local))
    finally:
        ray.shutdown()


async def _serve(settings: GatewaySettings, runtime: Runtime, *, owns_cluster: bool) -> None:
    """Recover unfinished turns, serve, and on a stop drain the turns of a local instance."""
    # Their processes start beside the coordinators' and the server's own.
    runtime.start_vp_hosts()
    recovered = await runtime.recover()
    if recovered.followed or recovered.rerun or recovered.interrupted:
        log.warning(
            "after the restart: %d turns sent again, %d ended with an error result, %d followed",
            recovered.rerun,
            recovered.interrupted,
            recovered.followed,
        )

    async def drain() -> None:
        # Inside the app's shutdown, not after serve(): uvicorn re-raises the
        # signal that stopped it as soon as serve() returns.
        drained = await runtime.drain(settings.drain_timeout)
        if drained.interrupted:
            log.warning("shutdown ended %d unfinished turns", drained.interrupted)

    app = create_app(settings, runtime, on_stop=drain if owns_cluster else None)
    config = uvicorn_config(app, settings)
    try:
        # Bound here, so that with port 0 the ready line names the port the OS chose.
        sock = config.bind_socket()
        url = f"http://{settings.call_host()}:{sock.getsockname()[1]}"
        server = _AnnouncingServer(config, url)
        await server.serve(sockets=[sock])
    finally:
        await runtime.aclose()


class QuietServer(uvicorn.Server):
    """uvicorn that sleeps while nothing happens.

    uvicorn's main loop wakes ten times a second to see whether it was asked
    to stop. Here a stop request (a signal, or ``should_exit`` set by its
    owner) wakes the loop itself, which otherwise wakes once a second to
    refresh the ``Date`` header (uvicorn's own refresh rate).
    """

    def __init__(self, config: uvicorn.Config) -> None:
        self._exit_requested = False
        self._wake: tuple[asyncio.AbstractEventLoop, asyncio.Event] | None = None
        super().__init__(config)

    @property
    def should_exit(self) -> bool:
        return self._exit_requested

    @should_exit.setter
    def should_exit(self, value: bool) -> None:
        self._exit_requested = value
        wake = self._wake
        if value and wake is not None and not wake[0].is_closed():
            # Also safe from a signal handler, which may run at any point of the loop.
            wake[0].call_soon_threadsafe(wake[1].set)

    async def main_loop(self) -> None:
        stop = asyncio.Event()
        self._wake = (asyncio.get_running_loop(), stop)
        ticks = 0
        try:
            # uvicorn refreshes the Date header on every tenth tick.
            while not await self.on_tick(ticks):
                ticks = (ticks + 10) % 864_000
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), DATE_REFRESH_S)
        finally:
            self._wake = None


class _AnnouncingServer(QuietServer):
    """Prints ``Yeaft is ready on URL`` once the app has started and the socket listens.

    Scripts and tests that start ``yeaft serve --port 0`` read the port from
    that line instead of guessing a free one (which another process can take).
    """

    def __init__(self, config: uvicorn.Config, url: str) -> None:
        super().__init__(config)
        self.url = url

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started:
            settle()
            print(f"{READY_LINE} {self.url}", flush=True)
