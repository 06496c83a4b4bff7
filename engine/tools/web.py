"""``web_fetch``: GET one URL and give the model its readable text.

Only public addresses are fetched. The host is resolved first and every
address it resolves to is checked: loopback, private, link-local, shared,
reserved, multicast and unspecified addresses are refused unless
``WebFetchConfig.allow`` names the host or a network holding the address.
The connection then goes to the address that was checked (the URL's host is
kept for the ``Host`` header and TLS), so a name that resolves differently a
moment later cannot slip a private address in; and redirects are followed
one by one, each through the same check. The body is read up to a byte limit,
the whole fetch has a time limit, and HTML is reduced to text with the
standard library's ``html.parser``.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from dataclasses import dataclass
from html.parser import HTMLParser

import httpx
from pydantic import BaseModel, Field

from engine.tools.registry import CONVERSATION_MODES, Tool, ToolContext, ToolOutcome

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

_TEXT_TYPES = ("text/", "application/json", "application/xml", "application/xhtml")


@dataclass(frozen=True, slots=True)
class WebFetchConfig:
    """Limits of ``web_fetch`` and the non-public hosts it may reach."""

    # Host names, addresses or networks (CIDR) that may be fetched although
    # they are not public: "127.0.0.1", "10.0.0.0/8", "intranet.example".
    allow: tuple[str, ...] = ()
    max_bytes: int = 2_000_000
    max_chars: int = 50_000
    timeout: float = 20.0
    max_redirects: int = 5


class FetchRefused(Exception):
    """A fetch that is not made or not finished; the message is for the model."""


class _Allow:
    def __init__(self, entries: tuple[str, ...]) -> None:
        self.hosts: set[str] = set()
        self.networks: list[IPNetwork] = []
        for entry in entries:
            try:
                self.networks.append(ipaddress.ip_network(entry.strip(), strict=False))
            except ValueError:
                self.hosts.add(entry.strip().lower().rstrip("."))

    def permits(self, host: str, address: IPAddress) -> bool:
        return host.lower().rstrip(".") in self.hosts or any(address in n for n in self.networks)


def is_public(address: IPAddress) -> bool:
    """Whether an address is on the public internet (and not multicast)."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_global and not address.is_multicast


async def resolve(host: str, port: int) -> list[IPAddress]:
    """Every address ``host`` resolves to (an address resolves to itself)."""
    try:
        return [ipaddress.ip_address(host)]
    except ValueError:
        pass
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise FetchRefused(f"cannot resolve {host}: {exc}") from None
    found: list[IPAddress] = []
    for *_, sockaddr in infos:
        address = ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0])
        if address not in found:
            found.append(address)
    if not found:
        raise FetchRefused(f"{host} has no address")
    return found


@dataclass(frozen=True, slots=True)
class Page:
    url: str
    status: int
    content_type: str
    body: bytes
    truncated: bool
    encoding: str


class WebFetcher:
    """Fetches URLs under one :class:`WebFetchConfig`."""

    def __init__(self, config: WebFetchConfig | None = None) -> None:
        self.config = config or WebFetchConfig()
        self._allow = _Allow(self.config.allow)

    async def fetch(self, url: str) -> Page:
        """GET ``url``, following redirects through the address check; FetchRefused says why not."""
        try:
            async with asyncio.timeout(self.config.timeout):
                return await self._fetch(url)
        except TimeoutError:
            raise FetchRefused(f"no complete answer within {self.config.timeout:g} s") from None
        except httpx.HTTPError as exc:
            raise FetchRefused(f"the request failed: {exc or type(exc).__name__}") from None

    async def _fetch(self, url: str) -> Page:
        # trust_env=False: a proxy from the environment would connect for us
        # and bypass the address check.
        async with httpx.AsyncClient(trust_env=False, timeout=self.config.timeout) as client:
            current = self._parse(url)
            for _ in range(self.config.max_redirects + 1):
                request = await self._pinned(client, current)
                response = await client.send(request, stream=True)
                try:
                    if response.is_redirect and "location" in response.headers:
                        current = self._parse(str(current.join(response.headers["location"])))
                        continue
                    return await self._read(current, response)
                finally:
                    await response.aclose()
        raise FetchRefused(f"more than {self.config.max_redirects} redirects")

    @staticmethod
    def _parse(url: str) -> httpx.URL:
        try:
            parsed = httpx.URL(url)
        except (httpx.InvalidURL, TypeError) as exc:
            raise FetchRefused(f"not a URL: {exc}") from None
        if parsed.scheme not in ("http", "https") or not parsed.host:
            raise FetchRefused("only http:// and https:// URLs with a host can be fetched")
        return parsed

    async def _pinned(self, client: httpx.AsyncClient, url: httpx.URL) -> httpx.Request:
        """A request for ``url`` that connects to an address checked here."""
        port = url.port or (443 if url.scheme == "https" else 80)
        addresses = await resolve(url.host, port)
        for address in addresses:
            if not is_public(address) and not self._allow.permits(url.host, address):
                raise FetchRefused(
                    f"{url.host} resolves to {address}, which is not a public address; "
                    "fetching it is not allowed"
                )
        # The URL's own host and port (IPv6 in brackets), without user info.
        host_header = url.netloc.decode("ascii").rpartition("@")[2]
        return client.build_request(
            "GET",
            url.copy_with(host=str(addresses[0])),
            headers={"Host": host_header, "Accept": "text/html, text/*;q=0.9, */*;q=0.5"},
            extensions={"sni_hostname": url.host},
        )

    async def _read(self, url: httpx.URL, response: httpx.Response) -> Page:
        body = bytearray()
        truncated = False
        async for chunk in response.aiter_bytes():
            body.extend(chunk)
            if len(body) > self.config.max_bytes:
                del body[self.config.max_bytes :]
                truncated = True
                break
        return Page(
            url=str(url),
            status=response.status_code,
            content_type=response.headers.get("content-type", ""),
            body=bytes(body),
            truncated=truncated,
            encoding=response.charset_encoding or "utf-8",
        )


