"""`mcts`: Monte Carlo tree search on the true game (the GT-MCTS / GT-ISMCTS of the Code World Models paper).

- Perfect information: OpenSpiel's C++ `MCTSBot` on the state rebuilt from the
  turn's action list, random-rollout evaluator, UCT. Python games (our word games)
  use OpenSpiel's Python `MCTSBot` instead: the C++ bot crashes the process on
  Python games in open_spiel 2.0.2 (even on its own `python_tic_tac_toe`).
- Imperfect information: single-observer information-set MCTS (ISMCTS) on the
  agents' search core (`agents.tree_search.search`, with `SpielRules` and a random
  rollout evaluator), because OpenSpiel's C++ ISMCTS needs `ResampleFromInfostate`,
  which most games (liars_dice among them) lack. Each simulation plays on a fresh
  determinization: the seat's history is replayed with hidden steps sampled, and
  kept only when it reproduces the seat's information state.
- Limits: simultaneous-move nodes are played uniformly at random (noted in the
  move). ISMCTS stops at 60% of the turn deadline (or earlier, at the runtime's
  per-turn deadline); the C++ MCTS runs exactly `simulations` simulations (it has
  no cap that keeps the count), so size them to the deadline. Searches run on the
  process's CPU executor (one worker per core); a turn that expires while waiting
  for a worker is not searched.
"""

from __future__ import annotations

import random
from collections.abc import Callable

import numpy as np
import pyspiel
from open_spiel.python.algorithms import mcts as py_mcts
from pydantic import Field

from agents.base import Decision, MatchContext, Strategy, StrategyOptions, decision_rng, run_cpu
from agents.tree_search import SIMULTANEOUS, search
from bus.protocol import HistoryItem, MoveStats, Turn
from games.loader import load_game_async, replay
from games.view import is_perfect_information, seat_info


def is_python_game(game: pyspiel.Game) -> bool:
    """A game implemented in Python (registered with pyspiel.register_game), not a C++ one."""
    return not type(game).__module__.startswith("pyspiel")


class MctsOptions(StrategyOptions):
    simulations: int = Field(default=1000, ge=1)
    rollouts: int = Field(
        default=10, ge=1, description="random rollouts per leaf (Code World Models paper: 10)"
    )
    uct_c: float = Field(default=2.0, gt=0)
    determinization_tries: int = Field(default=50, ge=1)
    solve: bool = Field(
        default=True,
        description="perfect information: OpenSpiel's MCTS-Solver (proven wins and losses back up "
        "exactly); false for plain UCT, the search the cwm agent runs on its model",
    )


def determinize(
    game: pyspiel.Game, history: list[HistoryItem], seat: int, target: str, rng: random.Random, tries: int
) -> tuple[pyspiel.State, bool]:
    """A state consistent with what `seat` knows: hidden steps sampled, checked against `target`."""
    state = game.new_initial_state()
    for _ in range(tries):
        state = _sample(game, history, rng)
        if state is not None and seat_info(state, seat) == target:
            return state, True
    return (state if state is not None else game.new_initial_state()), False


def _sample(game: pyspiel.Game, history: list[HistoryItem], rng: random.Random) -> pyspiel.State | None:
    state = game.new_initial_state()
    i = 0
    try:
        while i < len(history):
            if state.is_terminal():
                return None
            if state.is_simultaneous_node():
                joint = []
                for p in range(game.num_players()):
                    item = history[i + p]
                    legal = state.legal_actions(p)
                    if item.action is not None and item.action not in legal:
                        return None
                    joint.append(item.action if item.action is not None else rng.choice(legal))
                state.apply_actions(joint)
                i += game.num_players()
                continue
            item = history[i]
            if item.action is not None:
                # A known step may have become impossible through an earlier sampled one
                # (e.g. our own card dealt to someone else): reject the sample. pyspiel
                # does not check chance actions itself and would build a corrupt state.
                if item.action not in state.legal_actions():
                    return None
                state.apply_action(item.action)
            elif state.is_chance_node():
                outcomes, probs = zip(*state.chance_outcomes(), strict=True)
                state.apply_action(rng.choices(outcomes, weights=probs)[0])
            else:
                state.apply_action(rng.choice(state.legal_actions()))
            i += 1
    except (pyspiel.SpielError, RuntimeError, IndexError):
        return None
    return state


def _rollout(state: pyspiel.State, rng: random.Random) -> list[float]:
    while not state.is_terminal():
        if state.is_chance_node():
            outcomes, probs = zip(*state.chance_outcomes(), strict=True)
            state.apply_action(rng.choices(outcomes, weights=probs)[0])
        elif state.is_simultaneous_node():
            state.apply_actions([rng.choice(state.legal_actions(p)) for p in range(state.num_players())])
        else:
            state.apply_action(rng.choice(state.legal_actions()))
    return list(state.returns())


