"""aiohttp under a policy: the connector's resolver vets every name it connects to.

aiohttp connects to the addresses its resolver returns, so vetting there pins the
connection to what was checked. It never asks the resolver about an address literal:
``check`` (before each request) judges those, with the port.
"""

from __future__ import annotations

import socket

import aiohttp.abc

from egress.guard import Policy, vet_host


class PinnedResolver(aiohttp.abc.AbstractResolver):
    def __init__(self, policy: Policy) -> None:
        self.policy = policy

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[aiohttp.abc.ResolveResult]:
        addresses = await vet_host(host, port, self.policy)
        return [
            {
                "hostname": host,
                "host": str(address),
                "port": port,
                "family": socket.AF_INET6 if address.version == 6 else socket.AF_INET,
                "proto": 0,
                "flags": socket.AI_NUMERICHOST,
            }
            for address in addresses[:1]
        ]

    async def close(self) -> None:
        return None