class _TextExtractor(HTMLParser):
    """The visible text of an HTML page: no scripts, styles or markup; blocks on lines."""

    _SKIP = frozenset({"script", "style", "noscript", "template", "svg", "head"})
    _BLOCK = frozenset(
        {"p", "div", "br", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "pre", "section",
         "article", "header", "footer", "table", "ul", "ol", "blockquote", "title", "hr"}
    )  # fmt: skip

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.title = ""
        self._skipping = 0
        self._in_title = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "title":
            self._in_title = True
        elif tag in self._SKIP:
            self._skipping += 1
        if tag in self._BLOCK:
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self._in_title = False
        elif tag in self._SKIP and self._skipping:
            self._skipping -= 1
        if tag in self._BLOCK:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title += data
        elif not self._skipping:
            self.parts.append(data)

    def text(self) -> str:
        lines = (" ".join(line.split()) for line in "".join(self.parts).splitlines())
        return "\n".join(line for line in lines if line)


def html_to_text(html: str) -> tuple[str, str]:
    """(title, readable text) of an HTML document."""
    parser = _TextExtractor()
    parser.feed(html)
    parser.close()
    return " ".join(parser.title.split()), parser.text()


def render_page(page: Page, max_chars: int) -> str:
    """What the model reads: where the page came from, then its text."""
    kind = page.content_type.split(";", 1)[0].strip().lower()
    head = [f"URL: {page.url}", f"Status: {page.status}", f"Content-Type: {kind or 'unknown'}"]
    if kind and not kind.startswith(_TEXT_TYPES):
        head.append(f"\n[binary content, {len(page.body)} bytes: not shown]")
        return "\n".join(head)
    try:
        text = page.body.decode(page.encoding, errors="replace")
    except LookupError:
        text = page.body.decode("utf-8", errors="replace")
    if kind in ("text/html", "application/xhtml+xml") or (not kind and "<html" in text[:500]):
        title, text = html_to_text(text)
        if title:
            head.append(f"Title: {title}")
    notes = []
    if page.truncated:
        notes.append(f"the page was cut at {len(page.body)} bytes")
    if len(text) > max_chars:
        text = text[:max_chars]
        notes.append(f"the text was cut at {max_chars} characters")
    tail = f"\n[{'; '.join(notes)}]" if notes else ""
    return "\n".join(head) + "\n\n" + text + tail


class WebFetchParams(BaseModel):
    url: str = Field(min_length=1, max_length=4000, description="An http:// or https:// URL.")


def web_fetch_tool(config: WebFetchConfig | None = None) -> Tool:
    """The ``web_fetch`` tool under ``config``."""
    fetcher = WebFetcher(config)

    async def web_fetch(p: WebFetchParams, ctx: ToolContext) -> ToolOutcome:
        try:
            page = await fetcher.fetch(p.url)
        except FetchRefused as exc:
            return ToolOutcome(f"web_fetch {p.url}: {exc}", is_error=True)
        text = render_page(page, fetcher.config.max_chars)
        return ToolOutcome(text, is_error=page.status >= 400)

    return Tool(
        "web_fetch",
        "Fetch a web page (GET) and read its text.",
        WebFetchParams,
        web_fetch,
        modes=CONVERSATION_MODES,
        timeout=fetcher.config.timeout + 5.0,
    )
