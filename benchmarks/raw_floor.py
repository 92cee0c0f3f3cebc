"""An independent floor: NATS request/reply with a minimal client of our own, not nats.py.

The floors the benchmarks print (train_bus.py, engine_match.py) are bare requests through nats.py on
the event loop our processes run on. That client's own cost is part of those floors, so they are
checked here against the least a Python process can do over the same nats-server: a blocking socket,
the NATS text protocol written and parsed by hand (`PUB`, `SUB`, `MSG`, `PING`/`PONG`), no event
loop, no futures, no headers. A child process (this script with `--echo URL`) answers every message
on `echo` with its payload, all the replies of one socket read in one write; the requester keeps
`in_flight` requests out (one round of that many written together, then their replies read).

    .venv/bin/python benchmarks/raw_floor.py [--seconds 3] [--in-flight 1 16]

Limits: no reconnects, no TLS, no auth (an embedded nats-server with none); payloads only as large
as one socket read; not a client for anything but this measurement.
"""

from __future__ import annotations

import argparse
import socket
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

PAYLOAD = b"x" * 600  # about a tic-tac-toe turn with its tensor, as train_bus.py's floor


def _connect(url: str) -> socket.socket:
    host, port = url.removeprefix("nats://").rsplit(":", 1)
    sock = socket.create_connection((host, int(port)))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.sendall(b'CONNECT {"verbose":false,"pedantic":false,"headers":false}\r\n')
    return sock


class Reader:
    """The server's messages off one socket: `MSG` payloads, answering `PING` as it goes."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buf = bytearray()

    def messages(self) -> list[tuple[bytes | None, bytes]]:
        """Every whole `MSG` (reply subject, payload) in the next read (blocks for one)."""
        out: list[tuple[bytes | None, bytes]] = []
        while not out:
            chunk = self.sock.recv(1 << 16)
            if not chunk:
                raise ConnectionError("nats-server closed the connection")
            self.buf += chunk
            while True:
                end = self.buf.find(b"\r\n")
                if end < 0:
                    break
                line = bytes(self.buf[:end])
                if line.startswith(b"MSG "):
                    parts = line.split()
                    size = int(parts[-1])
                    if len(self.buf) < end + 2 + size + 2:
                        break  # the payload is still on its way
                    payload = bytes(self.buf[end + 2 : end + 2 + size])
                    del self.buf[: end + 2 + size + 2]
                    out.append((parts[3] if len(parts) == 5 else None, payload))
                    continue
                del self.buf[: end + 2]
                if line.startswith(b"PING"):
                    self.sock.sendall(b"PONG\r\n")
                elif line.startswith(b"-ERR"):
                    raise ConnectionError(line.decode(errors="replace"))
        return out


def _ready(sock: socket.socket, reader: Reader) -> None:
    """The server has taken everything sent so far (a `PING` answered)."""
    sock.sendall(b"SUB ready.probe 99\r\nPUB ready.probe 0\r\n\r\n")
    reader.messages()
    sock.sendall(b"UNSUB 99\r\n")


def echo(url: str) -> None:
    sock = _connect(url)
    reader = Reader(sock)
    sock.sendall(b"SUB echo 1\r\n")
    _ready(sock, reader)
    print("ready", flush=True)
    while True:
        replies = [
            b"PUB %s %d\r\n%s\r\n" % (reply, len(data), data) for reply, data in reader.messages() if reply
        ]
        sock.sendall(b"".join(replies))


def round_trips(url: str, seconds: float, in_flight: int) -> float:
    """Requests answered per second by an `echo` child, `in_flight` at a time."""
    child = subprocess.Popen(
        [sys.executable, __file__, "--echo", url], stdout=subprocess.PIPE, stdin=subprocess.DEVNULL
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == b"ready"
        sock = _connect(url)
        reader = Reader(sock)
        sock.sendall(b"SUB inbox.* 1\r\n")
        _ready(sock, reader)
        batch = b"".join(
            b"PUB echo inbox.%d %d\r\n%s\r\n" % (i, len(PAYLOAD), PAYLOAD) for i in range(in_flight)
        )
        done = 0
        t0 = time.perf_counter()
        end = t0 + seconds
        while time.perf_counter() < end:
            sock.sendall(batch)
            got = 0
            while got < in_flight:
                got += len(reader.messages())
            done += in_flight
        rate = done / (time.perf_counter() - t0)
        sock.close()
        return rate
    finally:
        child.kill()
        child.wait()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=3.0)
    p.add_argument("--in-flight", type=int, nargs="+", default=[1, 16])
    p.add_argument("--echo", metavar="URL", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.echo:
        echo(args.echo)
        return
    from bus.server import EmbeddedNats

    with EmbeddedNats(jetstream=False) as srv:
        for n in args.in_flight:
            rate = round_trips(srv.url, args.seconds, n)
            print(f"{n:3d} in flight: {rate:8.0f} round trips/s ({1e6 / rate * n:.0f} µs each)")


if __name__ == "__main__":
    main()
