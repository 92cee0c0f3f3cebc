"""The sandbox for LLM-written code: each hostile or broken model is a failed attempt with a
reason, and the host is unharmed (no connection made, no file written, the test process fine)."""

from __future__ import annotations

import socket
import threading
from pathlib import Path

import pytest

from agents.cwm.reference import reference_code
from agents.cwm.sandbox import Limits, Sandbox, SandboxUnavailable, check_available
from games.loader import load_game
from research.cwm import trajectories as T
from research.cwm.candidate import run_candidate

try:
    check_available()
except SandboxUnavailable as exc:  # pragma: no cover - the Makefile installs bubblewrap
    pytest.skip(str(exc), allow_module_level=True)

GOOD = reference_code("tic_tac_toe")
SMALL = Limits(cpu_s=8, memory_mb=512, output_kb=256)


@pytest.fixture(scope="module")
def tests_ttt() -> list[dict]:
    return T.build_tests(load_game("tic_tac_toe"), T.random_trajectories("tic_tac_toe", 2, 3), False)


def attempt(code: str, tests: list[dict], timeout: float = 6.0):
    return run_candidate(code, tests, imperfect=False, limits=SMALL, tests_timeout_s=timeout).verdict


def test_reference_model_passes(tests_ttt):
    v = attempt(GOOD, tests_ttt)
    assert v.reason is None and v.passed == v.total > 10


def test_code_that_does_not_parse(tests_ttt):
    v = attempt("def apply_action(state, action)\n    return state\n", tests_ttt)
    assert v.reason == "syntax" and "line 1" in v.detail


def test_raises_at_import(tests_ttt):
    v = attempt("raise RuntimeError('boom at import')\n", tests_ttt)
    assert v.reason == "import" and "boom at import" in v.detail


def test_missing_functions(tests_ttt):
    v = attempt("def apply_action(state, action):\n    return state\n", tests_ttt)
    assert v.reason == "api" and "get_legal_actions" in v.detail


def test_raises_in_a_function(tests_ttt):
    code = GOOD + "\ndef get_rewards(state):\n    raise KeyError('no rewards here')\n"
    v = attempt(code, tests_ttt)
    assert v.reason is None and v.passed == 0
    assert "KeyError" in v.failures[0]["message"] and "no rewards here" in v.failures[0]["message"]


def test_returns_illegal_actions(tests_ttt):
    code = GOOD + (
        "\n_legal = get_legal_actions\ndef get_legal_actions(state):\n    return _legal(state) + ['x(9,9)']\n"
    )
    v = attempt(code, tests_ttt)
    assert v.reason is None and v.passed < v.total
    assert any("illegal actions" in f["message"] and "x(9,9)" in f["message"] for f in v.failures)


def test_infinite_loop_at_import(tests_ttt):
    v = attempt("while True:\n    pass\n", tests_ttt)
    assert v.reason in ("timeout", "cpu")


def test_infinite_loop_in_a_step(tests_ttt):
    code = GOOD + "\ndef apply_action(state, action):\n    while True:\n        pass\n"
    v = attempt(code, tests_ttt, timeout=4.0)
    assert v.reason in ("timeout", "cpu") and v.passed == 0


def test_allocates_gigabytes(tests_ttt):
    code = GOOD + "\nBIG = bytearray(4 * 1024 ** 3)\n"
    v = attempt(code, tests_ttt)
    assert v.reason == "memory"
    code = GOOD + "\ndef get_rewards(state):\n    x = [0] * (2 * 1024 ** 3)\n    return [0.0, 0.0]\n"
    v = attempt(code, tests_ttt)
    assert v.reason is None and v.passed == 0 and "MemoryError" in v.failures[0]["message"]


def test_network_access_fails_and_reaches_nothing(tests_ttt):
    # A listener on the host's loopback: inside the sandbox's network namespace it is unreachable.
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    server.settimeout(3)
    port = server.getsockname()[1]
    accepted: list[object] = []

    def accept() -> None:
        try:
            accepted.append(server.accept())
        except OSError:
            pass

    th = threading.Thread(target=accept)
    th.start()
    code = f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=2)\n" + GOOD
    v = attempt(code, tests_ttt)
    th.join()
    server.close()
    # The seccomp filter refuses the socket itself (issue 25; the network namespace would stop it too).
    assert v.reason == "import" and "Operation not permitted" in v.detail
    assert accepted == []


