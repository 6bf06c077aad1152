"""Where the service may connect for a URL a tenant gave it: the operator's network policy (config
``network``, docs/security.md "Server-side requests").

Tenants with a managing key register replica targets (scraped, health-checked and relayed to by the
gateway) and ``async_predict`` callers name webhooks. Without a policy either can make the service
send requests to its own loopback services or the cloud metadata address. ``NetPolicy`` refuses, by
default:

- for every tenant-supplied URL: loopback (``127.0.0.0/8``, ``::1``), link-local (``169.254.0.0/16``
  with the metadata address ``169.254.169.254``, ``fe80::/10``), ``0.0.0.0/8`` / ``::`` (both reach
  this host), multicast and reserved ranges, the AWS IPv6 metadata address ``fd00:ec2::254``, the
  names ``localhost`` (and ``*.localhost``) and the cloud metadata names, and this service's own listen
  address (never lifted: a replica pointing at the gateway would call itself);
- for webhooks also the private ranges: RFC 1918 (``10/8``, ``172.16/12``, ``192.168/16``), CGNAT
  ``100.64.0.0/10`` and IPv6 ULA ``fc00::/7`` (replica targets are private addresses by nature).

The operator lifts a refusal with an allow list of networks (``10.0.0.0/8``, ``127.0.0.1``) and host
names (``metrics.internal``, ``*.svc.cluster.local``). Addresses are checked after resolution
(``getaddrinfo``; the event loop's in async code), IPv4-mapped IPv6 read as IPv4, so every spelling of an
address (``0x7f000001``, ``2130706433``, ``0177.0.0.1``, ``[::ffff:127.0.0.1]``) is the same address.
The check runs at connect time (``guarded_client``, ``NetPolicy.resolve``) and the connection goes to
the address that was checked, so a DNS answer that changes after registration gains nothing.
``Egress`` holds the two policies and the targets the config file declares (trusted: the operator wrote
them).
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httpcore
import httpx

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network

TARGETS_ALLOW = "network.targets_allow"
WEBHOOKS_ALLOW = "network.webhooks_allow"

_ALWAYS: tuple[tuple[str, str], ...] = (
    ("127.0.0.0/8", "a loopback address"),
    ("::1/128", "a loopback address"),
    ("169.254.0.0/16", "a link-local address (the cloud metadata service 169.254.169.254 lives here)"),
    ("fe80::/10", "a link-local address"),
    ("0.0.0.0/8", "an unspecified address (it reaches this host)"),
    ("::/128", "an unspecified address (it reaches this host)"),
    ("fd00:ec2::254/128", "the AWS metadata service's IPv6 address"),
    ("224.0.0.0/4", "a multicast address"),
    ("ff00::/8", "a multicast address"),
    ("240.0.0.0/4", "a reserved address"),
)
_PRIVATE: tuple[tuple[str, str], ...] = (
    ("10.0.0.0/8", "a private address (RFC 1918)"),
    ("172.16.0.0/12", "a private address (RFC 1918)"),
    ("192.168.0.0/16", "a private address (RFC 1918)"),
    ("100.64.0.0/10", "a shared address (CGNAT, RFC 6598)"),
    ("fc00::/7", "a unique local IPv6 address (ULA)"),
)
DENIED_NAMES = (
    "localhost",
    "*.localhost",
    "metadata",
    "metadata.google.internal",
    "metadata.goog",
    "instance-data",
    "instance-data.ec2.internal",
)
"""Host names refused before any lookup (loopback by RFC 6761; the cloud metadata services)."""


class Refused(ValueError):
    """A URL or address the policy refuses; the message names it, why, and the setting that allows it."""


def normalise(address: str) -> Address:
    """The address ``getaddrinfo`` gave (``fe80::1%eth0`` scope ids dropped), an IPv4-mapped IPv6
    address as the IPv4 address it is; ValueError for a string that is no IP address."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip


def _name(host: str) -> str:
    return host.strip("[]").rstrip(".").lower()


