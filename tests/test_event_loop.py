"""bus/loop.py: which event loop our processes run on, the switch back to asyncio's, and the
garbage collector's first threshold."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Iterator
from pathlib import Path

import pytest
import uvloop

from bus import loop as bus_loop

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def test_uvloop_is_the_default_and_asyncio_s_loop_is_one_setting_away(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(bus_loop.ENV_VAR, raising=False)
    assert bus_loop.loop_factory() is uvloop.new_event_loop
    monkeypatch.setenv(bus_loop.ENV_VAR, "asyncio")
    assert bus_loop.loop_factory() is asyncio.new_event_loop
    monkeypatch.setenv(bus_loop.ENV_VAR, " UVLOOP ")
    assert bus_loop.loop_factory() is uvloop.new_event_loop


def test_an_unknown_loop_is_refused_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(bus_loop.ENV_VAR, "trio")
    with pytest.raises(bus_loop.EventLoopChoiceError, match="SPIELBUS_EVENT_LOOP='trio'"):
        bus_loop.loop_factory()


def test_the_command_line_says_so_and_exits_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from spielbus.cli import main

    monkeypatch.setenv(bus_loop.ENV_VAR, "trio")
    assert main(["run", str(EXAMPLES / "quickstart.toml"), "--run-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "SPIELBUS_EVENT_LOOP='trio': use 'uvloop' or 'asyncio'" in err and "Traceback" not in err


def test_run_runs_the_coroutine_on_the_chosen_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    async def which() -> str:
        return type(asyncio.get_running_loop()).__module__

    monkeypatch.delenv(bus_loop.ENV_VAR, raising=False)
    assert bus_loop.run(which()).startswith("uvloop")
    monkeypatch.setenv(bus_loop.ENV_VAR, "asyncio")
    assert bus_loop.run(which()).startswith("asyncio")


@pytest.fixture
def gc_threshold() -> Iterator[None]:
    """The collector's thresholds put back as they were after the test."""
    before = gc.get_threshold()
    yield
    gc.set_threshold(*before)


def test_a_new_loop_raises_python_s_default_gc_threshold_only(
    monkeypatch: pytest.MonkeyPatch, gc_threshold: None
) -> None:
    monkeypatch.delenv(bus_loop.GC_ENV_VAR, raising=False)
    gc.set_threshold(bus_loop.PYTHON_GC_FIRST, 10, 10)
    bus_loop.new_loop().close()
    assert gc.get_threshold() == (bus_loop.GC_FIRST, 10, 10)
    gc.set_threshold(2_500, 10, 10)  # the process chose its own: kept
    bus_loop.new_loop().close()
    assert gc.get_threshold() == (2_500, 10, 10)
    monkeypatch.setenv(bus_loop.GC_ENV_VAR, "700")  # the setting wins, Python's default included
    assert bus_loop.run(asyncio.sleep(0, "ran")) == "ran"
    assert gc.get_threshold() == (700, 10, 10)


@pytest.mark.parametrize("value", ["0", "-5", "ten", "1e4"])
def test_a_bad_gc_threshold_is_refused_by_name_and_the_command_line_exits_2(
    value: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    gc_threshold: None,
) -> None:
    from spielbus.cli import main

    monkeypatch.setenv(bus_loop.GC_ENV_VAR, value)
    with pytest.raises(bus_loop.GcThresholdError, match=f"SPIELBUS_GC_THRESHOLD='{value}'"):
        bus_loop.new_loop()
    assert main(["run", str(EXAMPLES / "quickstart.toml"), "--run-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert f"SPIELBUS_GC_THRESHOLD='{value}'" in err and "Traceback" not in err
