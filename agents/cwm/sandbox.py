"""A sandbox for code written by a language model: a separate process in its own namespaces.

Every piece of LLM-written code (a code world model, its inference function, its value
functions) runs only inside `Sandbox`, at synthesis time and at play time. The sandbox is
Debian's bubblewrap (`bwrap`, package `bubblewrap`, installed by `make system-deps`)
around a Python worker (`agents.cwm.worker`), plus kernel resource limits set before exec.

What it isolates (each enforced by the kernel, not by Python):

- Namespaces (`bwrap --unshare-all`): user, mount, PID, IPC, UTS, cgroup and network.
  The network namespace has only a loopback interface that is down, so no socket can
  reach the host's loopback services or any other address.
- File system: the whole host tree is bind-mounted read-only; `/tmp` is a fresh tmpfs
  capped at `tmpfs_mb` that vanishes with the process, and its own folder `/tmp/cwm/work`
  (the working directory) lies in it: the only place it can write. The model folder is bound
  read-only at `/tmp/cwm/model`. Its stdout and stderr are files on the host, opened by the
  parent in a fresh temporary folder (not visible inside) and capped by `RLIMIT_FSIZE`.
  `/dev` is a minimal devtmpfs, `/proc` its own.
- Limits (`setrlimit` before exec, hard and soft): CPU seconds (`RLIMIT_CPU`, SIGXCPU/SIGKILL
  past it), address space (`RLIMIT_AS`: allocations fail with MemoryError), file size
  (`RLIMIT_FSIZE`: stdout, stderr and any file it writes; SIGXFSZ past it), no core dumps.
  Every call also has a wall-clock timeout: past it the whole process group is killed.
- Lifetime: `--die-with-parent` and a session of its own, so the sandbox never outlives
  the agent or the synthesizer; the PID namespace takes every child down with it.
- Replies: one JSON line per request on a pipe of its own (not stdout), read up to
  `reply_kb`; a longer reply kills the sandbox.

What it does not do: no seccomp filter (system calls inside the namespaces are allowed),
no limit on the number of processes it starts inside its PID namespace other than CPU and
memory, and the harness code that runs the model's functions shares the process with
them, so hostile code can lie about its own test results (the tests measure a model's
correctness, not its honesty; containment is what the sandbox guarantees).

`Sandbox(sandboxed=False)` runs the same worker without bubblewrap or limits: only for
the benchmark's baseline and never for untrusted code.
"""

from __future__ import annotations

import json
import os
import resource
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
INSTALL_HINT = (
    "bubblewrap (bwrap) is needed to run LLM-written code: `apt-get install -y bubblewrap` "
    "(Debian/Ubuntu; `make system-deps` does it), and user namespaces must be allowed"
)


class SandboxUnavailable(RuntimeError):
    """bwrap is missing or cannot create namespaces here."""


