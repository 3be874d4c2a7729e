"""The egress guard's one parser and its judgement of addresses, without any network.

Every spelling a resolver, a browser or an HTTP library accepts for an address means one
address here, and every address that does not lead to the public internet is refused
with the same sentence, whatever kind of address it is.
"""

from __future__ import annotations

import ipaddress
import re

import pytest

import egress
from egress.guard import check, is_public, parse

STRICT = egress.Policy(hint="(hint)")
ANY_PORT = egress.Policy(ports=None, hint="(hint)")
NOT_PUBLIC = "is not a public address the platform can reach. (hint)"

# Spelling -> the address it means (the attacks first).
SPELLINGS = {
    "0x7f00000a": "127.0.0.10",
    "0x7f.0x0.0x0.0xa": "127.0.0.10",
    "0xa9fea9fe": "169.254.169.254",
    "0xa9.0xfe.0xa9.0xfe": "169.254.169.254",
    "2130706433": "127.0.0.1",
    "017700000001": "127.0.0.1",
    "0177.0.0.1": "127.0.0.1",
    "0177.1": "127.0.0.1",
    "127.1": "127.0.0.1",
    "127.0.1": "127.0.0.1",
    "0x7f.1": "127.0.0.1",
    "127.0.0.1.": "127.0.0.1",
    "%31%32%37.0.0.1": "127.0.0.1",
    "\uff11\uff12\uff17\uff0e\uff10\uff0e\uff10\uff0e\uff11": "127.0.0.1",  # full-width
    "0": "0.0.0.0",
    "0x0": "0.0.0.0",
    "3232235777": "192.168.1.1",
    "012.1.2.3": "10.1.2.3",
    "[::1]": "::1",
    "[0:0:0:0:0:0:0:1]": "::1",
    "[::ffff:127.0.0.1]": "::ffff:7f00:1",
    "[::ffff:7f00:1]": "::ffff:7f00:1",
    "[0:0:0:0:0:ffff:a9fe:a9fe]": "::ffff:a9fe:a9fe",
}

NOT_PUBLIC_ADDRESSES = [
    "127.0.0.1", "127.8.9.10", "0.0.0.0", "10.1.2.3", "172.16.0.1", "192.168.1.1",
    "169.254.169.254", "100.64.0.1", "100.127.255.254", "224.0.0.1", "240.0.0.1",
    "255.255.255.255", "192.0.2.1", "198.18.0.1", "198.51.100.7", "203.0.113.9",
    "::", "::1", "fe80::1", "fc00::1", "fd12:3456::1",
    "fd00:ec2::254",  # the EC2 instance metadata service over IPv6
    "fec0::1", "ff02::1", "2001:db8::1",
    "::ffff:127.0.0.1", "::ffff:169.254.169.254", "::ffff:10.0.0.1",  # mapped
    "::127.0.0.1", "::93.184.216.34",  # IPv4-compatible (deprecated)
    "64:ff9b::127.0.0.1", "64:ff9b::a00:1",  # NAT64, well-known prefix
    "64:ff9b:1::a00:1", "64:ff9b:1::5db8:d822",  # NAT64, a network's own prefix
    "2002:7f00:1::1", "2002:a00:1::1", "2002:a9fe:a9fe::1",  # 6to4
    "2001:0:4136:e378:8000:63bf:80ff:fffe",  # Teredo, client 127.0.0.1
    "2001:0:4136:e378:8000:63bf:f5ff:fffe",  # Teredo, client 10.0.0.1
    "2001::1",
]  # fmt: skip

PUBLIC_ADDRESSES = [
    "93.184.216.34", "8.8.8.8", "1.1.1.1", "2606:4700::1111", "2a00:1450:4001::200e",
    "::ffff:93.184.216.34", "64:ff9b::5db8:d822", "2002:5db8:d822::1",
]  # fmt: skip


@pytest.mark.parametrize(("spelling", "address"), SPELLINGS.items())
def test_every_spelling_means_one_address(spelling: str, address: str) -> None:
    target = parse(f"http://{spelling}/x", schemes=("http",))
    assert target.address == ipaddress.ip_address(address)
    assert target.host == str(ipaddress.ip_address(address))


