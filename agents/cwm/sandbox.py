"""A sandbox for code written by a language model: a process in a root of its own.

Every piece of LLM-written code (a code world model, its inference function, its value
functions) runs only inside `Sandbox`, at synthesis time and at play time. The sandbox is
Debian's bubblewrap (`bwrap`) around a small Python worker (`agents.cwm.worker`), with a
seccomp filter compiled by libseccomp and kernel resource limits; `make system-deps` installs
`bubblewrap` and `python3-seccomp`. What the process may do is only answer requests on a pipe:
the code that checks answers and counts passes runs in the caller (`research.cwm.judge`).

What it isolates (each enforced by the kernel, not by Python):

- Root: a fresh tmpfs holding only the system's Python interpreter and its standard library
  (read-only, no site-packages), the shared libraries they load, and the runner (the worker
  and the `agents` modules it imports, copied in read-only at `/cwm/runner`); see
  `agents.cwm.sandbox_root`. No `/etc`, `/proc`, `/run`, `/var`, `/home`, host `/tmp`, project
  tree, virtual environment, games, pyspiel, or scoring code. The model's code arrives over the
  pipe, never as a path. `/tmp` is a tmpfs capped at `tmpfs_mb`, the only writable place;
  `/tmp/cwm/work` is the working directory. `/dev` is bubblewrap's minimal one.
- Who: bubblewrap runs as an unprivileged host uid (the caller's; when the caller is root,
  65534 "nobody"), in new user, mount, PID, IPC, UTS, cgroup and network namespaces, uid 65534
  inside, no capabilities, no further user namespaces (`--disable-userns`). The network
  namespace has only a loopback interface that is down.
- System calls: the seccomp filter (`agents.cwm.seccomp_filter`) refuses socket, ptrace and
  other processes' memory, mount and namespaces, bpf, keys, modules, perf, io_uring, ...;
  it holds for every process inside and cannot be lifted.
- Limits: CPU seconds (`RLIMIT_CPU`), address space (`RLIMIT_AS`: MemoryError), file size
  (`RLIMIT_FSIZE`: stdout, stderr and any file it writes), no core dumps, set before exec;
  processes (`RLIMIT_NPROC`, `processes`, counted in its own user namespace: a fork bomb gets
  EAGAIN), set by the worker on itself before it reads a request. Every call also has a
  wall-clock timeout: past it the whole process group is killed.
- Lifetime: `--die-with-parent` and a session of its own, so the sandbox never outlives
  the agent or the synthesizer; the PID namespace takes every child down with it.
- Replies: one JSON line per request on a pipe of its own (not stdout), read up to
  `reply_kb`; a longer reply kills the sandbox. The model's code can write on that pipe too:
  a reply is parsed as untrusted bytes (unreadable, too deep: `protocol`), and is only ever an
  answer to compare, never a verdict. Its stdout and stderr are files on the host
  opened by the parent (not visible inside), capped by `RLIMIT_FSIZE`.

What it does not do: the interpreter, libc and the kernel are shared with the host (a kernel
or CPython bug reachable through the allowed system calls is not contained); time and CPU
are shared (a candidate can be slow on purpose until its limits); whatever the model computes
is its own (it can lie in its answers, which is what the tests are for).

`Sandbox(sandboxed=False)` runs the same worker and interpreter without bubblewrap, seccomp or
limits: only for the benchmark's baseline and never for untrusted code.
"""

from __future__ import annotations

import json
import os
import resource
import select
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agents.cwm.sandbox_root import (
    INSTALL,
    USERNS_HINT,
    SandboxUnavailable,
    interpreter,
    runner_dir,
    seccomp_program,
)

__all__ = ["Limits", "Sandbox", "SandboxError", "SandboxUnavailable", "check_available"]

NOBODY = 65534  # the uid inside, and the host uid bubblewrap runs as when the caller is root
WORK = "/tmp/cwm/work"
RUNNER = "/cwm/runner"
INSTALL_HINT = f"bubblewrap (bwrap) is needed to run LLM-written code: {INSTALL}"


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
    processes: int = 16
    start_timeout_s: float = 20.0


def bwrap_path() -> str | None:
    return shutil.which("bwrap")


_checked: bool | None = None