class SandboxError(RuntimeError):
    """The sandboxed process failed: `reason` is one word (timeout, cpu, memory, output,
    crashed, protocol), `detail` says more."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail


@dataclass(frozen=True)
class Limits:
    cpu_s: int = 60
    memory_mb: int = 1024
    output_kb: int = 512
    tmpfs_mb: int = 16
    reply_kb: int = 8192
    start_timeout_s: float = 20.0


def bwrap_path() -> str | None:
    return shutil.which("bwrap")


_checked: bool | None = None


def check_available() -> None:
    """Raise `SandboxUnavailable` with the install hint unless bwrap works here."""
    global _checked
    if _checked:
        return
    path = bwrap_path()
    if path is None:
        raise SandboxUnavailable(INSTALL_HINT)
    try:
        proc = subprocess.run(
            [path, "--unshare-all", "--die-with-parent", "--ro-bind", "/", "/", "--dev", "/dev", "true"],
            capture_output=True,
            timeout=20,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SandboxUnavailable(f"{INSTALL_HINT} ({exc})") from exc
    if proc.returncode != 0:
        raise SandboxUnavailable(f"{INSTALL_HINT}; bwrap said: {proc.stderr.decode(errors='replace')[-300:]}")
    _checked = True


def _host_paths_under_tmp() -> list[str]:
    """The code and the Python installation the worker needs, where they live under /tmp."""
    out: list[str] = []
    for p in (REPO_ROOT, Path(sys.prefix), Path(sys.base_prefix), Path(sys.executable).parent):
        real = str(Path(p).resolve())
        if (real == "/tmp" or real.startswith("/tmp/")) and real not in out:
            out.append(real)
    return out


def _tail(path: Path, n: int = 2000) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - n))
            return f.read().decode(errors="replace")
    except OSError:
        return ""


@dataclass
class Sandbox:
    """One long-lived sandboxed worker. `call(op, **args)` sends a request, returns its result.

    A failure of the model's code inside a request comes back as a result (`ok: false`);
    a failure of the process (timeout, limit, crash) raises `SandboxError` and leaves the
    sandbox dead: `start()` again for a fresh one.
    """

    model_dir: Path | None = None
    limits: Limits = field(default_factory=Limits)
    sandboxed: bool = True
    proc: subprocess.Popen[bytes] | None = field(default=None, init=False)
    work_dir: Path | None = field(default=None, init=False)
    _req: int = field(default=-1, init=False)
    _resp: int = field(default=-1, init=False)
    _buf: bytes = field(default=b"", init=False)

    # ---- lifecycle -------------------------------------------------------------------
    def start(self) -> None:
        self.close()
        if self.sandboxed:
            check_available()
        self.work_dir = Path(tempfile.mkdtemp(prefix="cwm-sandbox-"))
        req_r, req_w = os.pipe()
        resp_r, resp_w = os.pipe()
        model = str(Path(self.model_dir).resolve()) if self.model_dir else None
        worker = [sys.executable, "-B", "-m", "agents.cwm.worker", str(req_r), str(resp_w)]
        if self.sandboxed:
            cmd = [
                bwrap_path() or "bwrap",
                "--unshare-all",
                "--die-with-parent",
                "--new-session",
                "--ro-bind", "/", "/",
                "--dev", "/dev",
                "--proc", "/proc",
                "--size", str(self.limits.tmpfs_mb * 1024 * 1024), "--tmpfs", "/tmp",
                "--dir", "/tmp/cwm/work",
            ]  # fmt: skip
            # The fresh /tmp would hide a checkout or a virtual environment that lives under the
            # host's /tmp (a CI clone): bind the interpreter and the code back, read-only.
            for keep in _host_paths_under_tmp():
                cmd += ["--ro-bind", keep, keep]
            if model:
                cmd += ["--ro-bind", model, "/tmp/cwm/model"]
            cmd += ["--chdir", "/tmp/cwm/work", "--", *worker]
            env = {
                "PATH": "/usr/bin:/bin",
                "PYTHONPATH": str(REPO_ROOT),
                "HOME": "/tmp/cwm/work",
                "CWM_MODEL_DIR": "/tmp/cwm/model" if model else "",
                "PYTHONHASHSEED": "0",
            }
            cwd = None
            preexec = self._limit
        else:
            cmd = worker
            env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "CWM_MODEL_DIR": model or ""}
            cwd = str(self.work_dir)
            preexec = None
        with open(self.work_dir / "stdout.txt", "wb") as out, open(self.work_dir / "stderr.txt", "wb") as err:
            self.proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                pass_fds=(req_r, resp_w),
                env=env,
                cwd=cwd,
                preexec_fn=preexec,
                start_new_session=True,
            )
        os.close(req_r)
        os.close(resp_w)
        self._req, self._resp, self._buf = req_w, resp_r, b""
        try:
            self.call("ping", timeout=self.limits.start_timeout_s)
        except SandboxError as exc:
            self.close()
            raise SandboxUnavailable(f"the sandboxed worker did not start: {exc}") from exc

    def _limit(self) -> None:
        """Runs in the child before exec: hard limits that nothing inside can raise."""
        lim = self.limits
        resource.setrlimit(resource.RLIMIT_CPU, (lim.cpu_s, lim.cpu_s + 1))
        mem = lim.memory_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
        out = lim.output_kb * 1024
        resource.setrlimit(resource.RLIMIT_FSIZE, (out, out))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def close(self) -> None:
        proc, self.proc = self.proc, None
        if proc is not None:
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            proc.wait()
        for fd in (self._req, self._resp):
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self._req = self._resp = -1
        if self.work_dir is not None:
            shutil.rmtree(self.work_dir, ignore_errors=True)
            self.work_dir = None

    def __enter__(self) -> Sandbox:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- requests --------------------------------------------------------------------
    def output(self) -> str:
        """The tail of what the code printed (stdout then stderr)."""
        if self.work_dir is None:
            return ""
        return _tail(self.work_dir / "stdout.txt") + _tail(self.work_dir / "stderr.txt")

    def call(self, op: str, timeout: float = 30.0, **args: Any) -> dict[str, Any]:
        if self.proc is None or self.proc.poll() is not None:
            raise SandboxError("crashed", "the sandbox is not running")
        line = json.dumps({"op": op, "args": args}).encode() + b"\n"
        try:
            os.write(self._req, line) if len(line) < 65536 else self._write_all(line)
        except (BrokenPipeError, OSError) as exc:
            raise self._failure(f"request not delivered ({exc})") from exc
        end = time.monotonic() + timeout
        limit = self.limits.reply_kb * 1024
        while b"\n" not in self._buf:
            left = end - time.monotonic()
            if left <= 0:
                self.close()
                raise SandboxError("timeout", f"no answer within {timeout:g}s (killed)")
            ready, _, _ = select.select([self._resp], [], [], left)
            if not ready:
                continue
            chunk = os.read(self._resp, 1 << 16)
            if not chunk:
                raise self._failure("the process ended")
            self._buf += chunk
            if len(self._buf) > limit:
                self.close()
                raise SandboxError("output", f"reply longer than {self.limits.reply_kb} KiB (killed)")
        raw, _, self._buf = self._buf.partition(b"\n")
        try:
            reply = json.loads(raw)
        except json.JSONDecodeError as exc:
            self.close()
            raise SandboxError("protocol", f"unreadable reply ({exc})") from exc
        if not isinstance(reply, dict):
            self.close()
            raise SandboxError("protocol", "reply is not an object")
        return reply

    def _write_all(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            n = os.write(self._req, view)
            view = view[n:]

    def _failure(self, what: str) -> SandboxError:
        proc = self.proc
        code = None
        if proc is not None:
            try:
                code = proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                code = None
        tail = self.output()[-600:]
        self.close()
        sig = (
            code - 128 if code is not None and code > 128 else (-code if code is not None and code < 0 else 0)
        )
        if sig == signal.SIGXCPU:
            return SandboxError("cpu", f"CPU time limit of {self.limits.cpu_s}s exceeded")
        if sig == signal.SIGXFSZ:
            return SandboxError("output", f"wrote more than {self.limits.output_kb} KiB of output")
        if sig == signal.SIGKILL:
            return SandboxError("cpu", f"killed (CPU time limit of {self.limits.cpu_s}s) {tail}".strip())
        if "MemoryError" in tail:
            return SandboxError("memory", f"memory limit of {self.limits.memory_mb} MiB exceeded")
        return SandboxError("crashed", f"{what} (exit {code}) {tail}".strip())