def _name_matches(host: str, pattern: str) -> bool:
    if pattern.startswith("*."):
        return host.endswith(pattern[1:]) and len(host) > len(pattern) - 1
    return host == pattern


def parse_allow_entry(entry: str) -> Network | str:
    """One allow-list entry: a network (``10.0.0.0/8``, ``127.0.0.1``, ``::1``, ``[fd00::1]``) or a host
    name (``metrics.internal``, ``*.svc.cluster.local``, lower-cased). ValueError saying what to write."""
    text = entry.strip()
    try:
        net = ipaddress.ip_network(text.strip("[]"), strict=False)
    except ValueError:
        pass
    else:
        if isinstance(net, ipaddress.IPv6Network) and net.network_address.ipv4_mapped is not None:
            mapped = net.network_address.ipv4_mapped
            return ipaddress.ip_network(f"{mapped}/{max(0, net.prefixlen - 96)}", strict=False)
        return net
    name = _name(text)
    labels = name[2:] if name.startswith("*.") else name
    if not labels or not all(p and all(c.isalnum() or c == "-" for c in p) for p in labels.split(".")):
        raise ValueError(
            f"{entry!r} is neither a network nor a host name; write e.g. 10.0.0.0/8, 127.0.0.1, "
            "fd00::/8, metrics.internal or *.svc.cluster.local"
        )
    return name


