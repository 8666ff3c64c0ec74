"""Free local ports for parallel stacks, and a precise error when a chosen one is taken."""

from __future__ import annotations

import socket
from contextlib import closing

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


def pick_free(count: int) -> list[int]:
    """Ask the kernel for `count` distinct free ports (held open together so they differ)."""
    socks = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("localhost", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def wait_port_open(port: int, host: str = "localhost", timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False
