"""Sign-in with an OpenID Connect provider: the authorization code flow with PKCE.

:class:`OidcClient` speaks to the provider through Authlib's OAuth 2 client
(``authlib.integrations.httpx_client``) and checks the ID token with
``joserfc`` (Authlib's JOSE library): its signature against the provider's
published keys, and its ``iss``, ``aud``, ``exp``, ``iat``, ``sub`` and
``nonce``. The provider's endpoints come from its discovery document
(``/.well-known/openid-configuration`` under the issuer), read once and
kept.

What a sign-in needs to remember between leaving for the provider and
coming back (``state``, ``nonce``, the PKCE verifier) travels in a
:class:`PendingSignIn`, which the HTTP side keeps in a short-lived signed
cookie (``gateway.oidc_http``); nothing is kept on the server, so any
gateway of a cluster can finish a sign-in another one began.

Every failure is an :class:`OidcError` with a message a person can act on;
``provider_down`` tells the page to say the provider cannot be reached.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass, field
from typing import Any

import httpx
from authlib.integrations.httpx_client import AsyncOAuth2Client
from joserfc import jwt
from joserfc.errors import JoseError
from joserfc.jwk import KeySet

# Scopes asked for: the subject, and the e-mail and name to make an account with.
SCOPES = "openid email profile"
# Seconds a person has to sign in at the provider and come back.
PENDING_TTL_S = 600
# Seconds of clock difference allowed between the provider and this server.
LEEWAY_S = 60
# Signature algorithms accepted for an ID token (never "none", never HMAC
# with the client secret: the provider signs with its published keys).
ALGORITHMS = ["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "EdDSA"]


class OidcError(Exception):
    """A sign-in that cannot go on; ``message`` says why, for the person."""

    def __init__(self, message: str, provider_down: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.provider_down = provider_down


@dataclass(frozen=True, slots=True)
class PendingSignIn:
    """What a sign-in carries to the provider and back (kept in a signed cookie)."""

    state: str
    nonce: str
    verifier: str
    expires_at: float
    # The invite link the sign-in began from (its id, checked when it began).
    invite: str | None = None

    @classmethod
    def new(cls, now: float) -> PendingSignIn:
        return cls(
            secrets.token_urlsafe(24),
            secrets.token_urlsafe(24),
            secrets.token_urlsafe(48),
            now + PENDING_TTL_S,
        )


@dataclass(frozen=True, slots=True)
class Identity:
    """The person the provider vouched for, from a checked ID token."""

    issuer: str
    subject: str
    email: str | None
    email_verified: bool
    name: str | None
    preferred_username: str | None
    # Every claim of the checked ID token (a role may be read from one).
    claims: dict[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> str:
        """The identity's stored key: issuer and subject, never a name anyone may choose."""
        return f"{self.issuer} {self.subject}"


