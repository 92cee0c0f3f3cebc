"""Hostile code world models (tests/cwm_hostile/) through the path of a synthesized candidate
(`research.cwm.candidate.run_candidate`): each attack of issue 25 is blocked, and a model that
patches whatever judges it scores what it really scores. Sleeping forever, allocating 10 GiB
and writing outside its folder are in tests/test_cwm_sandbox.py."""

from __future__ import annotations

import os
import platform
import re
import socket
import subprocess
from pathlib import Path

import pytest

from agents.cwm.reference import reference_code
from agents.cwm.sandbox import Limits, SandboxUnavailable, check_available
from agents.cwm.sandbox_root import seccomp_program
from games.loader import load_game
from research.cwm import trajectories as T
from research.cwm.candidate import DETAIL_CAP, Verdict, run_candidate
from research.cwm.judge import MESSAGE_CAP

try:
    check_available()
except SandboxUnavailable as exc:  # pragma: no cover - the Makefile installs what it needs
    pytest.skip(str(exc), allow_module_level=True)

HERE = Path(__file__).parent / "cwm_hostile"
GOOD = reference_code("tic_tac_toe")
REPO = str(Path(__file__).resolve().parents[1])
LIMITS = Limits(cpu_s=20, memory_mb=512, output_kb=256, processes=16)


def hostile(name: str, **fill: str) -> str:
    """The fixture's code: an `# attack` file in front of the good model, else a whole model."""
    code = (HERE / f"{name}.py.txt").read_text()
    for key, value in fill.items():
        code = code.replace(f"__{key}__", value)
    return code + "\n" + GOOD if code.startswith("# attack") else code


@pytest.fixture(scope="module")
def tests_ttt() -> list[dict]:
    return T.build_tests(load_game("tic_tac_toe"), T.random_trajectories("tic_tac_toe", 2, 3), False)


def attempt(code: str, tests: list[dict]) -> Verdict:
    return run_candidate(code, tests, imperfect=False, limits=LIMITS, tests_timeout_s=60).verdict


def blocked(v: Verdict) -> None:
    """The attack got nothing: the model loads and passes every test (no ATTACK raised)."""
    assert v.reason is None, v.detail
    assert v.passed == v.total > 10


def test_reads_nothing_of_the_host(tests_ttt):
    blocked(attempt(hostile("read_host"), tests_ttt))


def test_exfiltration_finds_nothing_and_is_capped(tests_ttt):
    v = attempt(hostile("exfiltrate"), tests_ttt)
    assert v.reason == "import" and "EXFIL" in v.detail
    assert len(v.detail) <= DETAIL_CAP
    # What the walk of its root found is the interpreter, its libraries and the runner: none of
    # the host's accounts, the checkout, or the environment of the caller.
    for secret in ("root:x:0:0", REPO, "VIRTUAL_ENV", "/etc", "/home", "site-packages", "games"):
        assert secret not in v.detail


def test_no_host_program_runs(tests_ttt):
    blocked(attempt(hostile("subprocesses"), tests_ttt))


def test_host_unix_socket_unreachable(tests_ttt, tmp_path: Path):
    path = str(tmp_path / "host.sock")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(1)
    server.settimeout(0.5)
    os.chmod(path, 0o777)
    os.chmod(tmp_path, 0o777)  # even a socket anyone may use stays out of reach
    try:
        blocked(attempt(hostile("unix_socket", HOST_SOCKET=path), tests_ttt))
        with pytest.raises(TimeoutError):
            server.accept()
    finally:
        server.close()


def test_no_socket_at_all(tests_ttt):
    """Not even a socket is made (the seccomp filter), so nothing is reached: a listener on the
    host's loopback is tests/test_cwm_sandbox.py's network test."""
    blocked(attempt(hostile("network", HOST_PORT="9"), tests_ttt))


def test_fork_bomb_is_capped(tests_ttt):
    v = attempt(hostile("fork_bomb"), tests_ttt)
    assert v.reason == "import", v.detail
    forked = int(re.search(r"FORKED (\d+)", v.detail).group(1))  # type: ignore[union-attr]
    assert forked < LIMITS.processes


def test_ctypes_cannot_reach_libc(tests_ttt):
    blocked(attempt(hostile("ctypes_libc"), tests_ttt))


def test_unprivileged_without_capabilities(tests_ttt):
    blocked(attempt(hostile("privileges"), tests_ttt))