def check_available() -> None:
    """Raise `SandboxUnavailable` (one line: what to install or enable) unless a sandbox starts here."""
    global _checked
    if _checked:
        return
    if bwrap_path() is None:
        raise SandboxUnavailable(INSTALL_HINT)
    interp = interpreter()
    seccomp_program()
    cmd = [*_bwrap_args(interp, Limits(), None), "--", interp.python, "-S", "-B", "-c", "import resource"]
    try:
        with _seccomp_fd() as fd:
            proc = subprocess.run(
                [*cmd[:1], "--seccomp", str(fd), *cmd[1:]],
                capture_output=True,
                timeout=30,
                pass_fds=(fd,),
                env=_env(),
                **_drop(),
            )
    except (OSError, subprocess.SubprocessError) as exc:
        raise SandboxUnavailable(f"bubblewrap does not run ({exc}): {INSTALL}") from exc
    if proc.returncode != 0:
        lines = proc.stderr.decode(errors="replace").strip().splitlines()
        said = lines[-1] if lines else f"exit {proc.returncode}"
        hint = USERNS_HINT if "namespace" in said.lower() or "permission" in said.lower() else INSTALL
        raise SandboxUnavailable(f"the sandbox does not start (bwrap: {said}): {hint}")
    _checked = True


class _seccomp_fd:
    """A memfd holding the seccomp program, at offset 0, closed on exit."""

    def __enter__(self) -> int:
        self.fd = os.memfd_create("cwm-seccomp", 0)
        data = seccomp_program()
        view = memoryview(data)
        while view:
            view = view[os.write(self.fd, view) :]
        os.lseek(self.fd, 0, os.SEEK_SET)
        return self.fd

    def __exit__(self, *exc: object) -> None:
        os.close(self.fd)


def _drop() -> dict[str, Any]:
    """Popen arguments that make bubblewrap run as an unprivileged host uid when we are root:
    a process mapped to host root is exempt from RLIMIT_NPROC and owns what root owns."""
    if os.geteuid() != 0:
        return {}
    return {"user": NOBODY, "group": NOBODY, "extra_groups": []}


def _env() -> dict[str, str]:
    return {
        "PATH": "/nonexistent",
        "HOME": WORK,
        "PYTHONPATH": RUNNER,
        "PYTHONHASHSEED": "0",
        "PYTHONUTF8": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
    }


def _bwrap_args(interp: Any, limits: Limits, runner: str | None) -> list[str]:
    cmd = [
        bwrap_path() or "bwrap",
        "--unshare-all", "--unshare-user", "--disable-userns",
        "--uid", str(NOBODY), "--gid", str(NOBODY),
        "--die-with-parent", "--new-session",
        "--dev", "/dev",
        "--ro-bind", interp.python, interp.python,
        "--ro-bind", interp.stdlib, interp.stdlib,
    ]  # fmt: skip
    for d in interp.covered:
        cmd += ["--tmpfs", d, "--remount-ro", d]
    for lib in interp.libs:
        cmd += ["--ro-bind", lib, lib]
    if runner is not None:
        cmd += ["--ro-bind", runner, RUNNER]
    cmd += ["--size", str(limits.tmpfs_mb * 1024 * 1024), "--tmpfs", "/tmp", "--dir", WORK, "--chdir", WORK]
    return cmd


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
        interp = interpreter()
        runner = str(runner_dir())
        self.work_dir = Path(tempfile.mkdtemp(prefix="cwm-sandbox-"))
        req_r, req_w = os.pipe()
        resp_r, resp_w = os.pipe()
        nproc = self.limits.processes if self.sandboxed else 0
        worker = [interp.python, "-S", "-B", "-m", "agents.cwm.worker", str(req_r), str(resp_w), str(nproc)]
        fds: tuple[int, ...] = (req_r, resp_w)
        seccomp = None
        if self.sandboxed:
            seccomp = _seccomp_fd()
            sfd = seccomp.__enter__()
            fds += (sfd,)
            cmd = [*_bwrap_args(interp, self.limits, runner), "--seccomp", str(sfd), "--", *worker]
            env = _env()
            cwd = None
            preexec = self._limit
            drop = _drop()
        else:
            cmd = worker
            env = {**_env(), "HOME": str(self.work_dir), "PYTHONPATH": runner}
            cwd = str(self.work_dir)
            preexec = None
            drop = {}
        try:
            with (
                open(self.work_dir / "stdout.txt", "wb") as out,
                open(self.work_dir / "stderr.txt", "wb") as err,
            ):
                self.proc = subprocess.Popen(
                    cmd,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=err,
                    pass_fds=fds,
                    env=env,
                    cwd=cwd,
                    preexec_fn=preexec,
                    start_new_session=True,
                    **drop,
                )
        finally:
            os.close(req_r)
            os.close(resp_w)
            if seccomp is not None:
                seccomp.__exit__()
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
        try:  # whatever bytes: the model's code can write on this pipe itself
            reply = json.loads(raw)
        except (ValueError, RecursionError) as exc:
            self.close()
            raise SandboxError("protocol", f"unreadable reply ({str(exc)[:200]})") from exc
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
