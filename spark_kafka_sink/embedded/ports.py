"""Loopback ports for the embedded nodes: picking free ones and checking given ones."""

from __future__ import annotations

import contextlib
import socket

from .config import HOST
from .errors import PortInUseError


def free_ports(count: int) -> list[int]:
    """``count`` distinct ports that were free on 127.0.0.1 a moment ago (bound together, released)."""
    with contextlib.ExitStack() as stack:
        ports = []
        for _ in range(count):
            sock = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            sock.bind((HOST, 0))
            ports.append(sock.getsockname()[1])
        return ports


def check_free(port: int, what: str = "port") -> None:
    """Raise :class:`PortInUseError` naming ``port`` when something listens on 127.0.0.1:``port``.

    Binds the way the JVM does (``SO_REUSEADDR``), so a port merely in TIME_WAIT counts as free.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((HOST, port))
        except OSError as exc:
            raise PortInUseError(
                f"{what} {HOST}:{port} is already in use ({exc.strerror}); stop whatever listens "
                f"there (e.g. `ss -ltnp 'sport = :{port}'`) or let the launcher pick free ports",
                port) from exc
