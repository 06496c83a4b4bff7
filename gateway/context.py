"""What every request handler of one app shares, kept on ``app.state.gateway``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from gateway.conversations import ConversationService
from gateway.groups import GroupService
from gateway.inbox_push import InboxPush
from gateway.limits import LagProbe, UserBuckets
from gateway.lockout import LoginLockout
from gateway.metrics import Metrics
from gateway.people import People
from gateway.settings import GatewaySettings
from gateway.tail import Hub
from personas.loader import PersonaLibrary

if TYPE_CHECKING:
    from coordinator.runtime import Runtime
    from gateway.attachments import AttachmentService
    from gateway.mcp import McpCatalog
    from gateway.oidc import OidcClient
    from gateway.quota_meter import QuotaMeters


@dataclass(slots=True)
class GatewayContext:
    """Settings, the runtime, and the per-process services built on them."""

    settings: GatewaySettings
    runtime: Runtime
    metrics: Metrics
    hub: Hub
    groups: GroupService
    personas: PersonaLibrary
    logins: LoginLockout
    # Shared by the WebSocket connections of this process.
    user_rates: UserBuckets
    lag: LagProbe
    conversations: ConversationService
    # The MCP servers as this process lists them (gateway.mcp).
    mcp: McpCatalog
    # Connections by user, presence, and the directory log (gateway.people).
    people: People
    # Unread and mention counts pushed from the store's activity log (gateway.inbox_push).
    inbox: InboxPush
    # Files with messages: limits, uploads and downloads (gateway.attachments).
    attachments: AttachmentService
    # Each person's quota meter, pushed to their connections (gateway.quota_meter).
    meters: QuotaMeters
    # The OpenID Connect provider people sign in with, made on first use (gateway.oidc_http).
    oidc: OidcClient | None = None
