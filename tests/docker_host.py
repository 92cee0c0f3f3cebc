"""A private Docker daemon for the stack test: installed from Debian, started and stopped by PID.

The daemon keeps its images in a data root that survives between test runs on the same machine
(`SPIELBUS_DOCKER_CACHE`, default /var/lib/spielbus-docker), so only the first run on a machine
builds from cold; its socket, exec root and logs live in the test's own folder. It runs with
`--bridge=none --iptables=false --ip-forward=false`: no firewall rules, no NAT, nothing changed
on the host's network. For the stack itself it is restarted inside a network namespace that the
test creates (only a loopback), so the stack's fixed ports cannot meet anything on the host.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

PACKAGES = ("docker.io", "docker-compose", "debootstrap", "busybox-static")
NEEDED = {"dockerd": "docker.io", "docker-compose": "docker-compose", "debootstrap": "debootstrap"}
CACHE = Path(os.environ.get("SPIELBUS_DOCKER_CACHE", "/var/lib/spielbus-docker"))
# Two daemons on one data root corrupt it (two test runs on one machine, or a developer's own
# build beside a test run): each process holds this lock from its first daemon until it exits,
# so a second run waits (its daemon is stopped and restarted inside the namespace in between).
_cache_lock: int | None = None


def _lock_cache() -> None:
    global _cache_lock
    if _cache_lock is not None:
        return
    fd = os.open(str(CACHE.with_name(CACHE.name + ".lock")), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        print(f"waiting for another run's Docker daemon on {CACHE} to finish", flush=True)
        fcntl.flock(fd, fcntl.LOCK_EX)
    _cache_lock = fd


class Unavailable(RuntimeError):
    """Docker cannot be installed or started here; the message says why."""


def install() -> None:
    """Debian's Docker, docker-compose 1.29 and debootstrap, installed when missing."""
    if os.geteuid() != 0:
        raise Unavailable("not root: cannot install or start a Docker daemon")
    if not shutil.which("apt-get"):
        raise Unavailable("no apt-get: install docker.io, docker-compose and debootstrap by hand")
    if all(shutil.which(tool) for tool in NEEDED) and Path("/bin/busybox").exists():
        return
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    # Wait for another apt-get's lock (a `make system-deps` beside this test) instead of failing.
    wait = ["-o", "DPkg::Lock::Timeout=600"]
    for cmd in (
        ["apt-get", "update", "-qq", *wait],
        ["apt-get", "install", "-y", "-qq", *wait, "--no-install-recommends", *PACKAGES],
    ):
        out = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if out.returncode != 0:
            raise Unavailable(f"{' '.join(cmd)} failed: {out.stderr.strip()[-500:]}")


class DockerDaemon:
    """One dockerd, optionally inside a network namespace, on a socket of its own."""

    def __init__(self, workdir: Path, netns: str | None = None) -> None:
        self.workdir = workdir
        self.netns = netns
        self.socket = workdir / "docker.sock"
        self.host = f"unix://{self.socket}"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, "DOCKER_HOST": self.host}

    def start(self, timeout: float = 90.0) -> DockerDaemon:
        CACHE.mkdir(parents=True, exist_ok=True)
        _lock_cache()
        self.workdir.mkdir(parents=True, exist_ok=True)
        cmd = [
            shutil.which("dockerd") or "/usr/sbin/dockerd",
            "--data-root", str(CACHE),
            "--exec-root", str(self.workdir / "exec"),
            "--pidfile", str(self.workdir / "dockerd.pid"),
            "-H", self.host,
            "--iptables=false", "--ip-forward=false", "--bridge=none",
        ]  # fmt: skip
        if self.netns:
            # nsenter enters only the network namespace; `ip netns exec` would also remount /sys
            # in a mount namespace of its own, hiding the cgroup mounts dockerd needs.
            cmd = ["nsenter", f"--net=/run/netns/{self.netns}", *cmd]
        log = (self.workdir / "dockerd.log").open("ab")
        self.proc = subprocess.Popen(
            cmd, stdout=log, stderr=log, stdin=subprocess.DEVNULL, start_new_session=True
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise Unavailable(f"dockerd exited {self.proc.returncode}: {self.log_tail()}")
            if self.docker("info", check=False, timeout=10).returncode == 0:
                return self
            time.sleep(1)
        self.stop()
        raise Unavailable(f"dockerd did not answer within {timeout:.0f}s: {self.log_tail()}")

    def log_tail(self, n: int = 2000) -> str:
        path = self.workdir / "dockerd.log"
        return path.read_text(errors="replace")[-n:] if path.exists() else ""

    def docker(
        self, *args: str, check: bool = True, timeout: float = 600
    ) -> subprocess.CompletedProcess[str]:
        out = subprocess.run(["docker", *args], env=self.env, capture_output=True, text=True, timeout=timeout)
        if check and out.returncode != 0:
            raise AssertionError(f"docker {' '.join(args)} exited {out.returncode}: {out.stderr[-2000:]}")
        return out

    def stop(self) -> None:
        """SIGTERM by PID, then wait; SIGKILL if it will not go."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=30)
        # dockerd leaves its own namespace mount behind under the exec root.
        subprocess.run(["umount", str(self.workdir / "exec" / "netns" / "default")], capture_output=True)


class NetNS:
    """A network namespace with only a loopback, deleted on exit."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __enter__(self) -> NetNS:
        subprocess.run(["ip", "netns", "del", self.name], capture_output=True)
        for cmd in (
            ["ip", "netns", "add", self.name],
            ["ip", "netns", "exec", self.name, "ip", "link", "set", "lo", "up"],
        ):
            out = subprocess.run(cmd, capture_output=True, text=True)
            if out.returncode != 0:
                raise Unavailable(f"{' '.join(cmd)} failed: {out.stderr.strip()}")
        return self

    def __exit__(self, *exc: object) -> None:
        subprocess.run(["ip", "netns", "del", self.name], capture_output=True)

    def run(self, *cmd: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["ip", "netns", "exec", self.name, *cmd], capture_output=True, text=True, timeout=timeout
        )
