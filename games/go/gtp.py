"""A small Go Text Protocol (GTP version 2) client: one engine process, one command at a time.

    with GtpEngine(["gnugo", "--mode", "gtp"]) as go:
        go.command("boardsize", "7")
        go.command("play", "B", "C3")
        reply = go.command("genmove", "W")          # e.g. "D4", "PASS", "resign"

A command is sent as `<id> <name> <args>`; the answer is read up to its blank line and must
carry the same id: `=id text` is returned, `?id message` raises `GtpError`. Responses are
cleaned as GTP 2 asks (CR and control characters dropped, tabs as spaces). Arguments are
checked before sending (no control characters, no `#`), so a caller cannot smuggle a second
command. If the engine exits, stops answering within the timeout, or answers out of
protocol, `GtpEngineDied` is raised and the process is killed: the engine is in an unknown
state, the caller starts a new one.

Also the mapping between OpenSpiel's Go action ids (row * size + column from `a1`; `size *
size` is pass) and GTP vertices (`A1`, letters without `I`, `PASS`).

Limits: synchronous and single-threaded (an async caller runs it in a thread, one command at a
time); no GTP extensions beyond what the caller sends. The maintained-library check (PyPI's
`gtp` 0.2, 2016; `pygtp` 0.4, 2017; `gomill` 0.8.3, Python 2) found none current, hence this.
"""

from __future__ import annotations

import os
import re
import selectors
import subprocess
import time
from collections.abc import Sequence
from types import TracebackType
from typing import NoReturn

GTP_LETTERS = "ABCDEFGHJKLMNOPQRST"  # GTP skips I; 19 columns at most
_BAD = {chr(c) for c in range(32)} | {chr(127), "#"}
_ANSWER = re.compile(r"([=?])(\d*)[ \n]?(.*)", re.S)


class GtpError(RuntimeError):
    """The engine refused a command (`?` answer); the engine is still fine."""


class GtpEngineDied(RuntimeError):
    """The engine exited, timed out or broke the protocol; it has been killed."""


def _clean(raw: bytes) -> str:
    text = raw.decode("utf-8", errors="replace").replace("\r", "").replace("\t", " ")
    return "".join(ch for ch in text if ch == "\n" or (ord(ch) >= 32 and ord(ch) != 127))


class GtpEngine:
    def __init__(self, argv: Sequence[str], timeout_s: float = 60.0) -> None:
        self.argv = list(argv)
        self.timeout_s = timeout_s
        self._next_id = 1
        self._buf = b""
        self._proc = subprocess.Popen(
            self.argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            bufsize=0,
        )

    @property
    def pid(self) -> int:
        return self._proc.pid

    @property
    def alive(self) -> bool:
        return self._proc.poll() is None

    def command(self, name: str, *args: str, timeout_s: float | None = None) -> str:
        """Send one command; its answer text (without `=id `), or GtpError / GtpEngineDied."""
        for word in (name, *args):
            if not word or " " in word or any(ch in _BAD for ch in word):
                raise ValueError(f"bad GTP word {word!r}")
        cid = self._next_id
        self._next_id += 1
        line = " ".join([str(cid), name, *args]) + "\n"
        assert self._proc.stdin is not None
        try:
            self._proc.stdin.write(line.encode())
            self._proc.stdin.flush()
        except OSError as exc:  # BrokenPipeError included
            self._die(f"cannot write to the engine: {exc}")
        answer = self._read_answer(timeout_s if timeout_s is not None else self.timeout_s)
        m = _ANSWER.match(answer)
        if m is None or m.group(2) != str(cid):
            self._die(f"answer out of protocol for command {cid} ({name}): {answer[:60]!r}")
        if m.group(1) == "?":
            raise GtpError(f"{name}: {m.group(3).strip()}")
        return m.group(3).strip()

    def _read_answer(self, timeout_s: float) -> str:
        assert self._proc.stdout is not None
        fd = self._proc.stdout.fileno()
        deadline = time.monotonic() + timeout_s
        with selectors.DefaultSelector() as sel:
            sel.register(fd, selectors.EVENT_READ)
            while True:
                text = _clean(self._buf)
                # The answer ends at the first blank line after some content.
                stripped = text.lstrip("\n")
                end = stripped.find("\n\n")
                if end >= 0:
                    consumed = len(text) - len(stripped) + end + 2
                    # Drop what we used, in raw bytes: the cleaning never changes b"\n" positions
                    # relative to each other, so cut after the same number of newlines.
                    self._buf = _after_newlines(self._buf, text[:consumed].count("\n"))
                    return stripped[:end]
                left = deadline - time.monotonic()
                if left <= 0:
                    self._die(f"no answer within {timeout_s:g} s")
                if not sel.select(left):
                    continue
                chunk = os.read(fd, 65536)
                if not chunk:
                    self._die(f"the engine exited (code {self._proc.poll()})")
                self._buf += chunk

    def _die(self, why: str) -> NoReturn:
        self.kill()
        raise GtpEngineDied(f"{os.path.basename(self.argv[0])}: {why}")

    def kill(self) -> None:
        if self._proc.poll() is None:
            self._proc.kill()
        try:
            self._proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        for pipe in (self._proc.stdin, self._proc.stdout):
            if pipe is not None:
                pipe.close()

    def close(self) -> None:
        """`quit`, then make sure the process is gone."""
        if self._proc.poll() is None:
            try:
                self.command("quit", timeout_s=5)
            except (GtpError, GtpEngineDied):
                pass
        self.kill()

    def __enter__(self) -> GtpEngine:
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def _after_newlines(raw: bytes, count: int) -> bytes:
    pos = 0
    for _ in range(count):
        pos = raw.index(b"\n", pos) + 1
    return raw[pos:]


def vertex(action: int, size: int) -> str:
    """OpenSpiel Go action id -> GTP vertex (`PASS` for size*size)."""
    if action == size * size:
        return "PASS"
    if not (0 <= action < size * size) or size > len(GTP_LETTERS):
        raise ValueError(f"action {action} is not a point of a {size}x{size} board")
    row, col = divmod(action, size)
    return f"{GTP_LETTERS[col]}{row + 1}"


def action_of(text: str, size: int) -> int | None:
    """GTP vertex -> OpenSpiel Go action id; None for `resign`; ValueError if not a vertex."""
    v = text.strip().upper()
    if v == "PASS":
        return size * size
    if v == "RESIGN":
        return None
    if len(v) < 2 or v[0] not in GTP_LETTERS[:size] or not v[1:].isdigit():
        raise ValueError(f"{text!r} is not a vertex of a {size}x{size} board")
    row = int(v[1:]) - 1
    if not 0 <= row < size:
        raise ValueError(f"{text!r} is not a vertex of a {size}x{size} board")
    return row * size + GTP_LETTERS.index(v[0])