def test_patching_the_judge_changes_no_score(tests_ttt):
    garbage = attempt(hostile("garbage"), tests_ttt)
    assert garbage.reason is None and garbage.passed < garbage.total
    patched = attempt(hostile("patch_judge") + "\n" + hostile("garbage"), tests_ttt)
    assert patched.reason is None
    assert (patched.passed, patched.total) == (garbage.passed, garbage.total)


def test_the_true_game_cannot_be_imported(tests_ttt):
    garbage = attempt(hostile("garbage"), tests_ttt)
    wrapped = attempt(hostile("wrap_true_game") + "\n" + hostile("garbage"), tests_ttt)
    assert wrapped.reason is None, wrapped.detail
    assert (wrapped.passed, wrapped.total) == (garbage.passed, garbage.total)


def test_error_text_is_capped(tests_ttt):
    v = attempt(GOOD + "\n" + hostile("huge_error"), tests_ttt)
    assert v.reason is None and v.passed == 0
    assert all(len(f["message"]) <= MESSAGE_CAP for f in v.failures)
    assert "ValueError" in v.failures[0]["message"]


# x86_64 numbers of the system calls the filter must refuse (the ones issue 25 names and friends).
REFUSED = {
    "socket": 41, "ptrace": 101, "mount": 165, "unshare": 272, "setns": 308, "bpf": 321, "keyctl": 250,
    "process_vm_readv": 310, "perf_event_open": 298, "userfaultfd": 323, "io_uring_setup": 425,
    "add_key": 248, "request_key": 249, "pivot_root": 155, "chroot": 161, "init_module": 175,
}  # fmt: skip

PROBE = """
import ctypes, json, sys
libc = ctypes.CDLL(None, use_errno=True)
out = {}
for name, nr in json.loads(sys.argv[1]).items():
    r = libc.syscall(nr, 0, 0, 0, 0, 0)
    out[name] = ctypes.get_errno() if r < 0 else 0
out["clone3"] = ctypes.get_errno() if libc.syscall(435, 0, 0) < 0 else 0
print(json.dumps(out))
"""


@pytest.mark.skipif(platform.machine() != "x86_64", reason="system call numbers of x86_64")
def test_seccomp_filter_refuses_the_listed_calls(tmp_path: Path):
    """The compiled filter, loaded by bubblewrap around a trusted probe that has ctypes: each call
    answers EPERM (and clone3 ENOSYS, so that the C library falls back to clone)."""
    import json

    prog = tmp_path / "filter.bpf"
    prog.write_bytes(seccomp_program())
    fd = os.open(prog, os.O_RDONLY)
    try:
        out = subprocess.run(
            ["bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--unshare-all", "--seccomp", str(fd), "--",
             "python3", "-c", PROBE, json.dumps(REFUSED)],
            pass_fds=(fd,), capture_output=True, text=True, timeout=60, check=True,
        ).stdout  # fmt: skip
    finally:
        os.close(fd)
    errnos = json.loads(out)
    assert {k: v for k, v in errnos.items() if k != "clone3"} == dict.fromkeys(REFUSED, 1)
    assert errnos["clone3"] == 38


def test_a_value_candidate_cannot_sway_the_tournament():
    """Value functions are ranked by a tournament; a candidate that sabotages the other's searches
    scores exactly what the same candidate without the sabotage scores."""
    from research.cwm.values import ValueCandidate, check_and_rank

    game = load_game("tic_tac_toe")
    init = T.initial_state(game)
    states = [{"state": init, "terminal_rewards": None}]
    heuristic = (
        "def value_function(state, player_id):\n"
        "    if get_current_player(state) == -4:\n"
        "        return float(get_rewards(state)[player_id])\n"
        "    return 0.1 if 'x(1,1)' in state['history'][:1] and player_id == 0 else 0.0\n"
    )
    sabotage = (HERE / "value_sabotage.py.txt").read_text()
    plain = "def value_function(state, player_id):\n    return 0.0\n"

    def scores(other: str) -> list[float]:
        cands = [ValueCandidate("value_0", heuristic), ValueCandidate("value_1", other)]
        choice = check_and_rank(GOOD, cands, states, init, 2, games=2, simulations=20, seed=5)
        assert all(c.ok for c in cands), [c.problem for c in cands]
        return [c.score for c in choice.candidates]

    assert scores(sabotage) == scores(plain)


def test_a_forged_reply_cannot_crash_the_judge(tests_ttt):
    v = attempt(hostile("deep_reply"), tests_ttt)
    assert v.reason == "protocol" and v.passed == 0
