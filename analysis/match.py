"""Scoring a finished match: its moves replayed from the record, each judged by its game's reference.

The reference is chosen per game, first that applies:

    chess                                   Stockfish at fixed nodes (`analysis.chess_engine`)
    ghost                                   the shipped Ghost solver, exact (`analysis.ghost`)
    go                                      GNU Go's score estimate (`analysis.go_engine`)
    small 2-player zero-sum perfect info    exact values (`analysis.exact`, its bound)
    small 2-player zero-sum imperfect info  an equilibrium, in chips (`analysis.equilibrium`): CFR+, or
                                            a CFVFP table (`--equilibrium`; the simplified Hold'em)
    other 2-player zero-sum perfect info    an MCTS estimate with its uncertainty (`analysis.estimate`)

Anything else (simultaneous moves, more than two players, general-sum payoffs, large imperfect-
information games such as the simplified Hold'em) has no reference here: `NoReference` names why
and the match's moves are not scored. Judges are built once per game per process (`Judges`) and
kept: a solve or an equilibrium is paid once.

Chance steps (player -1 in the record) are replayed, not scored; a step the record marks `forced`
(the referee played it for the seat) or the agent marked a fallback (`stats.fallback`: its LLM
failed and it played a stand-in move) is scored and flagged, and left out of the seat's figures:
neither is the agent's own play.
A record whose steps do not replay (an action that is not legal there) stops at that step: the
moves before it are kept, and the error says where.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import pyspiel

from analysis.chess_engine import DEFAULT_NODES, StockfishJudge
from analysis.equilibrium import DEFAULT_ITERATIONS, EquilibriumJudge, Table, read_table
from analysis.estimate import DEFAULT_SIMULATIONS, EstimateJudge
from analysis.exact import ExactJudge, TooLarge
from analysis.ghost import GhostJudge
from analysis.go_engine import DEFAULT_LEVEL, GnuGoJudge
from analysis.scale import MoveAnalysis, accuracy, classify
from analysis.verdict import Judge, NoReference
from bus.protocol import GameSpec, MatchRecord
from games.loader import initial_state, load_game


@dataclass
class Settings:
    nodes: int = DEFAULT_NODES
    stockfish: str | None = None
    iterations: int = DEFAULT_ITERATIONS
    simulations: int = DEFAULT_SIMULATIONS
    gnugo_level: int = DEFAULT_LEVEL
    gnugo: str | None = None
    equilibria: tuple[str, ...] = ()  # `spielbus selfplay solve` tables, each for the game it names


def _key(spec: GameSpec) -> str:
    return spec.model_dump_json()


@dataclass
class Judges:
    """One judge per game (or the reason there is none), built on first use."""

    settings: Settings = field(default_factory=Settings)
    _judges: dict[str, Judge | NoReference] = field(default_factory=dict)
    _engines: list[StockfishJudge | GnuGoJudge] = field(default_factory=list)  # processes to stop
    _tables: dict[str, tuple[Path, Table]] | None = None

    def tables(self) -> dict[str, tuple[Path, Table]]:
        """The solved tables of `settings.equilibria` by game label, read once (NoReference for a bad one)."""
        if self._tables is None:
            tables = {}
            for name in self.settings.equilibria:
                label, table = read_table(Path(name))
                tables[label] = (Path(name), table)
            self._tables = tables
        return self._tables

    def for_game(self, spec: GameSpec, game: pyspiel.Game) -> Judge:
        key = _key(spec)
        if key not in self._judges:
            try:
                self._judges[key] = self._build(spec, game)
            except NoReference as exc:
                self._judges[key] = exc
        judge = self._judges[key]
        if isinstance(judge, NoReference):
            raise judge
        return judge

    def _build(self, spec: GameSpec, game: pyspiel.Game) -> Judge:
        s = self.settings
        name = game.get_type().short_name
        if name in ("chess", "go"):
            engine = (
                StockfishJudge(s.nodes, s.stockfish)
                if name == "chess"
                else GnuGoJudge(spec, s.gnugo_level, s.gnugo)
            )
            self._engines.append(engine)
            return engine
        if name == "ghost":
            return GhostJudge(game)
        t = game.get_type()
        perfect = t.information == pyspiel.GameType.Information.PERFECT_INFORMATION
        try:
            if perfect:
                return ExactJudge(game)
            return EquilibriumJudge(game, s.iterations, table=self.tables().get(spec.label()))
        except TooLarge as exc:
            if not perfect:
                raise NoReference(f"{name}: no equilibrium reference ({exc})") from None
        try:
            return EstimateJudge(game, s.simulations)
        except TooLarge as exc:
            raise NoReference(f"{name}: no reference ({exc})") from None

    def close(self) -> None:
        """Stop the engines, if any run (the next chess or Go match starts another): a worker
        process whose engine still ran could not exit."""
        for engine in self._engines:
            engine.close()
            self._judges = {k: j for k, j in self._judges.items() if j is not engine}
        self._engines = []


def analyse_match(record: MatchRecord, judges: Judges, start: int = 0) -> list[MoveAnalysis]:
    """Every scored move of `record` from step `start` on (the steps before it are replayed, not
    judged: the live analyst judges each new step once). Raises NoReference for a game without a
    reference and ValueError (naming the step) for a record whose steps do not replay."""
    game = load_game(record.game)
    judge = judges.for_game(record.game, game)
    state = initial_state(game)
    history: list[int] = []
    rows: list[MoveAnalysis] = []
    for index, step in enumerate(record.moves):
        if state.is_terminal():
            raise ValueError(f"{record.match_id}: step {index} comes after the end of the game")
        if step.action not in state.legal_actions():
            raise ValueError(f"{record.match_id}: step {index} (action {step.action}) is not legal there")
        if not state.is_chance_node() and index >= start:
            seat = state.current_player()
            started = time.perf_counter()
            v = judge.judge(game, state, history, step.action)
            took = (time.perf_counter() - started) * 1000
            wc_loss = max(0.0, v.wc_best - v.wc_played)
            rows.append(
                MoveAnalysis(
                    match_id=record.match_id,
                    game=record.game.name,
                    index=index,
                    turn=step.turn,
                    seat=seat,
                    agent=step.agent or record.seats[seat],
                    action=step.action,
                    text=step.text,
                    forced=step.forced,
                    fallback=bool(step.stats is not None and (step.stats.model_extra or {}).get("fallback")),
                    value_before=v.value_before + 0.0,  # + 0.0: no -0.0 in the file
                    value_played=v.value_played + 0.0,
                    value_best=v.value_best + 0.0,
                    best_action=v.best_action,
                    best_text=state.action_to_string(seat, v.best_action),
                    loss=max(0.0, v.value_best - v.value_played),
                    wc_loss=wc_loss,
                    wc_played=max(-1.0, min(1.0, v.wc_played)),
                    accuracy=accuracy(wc_loss),
                    cls=classify(wc_loss, v.best_action == step.action),
                    uncertainty=v.uncertainty,
                    cp_loss=v.cp_loss,
                    reference=judge.reference,
                    analysis_ms=took,
                )
            )
        state.apply_action(step.action)
        history.append(step.action)
    return rows