class OidcClient:
    """One configured provider: discovery, the authorization URL, the code's exchange."""

    def __init__(
        self,
        issuer: str,
        client_id: str,
        client_secret: str,
        *,
        timeout_s: float = 10.0,
    ) -> None:
        self.issuer = issuer.rstrip("/")
        self.client_id = client_id
        self._secret = client_secret
        self._timeout = timeout_s
        self._metadata: dict[str, Any] | None = None
        self._keys: KeySet | None = None

    def __repr__(self) -> str:
        return f"OidcClient({self.issuer!r}, client_id={self.client_id!r})"

    def _client(self, redirect_uri: str) -> AsyncOAuth2Client:
        return AsyncOAuth2Client(
            client_id=self.client_id,
            client_secret=self._secret,
            scope=SCOPES,
            redirect_uri=redirect_uri,
            code_challenge_method="S256",
            timeout=self._timeout,
        )

    async def metadata(self) -> dict[str, Any]:
        """The provider's discovery document (read once)."""
        if self._metadata is None:
            url = f"{self.issuer}/.well-known/openid-configuration"
            document = await self._get_json(url)
            if document.get("issuer", "").rstrip("/") != self.issuer:
                raise OidcError(
                    f"the provider at {self.issuer} names another issuer "
                    f"({document.get('issuer')!r}) in its configuration"
                )
            for key in ("authorization_endpoint", "token_endpoint", "jwks_uri"):
                if not isinstance(document.get(key), str):
                    raise OidcError(f"the provider's configuration has no {key}")
            self._metadata = document
        return self._metadata

    def _unreachable(self, exc: httpx.HTTPError) -> OidcError:
        return OidcError(
            f"the sign-in provider at {self.issuer} cannot be reached "
            f"({type(exc).__name__}); try again later",
            provider_down=True,
        )

    async def _get_json(self, url: str) -> dict[str, Any]:
        try:
            async with httpx.AsyncClient(timeout=self._timeout) as http:
                reply = await http.get(url)
        except httpx.HTTPError as exc:
            raise self._unreachable(exc) from None
        if reply.status_code != 200:
            raise OidcError(
                f"the sign-in provider answered {reply.status_code} for {url}",
                provider_down=reply.status_code >= 500,
            )
        try:
            data = reply.json()
        except ValueError:
            raise OidcError(f"the sign-in provider's answer at {url} is not JSON") from None
        if not isinstance(data, dict):
            raise OidcError(f"the sign-in provider's answer at {url} is not an object")
        return data

    async def authorization_url(self, redirect_uri: str, pending: PendingSignIn) -> str:
        """Where to send the person: the provider's sign-in, for this sign-in's state."""
        metadata = await self.metadata()
        async with self._client(redirect_uri) as client:
            url, _ = client.create_authorization_url(
                metadata["authorization_endpoint"],
                state=pending.state,
                nonce=pending.nonce,
                code_verifier=pending.verifier,
            )
        return str(url)

    async def finish(self, redirect_uri: str, pending: PendingSignIn, code: str) -> Identity:
        """Exchange ``code`` for tokens and check the ID token; the person it names."""
        return await self.check_id_token(
            await self.exchange(redirect_uri, pending, code), pending.nonce
        )

    async def exchange(self, redirect_uri: str, pending: PendingSignIn, code: str) -> str:
        """The ID token the provider gives for ``code`` (not checked yet)."""
        metadata = await self.metadata()
        try:
            async with self._client(redirect_uri) as client:
                token = await client.fetch_token(
                    metadata["token_endpoint"],
                    grant_type="authorization_code",
                    code=code,
                    code_verifier=pending.verifier,
                )
        except httpx.HTTPError as exc:
            raise self._unreachable(exc) from None
        except Exception as exc:  # Authlib's OAuthError: the provider refused the code
            error = getattr(exc, "error", None) or type(exc).__name__
            raise OidcError(f"the sign-in provider refused the sign-in ({error})") from None
        id_token = token.get("id_token")
        if not isinstance(id_token, str):
            raise OidcError("the sign-in provider sent no ID token")
        return id_token

    async def check_id_token(self, id_token: str, nonce: str, now: float | None = None) -> Identity:
        """The identity in ``id_token`` once its signature and claims are checked."""
        keys = await self._key_set()
        try:
            token = jwt.decode(id_token, keys, algorithms=ALGORITHMS)
        except (JoseError, ValueError) as exc:
            # Keys may have rotated: read them again once before refusing.
            self._keys = None
            try:
                token = jwt.decode(id_token, await self._key_set(), algorithms=ALGORITHMS)
            except (JoseError, ValueError):
                raise OidcError(f"the ID token's signature is not valid ({exc})") from None
        registry = jwt.JWTClaimsRegistry(
            now=int(now if now is not None else time.time()),
            leeway=LEEWAY_S,
            iss={"essential": True, "value": self.issuer},
            aud={"essential": True, "value": self.client_id},
            sub={"essential": True},
            exp={"essential": True},
            iat={"essential": True},
            nonce={"essential": True, "value": nonce},
        )
        claims = token.claims
        try:
            registry.validate(claims)
        except JoseError as exc:
            raise OidcError(f"the ID token was refused: {exc.description or exc}") from None
        audience = claims.get("aud")
        if isinstance(audience, list) and len(audience) > 1 and claims.get("azp") != self.client_id:
            raise OidcError("the ID token was issued to another party (azp)")

        def text(name: str) -> str | None:
            value = claims.get(name)
            return value if isinstance(value, str) and value else None

        return Identity(
            issuer=self.issuer,
            subject=str(claims["sub"]),
            email=text("email"),
            email_verified=claims.get("email_verified") is True,
            name=text("name"),
            preferred_username=text("preferred_username"),
            claims=dict(claims),
        )

    async def _key_set(self) -> KeySet:
        if self._keys is None:
            metadata = await self.metadata()
            document = await self._get_json(metadata["jwks_uri"])
            try:
                self._keys = KeySet.import_key_set(document)  # type: ignore[arg-type]
            except (JoseError, ValueError, TypeError) as exc:
                raise OidcError(f"the provider's signing keys cannot be read ({exc})") from None
        return self._keys
