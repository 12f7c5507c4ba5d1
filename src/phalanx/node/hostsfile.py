"""The hosts file of the local network: the lines of each published name (cluster-DNS forms, ``::ffff:`` form
too), as nss_wrapper and ``initwait`` read them.
"""
from __future__ import annotations

import ipaddress

from phalanx.node.alloctable import AllocationTable
from phalanx.objects.names import is_dns_label


def host_names(name: str, namespace: str) -> list[str]:
    """The names a Service answers to, as cluster DNS would give them."""
    return [name, f"{name}.{namespace}", f"{name}.{namespace}.svc", f"{name}.{namespace}.svc.cluster.local"]


def render_hosts(t: AllocationTable) -> str:
    """The hosts file of the table's published entries, sorted (each entry's lines cached in the table)."""
    # No comment lines: nss_wrapper refuses a hosts file that has any.
    blocks = t.hosts_blocks
    out = []
    for key in sorted(t.published):
        block = blocks.get(key)
        if block is None:
            block = blocks[key] = hosts_block(key, t.published[key]["address"])
        out.append(block)
    return "".join(out)


def hosts_block(key: str, address: str) -> str:
    """The hosts lines of one entry: the address and its ``::ffff:`` form."""
    ns, _, name = key.partition("/")
    if not (is_dns_label(ns) and is_dns_label(name)):
        return ""
    names = " ".join(host_names(name, ns))
    block = f"{address} {names}\n"
    mapped = v4_mapped(address)
    return block + (f"{mapped} {names}\n" if mapped else "")


def v4_mapped(address: str) -> str | None:
    """``::ffff:a.b.c.d`` for an IPv4 address, else None.

    nss_wrapper ignores ``AI_V4MAPPED``: without this line an IPv6 lookup of
    the name fails (EAI_FAMILY), and torch's TCPStore client looks up IPv6
    first and retries that until it times out, so MASTER_ADDR never connects.
    """
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return None
    return f"::ffff:{ip}" if ip.version == 4 else None