def test_writes_outside_its_folder(tests_ttt, tmp_path: Path):
    target = tmp_path / "escaped.txt"
    home = Path.home() / f"cwm-escape-{tmp_path.name}.txt"
    code = f"open({str(target)!r}, 'w').write('x')\n" + GOOD
    v = attempt(code, tests_ttt)
    assert v.reason == "import" and not target.exists()
    code = f"open({str(home)!r}, 'w').write('x')\n" + GOOD
    v = attempt(code, tests_ttt)
    assert v.reason == "import" and "No such file or directory" in v.detail and not home.exists()
    # What the sandbox's root holds (the runner) is read-only and not its own.
    v = attempt("open('/cwm/runner/agents/cwm/harness.py', 'a').write('x')\n" + GOOD, tests_ttt)
    assert v.reason == "import" and ("Read-only file system" in v.detail or "Permission denied" in v.detail)
    # Its own folder is writable.
    v = attempt("open('scratch.txt', 'w').write('fine')\n" + GOOD, tests_ttt)
    assert v.reason is None and v.passed == v.total


def test_prints_megabytes(tests_ttt):
    v = attempt(
        "import sys\nsys.stdout.write('y' * (8 * 1024 * 1024))\nsys.stdout.flush()\n" + GOOD, tests_ttt
    )
    assert v.reason == "output"
    code = GOOD + "\ndef get_rewards(state):\n    print('z' * 4_000_000)\n    return [0.0, 0.0]\n"
    v = attempt(code, tests_ttt)
    assert v.passed == 0 and "output limit" in v.failures[0]["message"]


def test_sandbox_survives_model_errors_between_calls():
    with Sandbox(limits=SMALL) as sb:
        assert sb.call("load", code="x = 1/0\n")["error"] == "import"
        assert sb.call("load", code=GOOD)["ok"]
        assert sb.call("api", fn="get_current_player", args=[{"history": [], "text": ""}])["result"] == 0


def test_missing_bubblewrap_is_reported_with_the_install_hint(monkeypatch):
    import agents.cwm.sandbox as sandbox_mod

    monkeypatch.setattr(sandbox_mod, "_checked", None)
    monkeypatch.setattr(sandbox_mod.shutil, "which", lambda _name: None)
    with pytest.raises(SandboxUnavailable, match="apt-get install -y bubblewrap"):
        Sandbox().start()


CHECK_FROM_CHECKOUT = """
import json, sys
from agents.cwm.reference import reference_code
from games.loader import load_game
from research.cwm import trajectories as T
from research.cwm.candidate import run_candidate
import research.cwm.candidate as c
assert c.__file__.startswith(sys.argv[1]), c.__file__
tests = T.build_tests(load_game("tic_tac_toe"), T.random_trajectories("tic_tac_toe", 1, 3), False)
v = run_candidate(reference_code("tic_tac_toe"), tests, imperfect=False).verdict
print(json.dumps([v.passed, v.total, v.reason, v.detail]))
"""


def test_checkout_under_tmp(tmp_path_factory):
    """A checkout under /tmp (a common clone place) runs candidates: nothing of it is bound into
    the sandbox (an earlier sandbox bound it under its own fresh /tmp and could not chdir)."""
    import json
    import shutil
    import subprocess
    import sys
    import tempfile

    repo = Path(__file__).resolve().parents[1]
    files = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=repo,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    checkout = Path(tempfile.mkdtemp(prefix="cwm-checkout-", dir="/tmp"))
    try:
        for rel in files.splitlines():
            src = repo / rel
            if src.is_file() and rel.split("/")[0] in ("agents", "games", "research", "bus"):
                (checkout / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(src, checkout / rel)
        proc = subprocess.run(
            [sys.executable, "-c", CHECK_FROM_CHECKOUT, str(checkout)],
            cwd=checkout, env={"PYTHONPATH": str(checkout), "PATH": "/usr/bin:/bin", "HOME": str(checkout)},
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-2000:]
        passed, total, reason, detail = json.loads(proc.stdout.splitlines()[-1])
        assert reason is None, detail
        assert passed == total > 0
    finally:
        shutil.rmtree(checkout, ignore_errors=True)
