"""Which network addresses a crawl may connect to: public ones, and the networks a setting
names.

A web page decides where a crawler goes next (its links, its redirects, its sitemap), so a
page on a public site could send the crawler to the loopback interface, the private network
or the cloud's instance metadata service (169.254.169.254) and have what answers there
indexed. The check is made on the address actually connected to, after name resolution,
inside the HTTP client's connection set-up: a host name that resolves to a private address
(or changes its answer between a check and the connection) is refused all the same.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable
from dataclasses import dataclass

import httpcore
import httpx

from lorehouse.errors import SourceError

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class AddressRefused(SourceError):
    """A connection to an address that is neither public nor in an allowed network."""


def parse_networks(value: str | Iterable[str]) -> tuple[IPNetwork, ...]:
    """Networks from CIDRs or single addresses, comma- or space-separated
    ("10.0.0.0/8, 127.0.0.1"); raises ValueError naming an entry that is neither."""
    entries = value.replace(",", " ").split() if isinstance(value, str) else list(value)
    networks = []
    for entry in entries:
        try:
            networks.append(ipaddress.ip_network(entry.strip(), strict=False))
        except ValueError as error:
            raise ValueError(f"{entry!r} is not an address or a network (CIDR)") from error
    return tuple(networks)


@dataclass(frozen=True)
class AddressPolicy:
    """Public addresses are allowed; any other (loopback, private, link-local, shared,
    reserved, multicast) only inside `allowed`."""

    allowed: tuple[IPNetwork, ...] = ()

    def check(self, address: IPAddress, host: str) -> None:
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            address = address.ipv4_mapped  # ::ffff:127.0.0.1 is 127.0.0.1
        if address.is_global and not address.is_multicast:
            return
        if any(address in network for network in self.allowed):
            return
        raise AddressRefused(
            f"{host} is at {address}, a non-public address; a crawl connects there only when "
            "LOREHOUSE_WEB_ALLOWED_NETWORKS names it"
        )


class _GuardedBackend(httpcore.SyncBackend):
    """Resolves the host itself, checks every address, and connects to a checked one."""

    def __init__(self, policy: AddressPolicy) -> None:
        self.policy = policy

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[object] | None = None,
    ) -> httpcore.NetworkStream:
        try:
            found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except (socket.gaierror, UnicodeError) as error:
            raise httpcore.ConnectError(f"{host} does not resolve: {error}") from error
        addresses = list(dict.fromkeys(ipaddress.ip_address(info[4][0]) for info in found))
        for address in addresses:  # every answer, so no round-robin entry slips through
            self.policy.check(address, host)
        last: Exception | None = None
        for address in addresses:
            try:
                return super().connect_tcp(
                    str(address),
                    port,
                    timeout,
                    local_address,
                    socket_options,  # type: ignore[arg-type]
                )
            except httpcore.ConnectError as error:
                last = error
        raise last or httpcore.ConnectError(f"{host} has no address")


class GuardedTransport(httpx.HTTPTransport):
    """httpx's own transport, its connections made through `_GuardedBackend`. TLS still
    verifies the certificate against the host name asked for (httpcore passes the origin's
    host as the server name), whichever checked address the connection went to."""

    def __init__(self, policy: AddressPolicy) -> None:
        super().__init__()
        self._pool = httpcore.ConnectionPool(
            ssl_context=httpx.create_ssl_context(),
            network_backend=_GuardedBackend(policy),
        )