class SpielRules:
    """OpenSpiel states as the search core's `Rules`, for SO-ISMCTS: nodes keyed by the acting
    player's information state, chance outcomes sampled by their probabilities, simultaneous nodes
    played uniformly at random. States are changed in place (each simulation has its own)."""

    info_sets = True
    intermediate_rewards = False  # the rollout's returns are whole-game returns

    def __init__(self, num_players: int) -> None:
        self.num_players = num_players

    def player(self, state: pyspiel.State) -> int:
        return int(state.current_player())  # OpenSpiel's ids: -1 chance, -2 simultaneous, -4 terminal

    def legal(self, state: pyspiel.State) -> list[int]:
        return list(state.legal_actions())

    def apply(self, state: pyspiel.State, action: int) -> pyspiel.State:
        state.apply_action(action)
        return state

    def sample(self, state: pyspiel.State, player: int, rng: random.Random) -> tuple[pyspiel.State, object]:
        if player == SIMULTANEOUS:
            joint = [rng.choice(state.legal_actions(p)) for p in range(state.num_players())]
            state.apply_actions(joint)
            return state, tuple(joint)
        outcomes, probs = zip(*state.chance_outcomes(), strict=True)
        action = rng.choices(outcomes, weights=probs)[0]
        state.apply_action(action)
        return state, action

    def infoset(self, state: pyspiel.State, player: int) -> str:
        return f"{player}|{seat_info(state, player)}"

    def rewards(self, state: pyspiel.State) -> list[float]:
        return list(state.rewards())


class RandomRolloutEvaluator:
    """OpenSpiel's `RandomRolloutEvaluator` with one rollout on our rng: the returns of random play
    to the end (the state is played out in place). No prior (uniform)."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def prior(self, state: pyspiel.State) -> list[tuple[int, float]]:
        return []

    def evaluate(self, state: pyspiel.State) -> list[float]:
        return _rollout(state, self.rng)


def ismcts_search(
    game: pyspiel.Game,
    sample: Callable[[], pyspiel.State],
    simulations: int,
    uct_c: float,
    rng: random.Random,
    time_limit: float,
) -> tuple[dict[int, int], int]:
    """SO-ISMCTS on the search core, each simulation on a fresh determinization from `sample`
    (the root is the first decision node: the seat's). Returns its visit counts and the
    simulations run."""
    rules = SpielRules(game.num_players())
    out = search(rules, sample, RandomRolloutEvaluator(rng), simulations, uct_c, rng, time_limit)
    return out.root_visits(), out.simulations


class MctsStrategy(Strategy):
    kind = "mcts"
    version = "1"
    Options = MctsOptions

    def __init__(self, options: MctsOptions) -> None:
        super().__init__(options)
        self.opts = options

    async def decide(self, turn: Turn, ctx: MatchContext) -> Decision:
        game = await load_game_async(turn.game)
        limit = ctx.limit(turn)
        budget = max(0.05, min(limit.share(0.6), 0.9 * limit.remaining()))
        if game.get_type().dynamics == pyspiel.GameType.Dynamics.SIMULTANEOUS:
            return Decision(
                action=decision_rng(self.opts.seed, turn).choice(turn.legal_actions).id,
                note="mcts: simultaneous-move node, played at random",
            )
        if is_perfect_information(game) and turn.state is not None:
            return await run_cpu(ctx.deadline, self._perfect, game, turn, budget)
        return await run_cpu(ctx.deadline, self._imperfect, game, turn, budget)

    def _perfect(self, game: pyspiel.Game, turn: Turn, budget: float) -> Decision:
        state = replay(game, turn.state or [])
        seed = decision_rng(self.opts.seed, turn).randrange(2**31)
        if is_python_game(game):
            return self._perfect_python(game, state, seed)
        bot = pyspiel.MCTSBot(
            game,
            pyspiel.RandomRolloutEvaluator(self.opts.rollouts, seed),
            self.opts.uct_c,
            self.opts.simulations,
            1000,
            self.opts.solve,
            seed,
            False,
            pyspiel.ChildSelectionPolicy.UCT,
            # No wall-clock cap: OpenSpiel's C++ bot then searches until the clock runs out and
            # ignores `simulations` altogether. The simulation count is the budget here.
            -1,
        )
        action = bot.step(state)
        return Decision(action=int(action), stats=MoveStats(nodes=self.opts.simulations))

    def _perfect_python(self, game: pyspiel.Game, state: pyspiel.State, seed: int) -> Decision:
        rs = np.random.RandomState(seed)
        bot = py_mcts.MCTSBot(
            game,
            self.opts.uct_c,
            self.opts.simulations,
            py_mcts.RandomRolloutEvaluator(self.opts.rollouts, rs),
            solve=self.opts.solve,
            random_state=rs,
        )
        return Decision(action=int(bot.step(state)), stats=MoveStats(nodes=self.opts.simulations))

    def _imperfect(self, game: pyspiel.Game, turn: Turn, budget: float) -> Decision:
        rng = decision_rng(self.opts.seed, turn)
        tries = self.opts.determinization_tries
        consistent = 0

        def sample() -> pyspiel.State:
            nonlocal consistent
            state, ok = determinize(game, turn.history, turn.seat, turn.observation, rng, tries)
            consistent += ok
            return state

        visits, done = ismcts_search(game, sample, self.opts.simulations, self.opts.uct_c, rng, budget)
        legal = {la.id for la in turn.legal_actions}
        visits = {a: n for a, n in visits.items() if a in legal}
        if not visits:
            return Decision(action=rng.choice(turn.legal_actions).id, note="ismcts: no consistent sample")
        best = max(visits.values())
        action = rng.choice([a for a, n in visits.items() if n == best])
        total = sum(visits.values())
        policy = {str(a): n / total for a, n in sorted(visits.items())}
        return Decision(
            action=action,
            policy=policy,
            stats=MoveStats(nodes=done),
            note=None if consistent == done else f"ismcts: {done - consistent} inconsistent samples",
        )
