"""Run one candidate model against its unit tests: the verdict of an attempt.

The model's code runs in a fresh sandbox (`agents.cwm.sandbox`), which only answers calls of
its functions; the tests are judged here, in the trusted process (`research.cwm.judge`).
Whatever the code does (not parse, raise, loop, allocate, print, open sockets, write
files, patch whatever it finds inside), the answer is a `Verdict` with the fraction of tests
passed and, when the code never got to the tests, a one-word `reason` and its detail (capped
at `DETAIL_CAP` characters: it goes into the next prompt and the report). Nothing raises out
of here except `SandboxUnavailable` (no sandbox on this machine: nothing may run at all).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from agents.cwm.harness import cap
from agents.cwm.sandbox import Limits, Sandbox, SandboxError
from research.cwm.judge import RemoteModel, run_tests

# Wall-clock seconds for loading a module and for the whole test batch.
LOAD_TIMEOUT_S = 10.0
TESTS_TIMEOUT_S = 60.0
DETAIL_CAP = 2000


@dataclass
class Verdict:
    passed: int = 0
    total: int = 0
    reason: str | None = None  # syntax, import, api, timeout, cpu, memory, output, crashed, ...
    detail: str = ""
    failures: list[dict[str, Any]] = field(default_factory=list)  # failing tests: id, kind, message

    @property
    def accuracy(self) -> float:
        return self.passed / self.total if self.total else 0.0

    def summary(self) -> str:
        if self.reason:
            return f"{self.reason}: {self.detail[:200]}"
        return f"{self.passed}/{self.total} tests pass"


@dataclass
class Run:
    verdict: Verdict
    results: list[dict[str, Any]] = field(default_factory=list)
    kinds: frozenset[str] = frozenset()  # kinds of test in the run (None accuracy for the others)

    def accuracy(self, kind: str) -> float | None:
        if kind not in self.kinds:
            return None
        rs = [r for r in self.results if r["kind"] == kind]
        if not rs:  # the code never got to the tests
            return 0.0
        return sum(r["ok"] for r in rs) / len(rs)


def run_candidate(
    code: str,
    tests: list[dict[str, Any]],
    *,
    imperfect: bool,
    limits: Limits | None = None,
    tests_timeout_s: float = TESTS_TIMEOUT_S,
    inference: str = "history",
) -> Run:
    v = Verdict(total=len(tests))
    kinds = frozenset(t["kind"] for t in tests)
    sandbox = Sandbox(limits=limits or Limits(cpu_s=int(tests_timeout_s) + 10))
    try:
        sandbox.start()
        loaded = sandbox.call(
            "load", timeout=LOAD_TIMEOUT_S, code=code, name="model", imperfect=imperfect, inference=inference
        )
        if not loaded.get("ok"):
            v.reason, v.detail = str(loaded.get("error"))[:40], cap(str(loaded.get("detail", "")), DETAIL_CAP)
            return Run(v, kinds=kinds)
        results = run_tests(RemoteModel(sandbox, time.monotonic() + tests_timeout_s), tests)
        v.passed = sum(1 for r in results if r["ok"])
        v.failures = [r for r in results if not r["ok"]]
        return Run(v, results, kinds)
    except SandboxError as exc:
        v.reason, v.detail = exc.reason, cap(exc.detail, DETAIL_CAP)
        return Run(v, kinds=kinds)
    finally:
        sandbox.close()
