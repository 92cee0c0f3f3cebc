"""bus/loop.py: which event loop our processes run on, and the switch back to asyncio's."""

from __future__ import annotations

import asyncio
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
