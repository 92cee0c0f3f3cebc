"""Trajectories of a game and the unit tests made from them.

A trajectory comes from a match record (`matches.jsonl` of a run folder): its action
ids, chance outcomes included, are replayed on the true OpenSpiel game, which yields at
every step the state, the player to act, the rewards, every seat's observation (the text
the referee sends that seat: `games.view.observation_text`), the legal action texts and
the action taken. Fresh trajectories come from playing `random` against `random` through
the real referee: `research.cwm.record` records them (it runs a tournament, so it lives
with the process supervision; research/cwm/cli.py runs it as a process, agents never import
spielbus).

The state encoding (the "ground truth" state dict of the transition tests) is the same
for every game: `{"history": [action texts so far], "text": str(state)}`: a model must
keep the history and render the game's own state text. For imperfect-information games
the text holds the hidden cards, which only open-deck synthesis may see.

Tests (JSON dicts judged by `research.cwm.judge`):
- `transition` (open deck): at one step, current player, rewards, observations, the set of
  legal actions and the state after the action taken (appendix H.2);
- `inference` (imperfect information, per seat and per turn of that seat): the inference
  function must produce a history that recreates the seat's observations and actions
  (H.3 open deck; H.5 closed deck with `last_is_terminal`, also at the end of the game);
- `random_play` (closed deck): random play on the model runs without error and ends (H.5).
Closed deck keeps only the tests that need no hidden information: inference and random play.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pyspiel

from bus.protocol import GameSpec, MatchRecord
from games.loader import load_game, parse_spec
from games.view import action_text, is_perfect_information, observation_text

TERMINAL = -4


def state_dict(state: pyspiel.State, history: list[str]) -> dict[str, Any]:
    return {"history": list(history), "text": str(state)}


def _legal_texts(state: pyspiel.State) -> list[str]:
    if state.is_terminal():
        return []
    player = state.current_player()
    ids = [a for a, _ in state.chance_outcomes()] if state.is_chance_node() else state.legal_actions()
    return [action_text(state, player, a) for a in ids]


def _player(state: pyspiel.State) -> int:
    return TERMINAL if state.is_terminal() else int(state.current_player())


def _step_view(state: pyspiel.State, history: list[str], n: int) -> dict[str, Any]:
    return {
        "state": state_dict(state, history),
        "current_player": _player(state),
        "rewards": [float(r) for r in state.rewards()],
        "observations": [observation_text(state, p) for p in range(n)],
        "legal_actions": _legal_texts(state),
    }


def replay_ids(game: pyspiel.Game, actions: list[int]) -> list[dict[str, Any]]:
    """One trajectory: a step view per state (the last one terminal or where the record stops),
    each non-last with the `action` text taken from it."""
    state = game.new_initial_state()
    n = game.num_players()
    history: list[str] = []
    steps = []
    for a in actions:
        if state.is_terminal():
            break
        view = _step_view(state, history, n)
        text = action_text(state, state.current_player(), a)
        view["action"] = text
        steps.append(view)
        state.apply_action(a)
        history.append(text)
    steps.append(_step_view(state, history, n))
    return steps


def random_trajectories(game_spec: str | GameSpec, count: int, seed: int) -> list[list[dict[str, Any]]]:
    """Random play on the true game, without the referee (used for held-out test sets)."""
    return played_trajectories(game_spec, count, seed, mcts_share=0.0)  # no MCTS seat: all random


def _mcts_bot(game: pyspiel.Game, simulations: int, seed: int) -> pyspiel.Bot | None:
    """OpenSpiel's C++ MCTS (perfect information) or IS-MCTS (imperfect) on the true game;
    None for our Python games (the C++ bots cannot drive them) or games the bot refuses."""
    if not type(game).__module__.startswith("pyspiel"):
        return None
    evaluator = pyspiel.RandomRolloutEvaluator(1, seed)
    try:
        if is_perfect_information(game):
            return pyspiel.MCTSBot(
                game,
                evaluator,
                2.0,
                simulations,
                1000,
                False,
                seed,
                False,
                pyspiel.ChildSelectionPolicy.UCT,
                -1,
            )
        return pyspiel.ISMCTSBot(
            seed, evaluator, 2.0, simulations, -1, pyspiel.ISMCTSFinalPolicyType.MAX_VISIT_COUNT, False, False
        )
    except (pyspiel.SpielError, RuntimeError, TypeError):
        return None


def played_trajectories(
    game_spec: str | GameSpec, count: int, seed: int, mcts_share: float, simulations: int = 50
) -> list[list[dict[str, Any]]]:
    """Held-out games as in the paper's section 5.1: each player of each game is MCTS on the
    true game with probability `mcts_share`, else random."""
    return held_out_games(game_spec, count, seed, mcts_share, simulations)[0]


def held_out_games(
    game_spec: str | GameSpec, count: int, seed: int, mcts_share: float, simulations: int = 50
) -> tuple[list[list[dict[str, Any]]], float]:
    """`played_trajectories` and the share of seats MCTS actually played: 0 where OpenSpiel's C++
    bots cannot drive the game (our Python games: Quadranto, Hand of war...), whatever was asked."""
    game = load_game(game_spec)
    rng = random.Random(seed)
    bot = _mcts_bot(game, simulations, seed) if mcts_share > 0 else None
    out = []
    seats = smart_seats = 0
    for _ in range(count):
        smart = [bot is not None and rng.random() < mcts_share for _ in range(game.num_players())]
        seats, smart_seats = seats + len(smart), smart_seats + sum(smart)
        state = game.new_initial_state()
        ids = []
        while not state.is_terminal():
            if state.is_chance_node():
                outcomes, probs = zip(*state.chance_outcomes(), strict=True)
                a = rng.choices(outcomes, weights=probs)[0]
            elif bot is not None and smart[state.current_player()]:
                a = int(bot.step(state))
            else:
                a = rng.choice(state.legal_actions())
            ids.append(a)
            state.apply_action(a)
        out.append(replay_ids(game, ids))
    return out, smart_seats / seats if seats else 0.0


def from_run_folder(folder: str | Path, game: str, limit: int) -> list[list[dict[str, Any]]]:
    """Trajectories from a run folder's `matches.jsonl` (finished matches of `game` only: a game
    spec, its parameters included)."""
    label = parse_spec(game).label()
    path = Path(folder) / "matches.jsonl"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file (a run folder has matches.jsonl)")
    out = []
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        rec = MatchRecord.model_validate_json(line)
        if rec.game.label() != label or rec.outcome == "pending" or rec.error:
            continue
        out.append(replay_ids(load_game(rec.game), [m.action for m in rec.moves]))
        if len(out) >= limit:
            break
    return out


# ---- tests --------------------------------------------------------------------------
def transition_tests(trajs: list[list[dict[str, Any]]], prefix: str = "transition") -> list[dict[str, Any]]:
    tests = []
    for ti, steps in enumerate(trajs):
        for si, step in enumerate(steps):
            nxt = steps[si + 1]["state"] if si + 1 < len(steps) and "action" in step else None
            tests.append(
                {
                    "id": f"{prefix}_{ti}_{si}",
                    "kind": "transition",
                    "state": step["state"],
                    "action": step.get("action") if nxt is not None else None,
                    "next_state": nxt,
                    "expect": {
                        k: step[k] for k in ("current_player", "rewards", "observations", "legal_actions")
                    },
                }
            )
    return tests


def obs_action_history(steps: list[dict[str, Any]], seat: int, upto: int) -> list[list[Any]]:
    """The seat's (observation, action) pairs at its own turns before step `upto`, then its
    observation at `upto` with no action (the H.3 argument)."""
    pairs: list[list[Any]] = [
        [s["observations"][seat], s["action"]] for s in steps[:upto] if s["current_player"] == seat
    ]
    pairs.append([steps[upto]["observations"][seat], None])
    return pairs


def spec_of(game: pyspiel.Game) -> str:
    """The spec that loads `game` again (name and every parameter): inference tests carry it, so
    that the judge can replay a resampled history on the true game."""
    params = {k: v for k, v in game.get_parameters().items() if isinstance(v, bool | int | float | str)}
    return GameSpec(name=game.get_type().short_name, params=params).label()


def inference_tests(
    trajs: list[list[dict[str, Any]]],
    num_players: int,
    closed_deck: bool,
    prefix: str = "inference",
    game: str | None = None,
    inference: str = "history",
) -> list[dict[str, Any]]:
    """H.3 / H.5 tests. With `game` (a spec) each also names the true game, on which the judge
    replays the resampled history (every action, chance outcomes included, must be legal there)
    and, at a closed-deck terminal observation, compares the model's reward for the seat with
    the true game's return of that history. With `inference` "state", H.4's tests (the seat's
    turns only; the judge asks `resample_state` for a state showing the last observation)."""
    tests = []
    for ti, steps in enumerate(trajs):
        initial = steps[0]["state"] if not closed_deck else None
        for si, step in enumerate(steps):
            terminal = step["current_player"] == TERMINAL
            seats = range(num_players) if (terminal and closed_deck) else [step["current_player"]]
            for seat in seats:
                if seat < 0:
                    continue
                extra = {"inference": "state"} if inference == "state" else {}
                tests.append(
                    {
                        **extra,
                        "id": f"{prefix}_{ti}_{si}_{seat}",
                        "kind": "inference",
                        "initial_state": initial,
                        "obs_action_history": obs_action_history(steps, seat, si),
                        "player_id": seat,
                        "last_is_terminal": terminal if closed_deck else None,
                        "game": game,
                    }
                )
    return tests


def random_play_tests(initial_state: Any, num_players: int, count: int, seed: int) -> list[dict[str, Any]]:
    return [
        {"id": f"random_play_{i}", "kind": "random_play", "initial_state": initial_state,
         "seed": seed + i, "num_players": num_players}
        for i in range(count)
    ]  # fmt: skip


def initial_state(game: pyspiel.Game) -> dict[str, Any]:
    return state_dict(game.new_initial_state(), [])


def build_tests(
    game: pyspiel.Game,
    trajs: list[list[dict[str, Any]]],
    closed_deck: bool,
    seed: int = 0,
    inference: str = "history",
) -> list[dict[str, Any]]:
    """The unit tests of a synthesis (see the module docstring for what each deck keeps);
    `inference` "state": H.4's hidden-state inference tests instead of H.3's."""
    n = game.num_players()
    perfect = is_perfect_information(game)
    tests: list[dict[str, Any]] = []
    if not closed_deck or perfect:
        tests += transition_tests(trajs)
    if not perfect:
        inf = inference_tests(trajs, n, closed_deck, game=spec_of(game), inference=inference)
        init = initial_state(game)
        for t in inf:
            t["initial_state"] = init
        tests += inf
        if closed_deck:
            tests += random_play_tests(init, n, 3, seed)
    return tests
