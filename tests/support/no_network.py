"""Notes every attempt of this process to reach a host other than this machine while a test
watches: an audit hook on ``socket.connect`` and ``socket.getaddrinfo``, installed once per
process (audit hooks cannot be removed) and idle while nobody watches. It only notes, and the
test fails on what it noted: raising in the hook could be swallowed by the library that
tried (a tokenizer download, a tracing client), and would leave no trace."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

LOCAL = {"127.0.0.1", "::1", "localhost", b"127.0.0.1", b"localhost"}

_lock = threading.Lock()
_watchers: list[list[str]] = []
_installed = False


def _hook(event: str, args: tuple[Any, ...]) -> None:
    if not _watchers:
        return
    if event == "socket.connect":
        address = args[1]
        host = address[0] if isinstance(address, tuple) else None
    elif event == "socket.getaddrinfo":
        host = args[0]
    else:
        return
    if host is not None and host not in LOCAL:
        with _lock:
            for seen in _watchers:
                seen.append(f"{event} {host!r}")


@contextmanager
def outside_hosts() -> Iterator[list[str]]:
    """The list of attempts to reach another host made while the block runs."""
    global _installed
    with _lock:
        if not _installed:
            sys.addaudithook(_hook)
            _installed = True
        seen: list[str] = []
        _watchers.append(seen)
    try:
        yield seen
    finally:
        with _lock:
            _watchers.remove(seen)