@dataclass(frozen=True)
class NetPolicy:
    """What one kind of tenant-supplied URL may reach (module docstring).

    Attributes:
        setting: the config key that lifts a refusal (named in every error), e.g. ``network.targets_allow``.
        denied: (network, what it is) refused unless allowed.
        allowed: networks the operator allows.
        allowed_names: host names (``*.suffix`` patterns too) the operator allows, whatever they resolve to.
        own: (address, port) of this service's listen address, refused always; address None: the port on
            any of this host's addresses (``listen: 0.0.0.0:…``).
        own_addresses: this host's addresses (for a wildcard ``own``).
    """

    setting: str
    denied: tuple[tuple[Network, str], ...]
    allowed: tuple[Network, ...] = ()
    allowed_names: tuple[str, ...] = ()
    own: tuple[tuple[Address | None, int], ...] = ()
    own_addresses: frozenset[Address] = field(default_factory=frozenset)

    def _name_allowed(self, host: str) -> bool:
        return any(_name_matches(host, p) for p in self.allowed_names)

    def _advice(self, example: str) -> str:
        key = self.setting.split(".", 1)[1]
        return (
            f"; an operator can allow it with {self.setting} in the config file "
            f"(network: {{{key}: [{example}]}})"
        )

    def check_name(self, host: str) -> bool:
        """True when ``host`` is allowed by name (no address check follows); raises ``Refused`` for a
        refused name (``localhost``, the metadata names) not allowed by name; False otherwise."""
        name = _name(host)
        if self._name_allowed(name):
            return True
        if any(_name_matches(name, p) for p in DENIED_NAMES):
            kind = "a loopback name" if "localhost" in name else "a cloud metadata service name"
            raise Refused(f"{name} is {kind}" + self._advice(name))
        return False

    def check_address(self, address: str, port: int, host: str | None = None, by_name: bool = False) -> None:
        """Raise ``Refused`` unless the service may connect to ``address`` (as ``getaddrinfo`` gives it)
        on ``port``; ``host`` is the name it was resolved from (for the message); ``by_name``: the host is
        allowed by name, only the own listen address is refused."""
        ip = normalise(address)
        named = host is not None and _name(host) != str(ip)
        for own_ip, own_port in self.own:
            if port == own_port and (ip == own_ip or (own_ip is None and self._is_local(ip))):
                raise Refused(
                    f"{ip} port {port}{f' ({_name(host or str(ip))})' if named else ''} is this service's "
                    "own listen address; a replica or webhook may not point at the service itself"
                )
        shown = f"{_name(host or '')} resolves to {ip}, which" if named else str(ip)
        if by_name or any(ip in net for net in self.allowed if net.version == ip.version):
            return
        for net, kind in self.denied:
            if net.version == ip.version and ip in net:
                raise Refused(f"{shown} is {kind}" + self._advice(str(ip)))

    def _is_local(self, ip: Address) -> bool:
        return ip.is_loopback or ip.is_unspecified or ip in self.own_addresses

    def addresses(
        self, host: str, port: int, infos: Iterable[tuple[Any, ...]], by_name: bool = False
    ) -> list[str]:
        """The addresses of ``getaddrinfo`` answers ``infos`` the service may connect to, in order;
        ``Refused`` (for the first refused one) when there is none."""
        allowed: list[str] = []
        first: Refused | None = None
        for info in infos:
            address = str(info[4][0])
            try:
                self.check_address(address, port, host, by_name)
            except Refused as exc:
                first = first or exc
            else:
                if address not in allowed:
                    allowed.append(address)
        if not allowed:
            raise first or Refused(f"{_name(host)} has no address")
        return allowed

    async def resolve(self, host: str, port: int) -> list[str]:
        """The addresses of ``host`` the service may connect to on ``port``, resolved by the event loop's
        ``getaddrinfo`` (a host allowed by name: every address but the own listen address). Raises
        ``Refused``; ``OSError`` when the name does not resolve."""
        by_name = self.check_name(host)
        loop = asyncio.get_running_loop()
        infos = await loop.getaddrinfo(host.strip("[]"), port, type=socket.SOCK_STREAM)
        return self.addresses(host, port, infos, by_name)

    def _registration(self, url: str, what: str, infos: list[tuple[Any, ...]] | None) -> None:
        host, port = url_host_port(url)
        try:
            by_name = self.check_name(host)
            for info in infos or ():
                self.check_address(str(info[4][0]), port, host, by_name)
        except Refused as exc:
            raise Refused(f"{what} {url} is refused by the network policy: {exc}") from None

    def check_url(self, url: str, what: str) -> None:
        """Registration-time check of ``url`` (``what``: ``target`` / ``webhook_endpoint``), blocking: its
        host by name, then every address it resolves to now (a name that does not resolve yet passes:
        the connect-time check still holds). Raises ``Refused`` naming ``url`` and the setting."""
        host, port = url_host_port(url)
        self._registration(url, what, None)
        try:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except OSError:
            return
        self._registration(url, what, infos)

    async def check_url_async(self, url: str, what: str) -> None:
        """``check_url`` resolving through the event loop's ``getaddrinfo``."""
        host, port = url_host_port(url)
        self._registration(url, what, None)
        try:
            infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except OSError:
            return
        self._registration(url, what, infos)


def url_host_port(url: str) -> tuple[str, int]:
    """``(host, port)`` of an ``http(s)://`` URL (the scheme's default port when none is written)."""
    parts = urlsplit(url)
    return parts.hostname or "", parts.port or (443 if parts.scheme == "https" else 80)


def origin(url: str) -> tuple[str, str, int]:
    """``(scheme, host, port)`` of a URL: what a connection to it reaches (user info and path dropped)."""
    host, port = url_host_port(url)
    return urlsplit(url).scheme.lower(), _name(host), port


def own_listen(host: str, port: int) -> tuple[tuple[Address | None, int], frozenset[Address]]:
    """The ``own`` entry of ``listen: host:port`` (``0.0.0.0`` / ``::`` / a name: None, any address of
    this host) and, for those, this host's addresses as ``socket.gethostname()`` resolves them
    (blocking)."""
    try:
        ip: Address | None = normalise(host.strip("[]"))
    except ValueError:
        ip = None
    if ip is not None and ip.is_unspecified:
        ip = None
    if ip is not None:
        return (ip, port), frozenset()  # one address: this host's others are not needed
    try:
        infos = socket.getaddrinfo(socket.gethostname(), None, type=socket.SOCK_STREAM)
        mine = frozenset(normalise(str(i[4][0])) for i in infos)
    except (OSError, ValueError):
        mine = frozenset()
    return (ip, port), mine


