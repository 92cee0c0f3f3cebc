"""What the sandbox's root is made of, found once per process on the host.

- The interpreter: the system's Python (`/usr/bin/python3`, Debian's, world-readable, the one
  that has libseccomp's binding), never the project's virtual environment; its standard
  library read-only, run with `-S` (no `site`, so no site-packages or dist-packages on the path,
  and any such folder under the standard library is covered by an empty tmpfs).
- Shared libraries: exactly those `ldd` lists for the interpreter and for the few extension
  modules a game model may need (`STDLIB_EXTENSIONS`); an extension whose library is not there
  (`_ctypes`, `_ssl`, `_sqlite3`, ...) fails to import.
- The runner: the worker and the project modules it imports (found by reading their imports),
  copied into a folder of its own, package `__init__` files empty. Only `agents.*` modules are
  allowed in: a runner that would need a game's implementation, the referee or the research
  code (which scores) is refused.
- The seccomp program: compiled by libseccomp (`agents/cwm/seccomp_filter.py`, run by the system
  interpreter) and kept as bytes.

Everything missing raises `SandboxUnavailable` with one line saying what to install or enable.
"""

from __future__ import annotations

import ast
import atexit
import json
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
SYSTEM_PYTHONS = ("/usr/bin/python3",)
MIN_PYTHON = (3, 10)  # the runner's code (`X | Y` in isinstance)
WORKER_MODULE = "agents.cwm.worker"
RUNNER_PACKAGES = ("agents",)  # the only project packages whose modules may be copied in
STDLIB_EXTENSIONS = (
    "resource", "zlib", "math", "_random", "_json", "_struct", "_bisect", "_heapq", "array",
    "_datetime", "_decimal", "_pickle", "select", "_posixsubprocess", "fcntl", "binascii",
    "unicodedata", "_contextvars", "_statistics", "_queue", "_md5", "_sha1", "_sha256", "_sha512",
    "_blake2", "_csv", "_opcode", "_typing", "_zoneinfo", "_asyncio",
)  # fmt: skip
INSTALL = "apt-get install -y bubblewrap python3-seccomp (Debian/Ubuntu; `make system-deps` does it)"
USERNS_HINT = (
    "unprivileged user namespaces must be allowed "
    "(sysctl kernel.unprivileged_userns_clone=1, or kernel.apparmor_restrict_unprivileged_userns=0 on Ubuntu)"
)


class SandboxUnavailable(RuntimeError):
    """No sandbox can be made here: the message is one line saying what to install or enable."""


@dataclass(frozen=True)
class Interpreter:
    python: str  # real path of the executable
    stdlib: str
    covered: tuple[str, ...]  # package folders under the standard library, hidden by a tmpfs
    libs: tuple[str, ...]  # shared libraries, as the loader looks them up


_PROBE = """
import importlib, json, os, sys, sysconfig
stdlib = sysconfig.get_paths()["stdlib"]
files = []
for name in sys.argv[1:]:
    try:
        f = getattr(importlib.import_module(name), "__file__", None)
    except ImportError:
        continue
    if f and f.endswith(".so"):
        files.append(f)
print(json.dumps({"python": os.path.realpath(sys.executable), "stdlib": stdlib, "ext": files,
                  "version": list(sys.version_info[:2])}))
"""

_interpreter: Interpreter | None = None
_seccomp: bytes | None = None
_runner: Path | None = None


def system_python() -> str:
    for p in SYSTEM_PYTHONS:
        if os.access(p, os.X_OK):
            return p
    raise SandboxUnavailable(f"the sandbox runs the system's Python ({SYSTEM_PYTHONS[0]}), absent: {INSTALL}")


