"""Poker decisions judged against an equilibrium: the expected-value loss of an action, in chips.

The equilibrium is OpenSpiel's CFR+ (`pyspiel.CFRPlusSolver`, Tammelin's CFR+) run on the whole
game until its exploitability is at most `TARGET_EXPLOITABILITY` (0.002 chips per game), or for at
most `iterations` iterations (Kuhn: 100 iterations, a fraction of a second; Leduc: a few hundred,
tens of seconds, once per process); its exploitability (OpenSpiel's `exploitability`, in
chips per game) is named in every row. The project's own solver, CFVFP (`spielbus selfplay
solve`), lives in `research`, which nothing else may import, and converges more slowly than CFR+
(docs/coach.md), so it is not the reference here.

For a decision of player p at information set I, each legal action a has the value

    Q(I, a) = sum_h w(h) u_p(h a) / sum_h w(h)

over the histories h in I, where u_p(h a) is p's expected return (chips) when a is played at h and
everyone follows the equilibrium afterwards, and w(h) is the probability of reaching h by chance and
the other player's equilibrium play (p's own play does not weigh: p knows where it is). The value
before the move is the equilibrium's mix of the Q's, the best action is argmax Q, and the loss is
max Q - Q(I, played): what the action gives away against an equilibrium opponent, in chips, given
what p knew (not the cards the opponent actually held). An information set the other player's
equilibrium never reaches is weighed by chance alone.

The equilibrium can instead be a table the project's own solver wrote: `spielbus selfplay solve
GAME --out FILE` (CFVFP, research/coach/cfvfp.py, one JSON line per information set), given to
`spielbus analyse --equilibrium FILE`; its exploitability is OpenSpiel's (`pyspiel.exploitability`)
and is named in every row the same way. This is how the simplified Hold'em is scored: it is a Python
game, on which OpenSpiel's C++ CFR+ calls back into Python at every state (a 3-rank deck took more
than five minutes), while the vectorised CFVFP solves it in seconds; without a table a Python
imperfect-information game is not scored, and the reason says how to make one.

The bound: two-player zero-sum sequential games whose tree has at most `MAX_HISTORIES` (200,000)
states: Kuhn poker (58), Leduc poker (9,457) and the small-deck simplified Hold'em (3 ranks, 2 suits,
1 hole card, a 1-card flop, stack 10: 5,827) fit; the full 52-card simplified Hold'em does not and is
not scored. Limits: CFR+ after finitely many iterations is an approximate equilibrium; a loss no larger than
its exploitability is counted 0 (the action is "best"), since the reference cannot tell it apart.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from pathlib import Path

import pyspiel
from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from analysis.exact import TooLarge
from analysis.scale import Reference, winning_chances_range
from analysis.verdict import NoReference, Verdict, two_player_zero_sum
from bus.protocol import LegalAction

MAX_HISTORIES = 200_000
DEFAULT_ITERATIONS = 2_000
TARGET_EXPLOITABILITY = 0.002  # chips per game: CFR+ stops here (checked every 100 iterations)


def count_states(game: pyspiel.Game, bound: int) -> int:
    """States of the game tree, counting stops (TooLarge) past `bound`."""
    n, stack = 0, [game.new_initial_state()]
    while stack:
        state = stack.pop()
        n += 1
        if n > bound:
            raise TooLarge(f"more than {bound} states")
        if not state.is_terminal():
            stack.extend(state.child(a) for a in state.legal_actions())
    return n


def _policy(solver: pyspiel.CFRPlusSolver) -> dict[str, dict[int, float]]:
    table = solver.tabular_average_policy().policy_table()
    return {key: dict(pairs) for key, pairs in table.items()}


Table = dict[str, dict[int, float]]


class SolvedInfoset(BaseModel):
    """One line of a `spielbus selfplay solve` table (the fields this reference reads)."""

    model_config = ConfigDict(extra="ignore", strict=True, allow_inf_nan=False)
    game: str
    infoset: str
    legal: list[LegalAction]
    policy: list[float]

    @field_validator("policy")
    @classmethod
    def _distribution(cls, v: list[float]) -> list[float]:
        if any(p < 0 for p in v) or not math.isclose(sum(v), 1.0, abs_tol=1e-6):
            raise ValueError("policy must be non-negative and sum to 1")
        return v


def read_table(path: Path) -> tuple[str, Table]:
    """(the game's label, {information set: {action: probability}}) of a solved table; NoReference
    naming the line for a file that is not one."""
    games: set[str] = set()
    table: Table = {}
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise NoReference(f"equilibrium table {path}: {exc}") from None
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = SolvedInfoset.model_validate(json.loads(line))
        except (json.JSONDecodeError, ValidationError) as exc:
            raise NoReference(f"equilibrium table {path}, line {n}: {exc}") from None
        if len(row.legal) != len(row.policy):
            raise NoReference(f"equilibrium table {path}, line {n}: legal and policy differ in length")
        games.add(row.game)
        table[row.infoset] = {la.id: p for la, p in zip(row.legal, row.policy, strict=True)}
    if len(games) != 1:
        raise NoReference(f"equilibrium table {path}: one game expected, found {sorted(games) or 'none'}")
    return games.pop(), table


class EquilibriumJudge:
    def __init__(
        self,
        game: pyspiel.Game,
        iterations: int = DEFAULT_ITERATIONS,
        target: float = TARGET_EXPLOITABILITY,
        table: tuple[Path, Table] | None = None,
    ) -> None:
        name = game.get_type().short_name
        if not two_player_zero_sum(game, perfect=False):
            raise TooLarge(f"{name} is not a two-player zero-sum sequential game")
        states = count_states(game, MAX_HISTORIES)
        if table is not None:
            path, self.sigma = table
            policy = pyspiel.TabularPolicy({k: list(v.items()) for k, v in self.sigma.items()})
            exploitability = pyspiel.exploitability(game, policy)
            solved = f"CFVFP table {path.name} (spielbus selfplay solve)"
        elif type(game).__module__ != "pyspiel":
            raise NoReference(
                f"{name}: a Python game, too slow for OpenSpiel's CFR+: solve it with "
                f"`spielbus selfplay solve GAME --out FILE` and pass `--equilibrium FILE`"
            )
        else:
            solver = pyspiel.CFRPlusSolver(game)
            done, exploitability = 0, float("inf")
            while done < iterations and exploitability > target:
                for _ in range(min(100, iterations - done)):
                    solver.evaluate_and_update_policy()
                done += min(100, iterations - done)
                exploitability = pyspiel.exploitability(game, solver.average_policy())
            self.sigma = _policy(solver)
            solved = f"CFR+ (OpenSpiel), {done} iterations"
        self.tolerance = max(exploitability, 1e-9)
        self.lo, self.hi = game.min_utility(), game.max_utility()
        # Per information set: sums of w(h) * u_p(h a) per action and of w(h); again weighed by chance only.
        self._num: dict[str, dict[int, float]] = defaultdict(lambda: defaultdict(float))
        self._den: dict[str, float] = defaultdict(float)
        self._num_c: dict[str, dict[int, float]] = defaultdict(lambda: defaultdict(float))
        self._den_c: dict[str, float] = defaultdict(float)
        self._walk(game.new_initial_state(), [1.0, 1.0], 1.0)
        self.reference = Reference(
            name="equilibrium",
            detail=f"{solved}, {states} states, exploitability {exploitability:.2g} chips per game",
            exact=False,
            unit="chips",
            limits="loss against an approximate equilibrium opponent, given the mover's information only",
        )

    def _walk(self, state: pyspiel.State, reach: list[float], chance: float) -> list[float]:
        """Every player's expected return under the equilibrium from `state`, recording Q sums."""
        if state.is_terminal():
            return [float(r) for r in state.returns()]
        if state.is_chance_node():
            out = [0.0, 0.0]
            for a, p in state.chance_outcomes():
                child = self._walk(state.child(a), reach, chance * p)
                out = [o + p * c for o, c in zip(out, child, strict=True)]
            return out
        p = state.current_player()
        key = state.information_state_string(p)
        probs = self.sigma.get(key) or {a: 1 / len(state.legal_actions()) for a in state.legal_actions()}
        w = chance * reach[1 - p]
        out = [0.0, 0.0]
        for a in state.legal_actions():
            pa = probs.get(a, 0.0)
            child_reach = list(reach)
            child_reach[p] *= pa
            child = self._walk(state.child(a), child_reach, chance)
            self._num[key][a] += w * child[p]
            self._num_c[key][a] += chance * child[p]
            out = [o + pa * c for o, c in zip(out, child, strict=True)]
        self._den[key] += w
        self._den_c[key] += chance
        return out

    def action_values(self, state: pyspiel.State) -> dict[int, float]:
        """Q(I, a) for each legal action at the mover's information set, in chips."""
        key = state.information_state_string(state.current_player())
        if self._den[key] > 1e-12:
            num, den = self._num[key], self._den[key]
        else:  # the opponent's equilibrium never comes here: weigh by chance alone
            num, den = self._num_c[key], self._den_c[key]
        return {a: num[a] / den for a in state.legal_actions()}

    def judge(self, game: pyspiel.Game, state: pyspiel.State, history: list[int], action: int) -> Verdict:
        q = self.action_values(state)
        probs = self.sigma.get(state.information_state_string(state.current_player()), {})
        best_action = max(q, key=lambda a: (q[a], a == action))
        best, played = q[best_action], q[action]
        if best - played <= self.tolerance:  # within the equilibrium's own error: a best action
            best_action, best = action, played
        return Verdict(
            value_before=sum(probs.get(a, 0.0) * v for a, v in q.items()),
            value_played=played,
            value_best=best,
            best_action=best_action,
            wc_played=winning_chances_range(played, self.lo, self.hi),
            wc_best=winning_chances_range(best, self.lo, self.hi),
        )