def make_policy(
    setting: str, allow: Iterable[str], listen: tuple[str, int] | None, private_too: bool
) -> NetPolicy:
    """The policy of ``setting`` with the operator's ``allow`` entries (``parse_allow_entry``), this
    service's ``listen`` (host, port) and the default refusals (``private_too``: the private ranges)."""
    denied = tuple(
        (ipaddress.ip_network(n), kind) for n, kind in (*_ALWAYS, *(_PRIVATE if private_too else ()))
    )
    parsed = [parse_allow_entry(e) for e in allow]
    own, mine = own_listen(*listen) if listen is not None else (None, frozenset[Address]())
    return NetPolicy(
        setting,
        denied,
        tuple(p for p in parsed if not isinstance(p, str)),
        tuple(p for p in parsed if isinstance(p, str)),
        (own,) if own is not None else (),
        mine,
    )


@dataclass(frozen=True)
class Egress:
    """The service's two policies and the targets the config file declares.

    Attributes:
        targets: for replica targets registered through the API (scrapes, health checks, the gateway).
        webhooks: for ``async_predict`` webhooks.
        trusted: ``(deployment id, origin(url))`` of every target the config file declares (the
            operator wrote them: never checked).
    """

    targets: NetPolicy
    webhooks: NetPolicy
    trusted: frozenset[tuple[str, tuple[str, str, int]]] = frozenset()

    def for_target(self, deployment_id: str, url: str) -> NetPolicy | None:
        """The policy a connection to ``url`` of ``deployment_id`` is checked with; None: trusted."""
        return None if (deployment_id, origin(url)) in self.trusted else self.targets


def refusal(exc: BaseException) -> Refused | None:
    """The ``Refused`` behind ``exc`` (an ``httpx.ConnectError`` of a ``guarded_client``), or None."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, Refused):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


class _GuardedBackend(httpcore.AsyncNetworkBackend):
    """httpcore's network backend that resolves, checks (``NetPolicy.resolve``) and connects to the
    address it checked."""

    def __init__(self, policy: NetPolicy) -> None:
        self._policy = policy
        self._inner = httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        try:
            async with asyncio.timeout(timeout):
                addresses = await self._policy.resolve(host, port)
        except Refused as exc:
            raise httpcore.ConnectError(f"refused by the network policy: {exc}") from exc
        except TimeoutError as exc:
            raise httpcore.ConnectTimeout(f"resolving {host} took over {timeout} s") from exc
        except OSError as exc:
            raise httpcore.ConnectError(f"cannot resolve {host}: {exc}") from exc
        last: Exception | None = None
        for address in addresses:
            try:
                return await self._inner.connect_tcp(address, port, timeout, local_address, socket_options)
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                last = exc
        assert last is not None
        raise last

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


def guarded_client(policy: NetPolicy, **kwargs: Any) -> httpx.AsyncClient:
    """An ``httpx.AsyncClient`` (``kwargs`` as for it: ``timeout``, ``limits``) whose every connection is
    checked by ``policy`` at connect time; a refusal is an ``httpx.ConnectError`` (``refusal`` finds the
    reason). It follows no redirects and ignores proxy environment variables (a proxy's address would be
    checked instead of the target's)."""
    limits = kwargs.pop("limits", httpx.Limits())
    transport = httpx.AsyncHTTPTransport(limits=limits, trust_env=False)
    transport._pool = httpcore.AsyncConnectionPool(  # the one way to give httpx a network backend
        ssl_context=httpx.create_ssl_context(),
        max_connections=limits.max_connections,
        max_keepalive_connections=limits.max_keepalive_connections,
        keepalive_expiry=limits.keepalive_expiry,
        network_backend=_GuardedBackend(policy),
    )
    return httpx.AsyncClient(transport=transport, trust_env=False, follow_redirects=False, **kwargs)
