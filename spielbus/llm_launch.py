"""The embedded LLM server for `spielbus run`: started only when an LLM agent has no server.

Which kinds are LLM kinds is stated here by name, because the referee never
imports agent code; an agent of any kind with an `llm` option counts too. The
server runs as `python -m agents llm serve` (llama.cpp on SmolLM2-135M; the tournament's
`[embedded_llm]` chooses llama-cpp-python's server or llama-server with parallel slots) in its own
process; its URL is written into the `llm.base_url` option of each agent that needs it.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from agents.llm.server import ServerKind, serves
from bus.process import die_with_parent, free_port, stop_process

# Not `cwm`: its LLM writes the model before the tournament (`spielbus cwm synthesize`); it plays without one.
LLM_KINDS = frozenset({"llm_policy", "tot", "minimax_tot", "llm_mcts"})


def needs_embedded_llm(kind: str, options: dict[str, Any]) -> bool:
    """An LLM agent whose endpoint names no server and whose environment names none either."""
    llm = options.get("llm")
    if kind not in LLM_KINDS and not isinstance(llm, dict):
        return False
    llm = llm if isinstance(llm, dict) else {}
    if llm.get("base_url"):
        return False
    backend = llm.get("backend", "openai")
    env = "OPENAI_BASE_URL" if backend == "openai" else "OLLAMA_HOST"
    # The embedded server speaks the OpenAI API only; an ollama agent without a host keeps its default.
    return backend == "openai" and not os.environ.get(env)


class LLMServerProcess:
    def __init__(
        self,
        log_path: Path,
        server: ServerKind = "llama-cpp-python",
        parallel: int = 1,
        model: Path | None = None,
    ) -> None:
        self.server = server
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self.log_path = log_path
        log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(log_path, "ab")
        cmd = [
            sys.executable,
            "-m",
            "agents",
            "llm",
            "serve",
            "--port",
            str(self.port),
            "--log",
            str(log_path.with_suffix(".server.log")),
            "--server",
            server,
            "--parallel",
            str(parallel),
        ]
        if model is not None:
            cmd += ["--model", str(model)]
        self.proc = subprocess.Popen(
            cmd,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            preexec_fn=die_with_parent,
        )

    async def wait_ready(self, wait_s: float = 180.0) -> None:
        loop = asyncio.get_running_loop()
        end = loop.time() + wait_s
        while loop.time() < end:
            if self.proc.poll() is not None:
                tail = self.log_path.read_text(errors="replace").splitlines()[-10:]
                raise RuntimeError(
                    f"the embedded LLM server exited with code {self.proc.returncode}:\n" + "\n".join(tail)
                )
            # The server's own probe: llama-server answers /models while it still loads the model,
            # and requests sent then are refused (503 "Loading model").
            if await asyncio.to_thread(serves, self.base_url, self.server):
                return
            await asyncio.sleep(0.3)
        self.stop()
        raise RuntimeError(
            f"the embedded LLM server did not answer within {wait_s:.0f}s; see {self.log_path}"
        )

    def stop(self) -> None:
        stop_process(self.proc, grace_s=15)
        self._log.close()
