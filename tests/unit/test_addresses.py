"""Which addresses a crawl may connect to: public ones, and the networks a setting names."""

from __future__ import annotations

import ipaddress

import pytest

from lorehouse.sources.addresses import AddressPolicy, AddressRefused, parse_networks


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1",
        "10.1.2.3",
        "192.168.0.10",
        "172.16.5.4",
        "169.254.169.254",  # the cloud's instance metadata service
        "100.100.100.200",  # shared address space, another cloud's metadata
        "0.0.0.0",
        "::1",
        "fd00:ec2::254",
        "fe80::1",
        "::ffff:127.0.0.1",
        "224.0.0.1",
    ],
)
def test_non_public_addresses_are_refused_unless_named(address: str) -> None:
    with pytest.raises(AddressRefused, match="LOREHOUSE_WEB_ALLOWED_NETWORKS"):
        AddressPolicy().check(ipaddress.ip_address(address), "site.example")
    named = AddressPolicy(parse_networks("::/0, 0.0.0.0/0"))
    named.check(ipaddress.ip_address(address), "site.example")


def test_public_addresses_pass_and_a_named_network_admits_only_itself() -> None:
    AddressPolicy().check(ipaddress.ip_address("93.184.216.34"), "example.com")
    intranet = AddressPolicy(parse_networks("10.20.0.0/16 127.0.0.1"))
    intranet.check(ipaddress.ip_address("10.20.3.4"), "wiki.corp")
    intranet.check(ipaddress.ip_address("127.0.0.1"), "localhost")
    with pytest.raises(AddressRefused):
        intranet.check(ipaddress.ip_address("10.21.0.1"), "other.corp")
    with pytest.raises(AddressRefused):
        intranet.check(ipaddress.ip_address("169.254.169.254"), "metadata")


def test_a_network_that_cannot_be_read_is_named() -> None:
    with pytest.raises(ValueError, match=r"'10\.0\.0\.0/33'"):
        parse_networks("127.0.0.1, 10.0.0.0/33")