@pytest.mark.parametrize("spelling", SPELLINGS)
@pytest.mark.parametrize("scheme", ["http", "https", "ws", "wss"])
def test_every_spelling_of_a_private_address_is_refused_with_one_sentence(
    spelling: str, scheme: str
) -> None:
    with pytest.raises(egress.EgressRefused) as caught:
        check(f"{scheme}://{spelling}:8080/x", schemes=(scheme,), policy=ANY_PORT)
    assert str(caught.value).endswith(f":8080 {NOT_PUBLIC}")


@pytest.mark.parametrize("address", NOT_PUBLIC_ADDRESSES)
def test_addresses_that_do_not_lead_to_the_internet(address: str) -> None:
    assert not is_public(ipaddress.ip_address(address))


@pytest.mark.parametrize("address", PUBLIC_ADDRESSES)
def test_public_addresses(address: str) -> None:
    assert is_public(ipaddress.ip_address(address))


@pytest.mark.parametrize(
    "host", ["localhost", "LOCALHOST.", "api.localhost", "[::1]", "0x7f000001", "10.0.0.1"]
)
def test_names_and_literals_of_this_machine_are_refused_without_dns(host: str) -> None:
    with pytest.raises(egress.EgressRefused, match=f"{re.escape(NOT_PUBLIC)}$"):
        check(f"https://{host}/", schemes=("https",), policy=STRICT)


def test_a_port_outside_the_policy_reads_as_a_private_address_does() -> None:
    policy = egress.Policy(ports=frozenset({443}), hint="(hint)")
    with pytest.raises(egress.EgressRefused) as port:
        check("https://api.example.com:8716/", schemes=("https",), policy=policy)
    with pytest.raises(egress.EgressRefused) as address:
        check("https://10.0.0.1:443/", schemes=("https",), policy=policy)
    assert str(port.value) == f"api.example.com:8716 {NOT_PUBLIC}"
    assert str(address.value) == f"10.0.0.1:443 {NOT_PUBLIC}"


def test_the_development_policy_allows_any_address_and_port() -> None:
    target = check("ws://0x7f000001:8716/orpheus", schemes=("ws",), policy=egress.OPERATOR)
    assert (target.url, target.port) == ("ws://127.0.0.1:8716/orpheus", 8716)


@pytest.mark.parametrize(
    ("url", "normalised"),
    [
        ("HTTPS://API.Example.COM:443/v1", "https://api.example.com/v1"),
        ("https://api.example.com./v1", "https://api.example.com./v1"),
        ("https://\uff45xample.com/", "https://example.com/"),  # full-width letters
        ("http://0x7f00000a:8080/hook", "http://127.0.0.10:8080/hook"),
    ],
)
def test_what_is_stored_is_what_the_parser_read(url: str, normalised: str) -> None:
    assert parse(url, schemes=("http", "https")).url == normalised


@pytest.mark.parametrize(
    "url", ["http://1.2.3.999/", "http://a.b.0x/", "http://[fe80::1%25eth0]/", "http://ex ample/"]
)
def test_what_is_no_url_says_so(url: str) -> None:
    with pytest.raises(egress.InvalidURL, match="is not a valid URL"):
        parse(url, schemes=("http",))


def test_credentials_and_fragments_are_seen() -> None:
    target = parse("https://user:pw@api.example.com/#frag", schemes=("https",))
    assert target.has_credentials and target.has_fragment


async def test_a_name_is_looked_up_once_and_every_answer_judged() -> None:
    calls: list[str] = []

    async def dns(host: str, port: int) -> list[str]:
        calls.append(host)
        return ["93.184.216.34", "10.0.0.1"]  # one bad answer spoils the set

    with pytest.raises(egress.EgressRefused, match=re.escape(f"mixed.test:443 {NOT_PUBLIC}")):
        await egress.vet_host("mixed.test", 443, STRICT, resolver=dns)
    assert calls == ["mixed.test"]


async def test_an_unknown_name_reads_as_a_private_one_and_says_so_in_development() -> None:
    async def nothing(host: str, port: int) -> list[str]:
        raise OSError("Name or service not known")

    with pytest.raises(egress.EgressRefused, match=re.escape(f"gone.test:443 {NOT_PUBLIC}")):
        await egress.vet_host("gone.test", 443, STRICT, resolver=nothing)
    with pytest.raises(egress.EgressUnreachable, match=r"^could not resolve gone\.test$"):
        await egress.vet_host("gone.test", 443, egress.OPERATOR, resolver=nothing)
