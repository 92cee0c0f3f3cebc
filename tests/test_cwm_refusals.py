"""No sandbox, no model run (issue 25): where bubblewrap, libseccomp's binding or user namespaces
are missing, `spielbus cwm synthesize`, `spielbus cwm eval` and the `cwm` agent refuse with one
line saying what to install or enable; nothing falls back to running the model unsandboxed."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

import agents.cwm.sandbox as sandbox_mod
import agents.cwm.sandbox_root as root_mod
from agents.cwm.sandbox import Sandbox, SandboxUnavailable
from research.cwm.model_files import write_reference_dir

REPO = Path(__file__).resolve().parents[1]


def _without_bwrap(tmp_path: Path) -> dict[str, str]:
    """An environment whose PATH has no bwrap (the interpreter is called by its full path)."""
    empty = tmp_path / "bin"
    empty.mkdir(exist_ok=True)
    return {"PYTHONPATH": str(REPO), "PATH": str(empty), "HOME": str(tmp_path)}


def _one_line(stderr: str) -> str:
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, stderr
    return lines[0]


def test_synthesize_and_eval_refuse_without_bubblewrap(tmp_path: Path):
    run = [sys.executable, "-m", "spielbus.cli", "cwm"]
    env = _without_bwrap(tmp_path)
    syn = subprocess.run(
        [*run, "synthesize", "tic_tac_toe", "--llm", "http://127.0.0.1:9/v1", "--out", str(tmp_path / "o")],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert syn.returncode == 2
    assert "apt-get install -y bubblewrap python3-seccomp" in _one_line(syn.stderr)
    assert not (tmp_path / "o").exists()
    write_reference_dir(tmp_path / "m", "tic_tac_toe")
    ev = subprocess.run(
        [*run, "eval", str(tmp_path / "m")], capture_output=True, text=True, env=env, timeout=300
    )
    assert ev.returncode == 2
    assert "apt-get install -y bubblewrap python3-seccomp" in _one_line(ev.stderr)


def test_cwm_agent_refuses_without_bubblewrap(tmp_path: Path, nats_url: str):
    write_reference_dir(tmp_path / "m", "tic_tac_toe")
    proc = subprocess.run(
        [sys.executable, "-m", "agents", "cwm", "--name", "cwm_x", "--model", str(tmp_path / "m"),
         "--nats", nats_url],
        capture_output=True, text=True, env=_without_bwrap(tmp_path), timeout=300,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stdout + proc.stderr
    line = _one_line(proc.stderr)
    assert "runs its model only in the sandbox" in line and "bubblewrap" in line
    assert "ready" not in proc.stdout


@pytest.fixture
def fresh(monkeypatch: pytest.MonkeyPatch) -> None:
    """Forget what was found about this machine, so that the checks run again."""
    monkeypatch.setattr(sandbox_mod, "_checked", None)
    monkeypatch.setattr(root_mod, "_interpreter", None)
    monkeypatch.setattr(root_mod, "_seccomp", None)


def test_missing_seccomp_binding_is_named(fresh, monkeypatch: pytest.MonkeyPatch):
    # This project's interpreter has no `seccomp` module: as the system's would be without the package.
    monkeypatch.setattr(root_mod, "SYSTEM_PYTHONS", (sys.executable,))
    if subprocess.run([sys.executable, "-c", "import seccomp"], capture_output=True).returncode == 0:
        pytest.skip("this interpreter has libseccomp's binding")
    with pytest.raises(SandboxUnavailable, match="python3-seccomp") as info:
        Sandbox().start()
    assert "\n" not in str(info.value)


def test_user_namespaces_off_is_named(fresh, monkeypatch: pytest.MonkeyPatch):
    # A bwrap that answers as bubblewrap does where unprivileged user namespaces are off (in a
    # folder anyone may read: as root, bubblewrap runs as nobody).
    folder = Path(tempfile.mkdtemp(prefix="cwm-fake-bwrap-"))
    try:
        folder.chmod(0o755)
        fake = folder / "bwrap"
        fake.write_text(
            "#!/bin/sh\necho 'bwrap: No permissions to creating new namespace, likely because the kernel "
            "does not allow non-privileged user namespaces.' >&2\nexit 1\n"
        )
        fake.chmod(0o755)
        monkeypatch.setattr(sandbox_mod, "bwrap_path", lambda: str(fake))
        with pytest.raises(SandboxUnavailable, match="user namespaces must be allowed") as info:
            Sandbox().start()
        assert "\n" not in str(info.value)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
