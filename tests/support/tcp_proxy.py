"""A TCP proxy on 127.0.0.1 that a test can cut and restore, to take a server away from a
process under test (the database from a web process, the judge endpoint from a worker) without
touching the server itself, which other tests and people share.

`cut()` closes the listening socket and every open connection: new connections are refused and
live ones break mid-conversation, as when a database host goes away. `stall()` is the nastier
failure of a host behind a dropped route: connections stay open and new ones are accepted, but
nothing comes back. `restore()` ends either (stalled connections are closed, as TCP would once
the partition outlasted its timeouts) and listens on the same port, so the process under test
reconnects to the address it was configured with.
"""

from __future__ import annotations

import contextlib
import socket
import threading


class TcpProxy:
    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self._lock = threading.Lock()
        self._conns: set[socket.socket] = set()
        self._listener: socket.socket | None = None
        self.port = 0
        self.accepted = 0
        self.stalled = False

    @property
    def up(self) -> bool:
        return self._listener is not None

    def start(self) -> TcpProxy:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        # The port comes back after a cut while closed connections still linger in TIME_WAIT.
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self.port = listener.getsockname()[1]
        with self._lock:
            self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()
        return self

    def cut(self) -> None:
        with self._lock:
            listener, self._listener = self._listener, None
            conns, self._conns = self._conns, set()
        if listener is not None:
            _close(listener)
        for conn in conns:
            _close(conn)

    def stall(self) -> None:
        with self._lock:
            self.stalled = True

    def restore(self) -> TcpProxy:
        if self.stalled:
            with self._lock:
                self.stalled = False
                conns, self._conns = self._conns, set()
            for conn in conns:
                _close(conn)
        if not self.up:
            self.start()
        return self

    stop = cut

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # cut: the listener was closed
            if self.stalled:
                with self._lock:
                    self._conns.add(client)  # accepted, never answered
                continue
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                _close(client)
                continue
            upstream.settimeout(None)
            with self._lock:
                if self._listener is not listener:  # cut while connecting
                    _close(client)
                    _close(upstream)
                    return
                self._conns.update((client, upstream))
                self.accepted += 1
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    def _pipe(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                if not self.stalled:  # stalled: swallowed, as by a dropped route
                    sink.sendall(data)
        except OSError:
            pass
        finally:
            with self._lock:
                self._conns.discard(source)
                self._conns.discard(sink)
            _close(source)
            _close(sink)


def _close(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    with contextlib.suppress(OSError):
        sock.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
