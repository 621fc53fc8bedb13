"""A private `redis-server` process for tests that stop and start the broker. The machine's
Redis is shared with other people and CI: it is never stopped or flushed by a test.

The server keeps nothing on disk (`--save '' --appendonly no`), so a restart loses every queued
message, as a broker without persistence does when it goes down.
"""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

from tests.support.tcp_proxy import free_port

REDIS_SERVER = shutil.which("redis-server") or (
    "/usr/bin/redis-server" if Path("/usr/bin/redis-server").exists() else None
)


class RedisServer:
    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout: float = 10.0) -> RedisServer:
        assert REDIS_SERVER, "redis-server is not installed"
        with open(self.workdir / f"redis-{self.port}.log", "ab") as log:
            self.process = subprocess.Popen(
                [
                    REDIS_SERVER, "--port", str(self.port), "--bind", "127.0.0.1",
                    "--save", "", "--appendonly", "no", "--dir", str(self.workdir),
                ],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout
        while True:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(16).startswith(b"+PONG"):
                        return self
            except OSError:
                pass
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"redis-server on port {self.port} did not start")
            time.sleep(0.05)

    def freeze(self) -> None:
        """SIGSTOP: the broker still holds its connections but answers nothing, as a hung or
        unreachable host (packets dropped, no reset) looks to a client."""
        assert self.process is not None
        self.process.send_signal(signal.SIGSTOP)

    def thaw(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGCONT)

    def stop(self) -> None:
        """SIGKILL: the broker is gone at once, with whatever it held."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGCONT)
            self.process.kill()
            self.process.wait(timeout=10)
        self.process = None
