"""What the soak samples per process, read from ``/proc`` (Linux; no extra dependency).

For one pid: RSS (``VmRSS``), threads (entries of ``/proc/<pid>/task``), open file descriptors
(entries of ``/proc/<pid>/fd``), how many of those are sockets, and how many of those sockets are
TCP connections to the broker (a remote port among the broker ports). The last count matches the
process's socket inodes (``readlink`` of each fd: ``socket:[<inode>]``) against the kernel's TCP
tables (``/proc/<pid>/net/tcp`` and ``tcp6``), so a connection in ``TIME_WAIT`` after a close,
which no fd holds any more, is not counted.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

_TCP_LISTEN = "0A"


@dataclass(frozen=True)
class ProcSample:
    """One process at one moment."""

    pid: int
    rss_kb: int
    threads: int
    fds: int
    sockets: int
    broker_connections: int
    """TCP sockets of this process whose remote port is a broker port (any state but LISTEN)."""
    pool_threads: int = 0
    """Threads whose name starts with one of the ``pools`` prefixes given to :func:`sample`."""


def _rss_kb(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def _socket_inodes(pid: int) -> tuple[int, set[int]] | None:
    """(open fd count, inodes of the fds that are sockets), or None if the process is gone."""
    try:
        names = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return None
    inodes: set[int] = set()
    for name in names:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{name}")
        except OSError:  # closed meanwhile
            continue
        if target.startswith("socket:["):
            inodes.add(int(target[8:-1]))
    return len(names), inodes


def tcp_remote_ports(pid: int) -> dict[int, int]:
    """Socket inode -> remote port of every TCP socket (v4 and v6) not listening, in ``pid``'s
    network namespace."""
    ports: dict[int, int] = {}
    for table in ("tcp", "tcp6"):
        try:
            lines = Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) < 10 or fields[3] == _TCP_LISTEN:
                continue
            inode = int(fields[9])
            if inode:
                ports[inode] = int(fields[2].rsplit(":", 1)[1], 16)
    return ports


def sample(pid: int, broker_ports: frozenset[int], tcp: dict[int, int] | None = None,
           pools: tuple[str, ...] = ()) -> ProcSample | None:
    """``pid`` now, or None if it has exited. ``tcp`` is :func:`tcp_remote_ports` when the caller
    samples several processes of one namespace at once. ``pools``: thread name prefixes to count
    apart (a thread's name is its ``comm``, cut at 15 characters)."""
    rss = _rss_kb(pid)
    fds = _socket_inodes(pid)
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    if rss is None or fds is None:
        return None
    count, inodes = fds
    remote = tcp_remote_ports(pid) if tcp is None else tcp
    to_broker = sum(1 for inode in inodes if remote.get(inode) in broker_ports)
    pooled = sum(1 for tid in tids if pools and _thread_name(pid, tid).startswith(pools))
    return ProcSample(pid, rss, len(tids), count, len(inodes), to_broker, pooled)


def _thread_name(pid: int, tid: str) -> str:
    try:
        return Path(f"/proc/{pid}/task/{tid}/comm").read_text().strip()
    except OSError:
        return ""


def process_name(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""
