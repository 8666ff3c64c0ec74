"""Free local ports for parallel stacks, and a precise error when a chosen one is taken."""

from __future__ import annotations

import random
import socket
from contextlib import closing
from pathlib import Path
from typing import Collection

from mirrorbook.devstack.errors import PortInUse


def is_free(port: int, host: str = "localhost") -> bool:
    with closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def require_free(port: int, what: str) -> None:
    if not is_free(port):
        raise PortInUse(f"Port {port} (for {what}) is already in use on localhost.",
                        "stop whatever holds it (`ss -ltnp | grep :%d`), or choose another --port-base, "
                        "or omit --port-base to let devstack pick free ports" % port)


def ephemeral_range() -> tuple[int, int]:
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999


def pick_free(count: int, rng: random.Random | None = None, avoid: Collection[int] = ()) -> list[int]:
    """`count` distinct free ports *below* the kernel's ephemeral range, none of `avoid` (ports a stopped
    process of the stack will want back).

    A port the kernel hands out with bind(0) is an ephemeral one: while a broker is down, clients
    retrying to reach it can be given that very port as their own source port (even connect to
    themselves), and the broker cannot listen on it again when it comes back.
    """
    rng = rng or random.Random()
    low = max(1024, min(ephemeral_range()[0], 65536) - 1)
    floor = max(10000, low - 20000) if low > 11000 else 1024
    picked: list[int] = []
    for _ in range(5000):
        port = rng.randrange(floor, low)
        if port not in picked and port not in avoid and is_free(port):
            picked.append(port)
            if len(picked) == count:
                return picked
    raise PortInUse(f"Could not find {count} free ports between {floor} and {low}",
                    "free some ports, or pass --port-base")


def wait_port_open(port: int, host: str = "localhost", timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False