def interpreter() -> Interpreter:
    """The system interpreter, its standard library and the shared libraries they load."""
    global _interpreter
    if _interpreter is not None:
        return _interpreter
    python = system_python()
    try:
        out = subprocess.run(
            [python, "-I", "-S", "-c", _PROBE, *STDLIB_EXTENSIONS],
            capture_output=True,
            timeout=60,
            check=True,
        ).stdout
        info = json.loads(out)
    except (OSError, subprocess.SubprocessError, json.JSONDecodeError) as exc:
        raise SandboxUnavailable(f"{python} does not run ({exc}): {INSTALL}") from exc
    if tuple(info["version"]) < MIN_PYTHON:
        raise SandboxUnavailable(
            f"the sandbox's interpreter {python} is Python {'.'.join(map(str, info['version']))}; "
            f"{'.'.join(map(str, MIN_PYTHON))} or newer is needed (Debian 12 or newer has it)"
        )
    libs: list[str] = []
    for target in [info["python"], *info["ext"]]:
        for lib in _ldd(target):
            if lib not in libs:
                libs.append(lib)
    stdlib = str(info["stdlib"])
    covered = tuple(
        str(Path(stdlib) / d) for d in ("site-packages", "dist-packages") if (Path(stdlib) / d).is_dir()
    )
    _interpreter = Interpreter(str(info["python"]), stdlib, covered, tuple(libs))
    return _interpreter


def _ldd(path: str) -> list[str]:
    """Libraries `path` loads, each as the path the loader opens (`ldd`'s right-hand side)."""
    try:
        ldd = shutil.which("ldd") or "/usr/bin/ldd"
        out = subprocess.run([ldd, path], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        raise SandboxUnavailable(f"ldd (package libc-bin) is needed to build the sandbox: {exc}") from exc
    libs = []
    for line in out.splitlines():
        parts = line.split()
        if (
            "=>" in parts
            and len(parts) > parts.index("=>") + 1
            and parts[parts.index("=>") + 1].startswith("/")
        ):
            libs.append(parts[parts.index("=>") + 1])
        elif parts and parts[0].startswith("/"):
            libs.append(parts[0])  # the loader itself
    return libs


def seccomp_program() -> bytes:
    """The BPF program libseccomp compiles from `agents/cwm/seccomp_filter.py`."""
    global _seccomp
    if _seccomp is not None:
        return _seccomp
    script = Path(__file__).with_name("seccomp_filter.py")
    try:
        proc = subprocess.run([system_python(), "-I", str(script)], capture_output=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as exc:
        raise SandboxUnavailable(f"the seccomp filter could not be built ({exc}): {INSTALL}") from exc
    if proc.returncode != 0 or not proc.stdout or len(proc.stdout) % 8:
        err = proc.stderr.decode(errors="replace").strip().splitlines()
        why = err[-1] if err else f"exit {proc.returncode}"
        raise SandboxUnavailable(f"libseccomp's Python binding is needed for the sandbox ({why}): {INSTALL}")
    _seccomp = proc.stdout
    return _seccomp


def runner_files() -> dict[str, Path]:
    """Relative path in the runner -> source file: the worker and the project modules it imports."""
    files: dict[str, Path] = {}
    todo = [WORKER_MODULE]
    while todo:
        mod = todo.pop()
        src = REPO_ROOT / (mod.replace(".", "/") + ".py")
        rel = mod.replace(".", "/") + ".py"
        if rel in files:
            continue
        if mod.split(".")[0] not in RUNNER_PACKAGES:
            raise RuntimeError(f"the sandbox runner would need {mod}, which must never run inside it")
        files[rel] = src
        for node in ast.walk(ast.parse(src.read_text(), str(src))):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            for name in names:
                if (REPO_ROOT / (name.replace(".", "/") + ".py")).is_file():
                    todo.append(name)
                elif (REPO_ROOT / name.replace(".", "/")).is_dir() and name.split(".")[
                    0
                ] not in RUNNER_PACKAGES:
                    raise RuntimeError(
                        f"the sandbox runner would need {name}, which must never run inside it"
                    )
    return files


def runner_dir() -> Path:
    """The runner, copied once per process into a world-readable temporary folder."""
    global _runner
    if _runner is not None and _runner.is_dir():
        return _runner
    root = Path(tempfile.mkdtemp(prefix="cwm-runner-"))
    atexit.register(shutil.rmtree, root, True)
    for rel, src in runner_files().items():
        dest = root / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dest)
        for pkg in dest.relative_to(root).parents:
            init = root / pkg / "__init__.py"
            if pkg != Path(".") and not init.exists():
                init.write_text("")
    for dirpath, _dirs, names in os.walk(root):
        os.chmod(dirpath, 0o755)
        for n in names:
            os.chmod(os.path.join(dirpath, n), 0o644)
    _runner = root
    return root
