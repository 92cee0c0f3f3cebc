"""The Wordn't bot's reasoning (the Wordn't paper), independent of how basis words are found.

`analyse` computes, for the current string, the paper's scenario and a score per
candidate action: BWR for the 52 proposals (sure win, imminent loss with the
stalling rule, challenge, inconclusive) and, for careful opponents, the
average NIR over the next player's proposals S' (assumption 1: the next
player's sure-win proposals; else assumption 2: their proposals with BWR > 0).
`choose` applies the proposal windows (all sure wins; else within t of the best).
`opponent_analysis` plays the paper's two opponent models instead of the bot: naive (any
proposal with basis words, at random) and careful (a sure win if there is one, else any
proposal with BWR > 0, at random); both challenge a word or a dead string as the bot does.

Two providers compute the same numbers: `IndexProvider` (agents/wordnt/index.py,
fast) and `ScanProvider` (agents/wordnt/providers.py, a naive scan of the word list
per proposal: the benchmark's baseline and the tests' cross-check).

Choices made where the paper is silent (limits):
- a proposal that is itself a word counts as all-halting (the next player would
  challenge it at once), even when longer words contain it in the middle;
- when S' is empty because every proposal of the next player has BWR 0 (they
  face an imminent loss), the AVG NIR of our proposal counts as 1;
- the stalling rule picks the highest average basis-word length exactly (ties
  broken at random);
- the current string being a word is challenged first ("challenge word"),
  then a dead string ("challenge dead").
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Protocol

from games.word.wordnt import CHALLENGE_DEAD, CHALLENGE_WORD

SURE_WIN = "sure_win"
IMMINENT_LOSS = "imminent_loss"
INCONCLUSIVE = "inconclusive"
CHALLENGE_A_WORD = "challenge_word"
CHALLENGE_A_DEAD = "challenge_dead"


class Provider(Protocol):
    def is_word(self, s: str) -> bool: ...

    def is_live(self, s: str) -> bool: ...

    def level1(self, c: str, n: int) -> dict[int, tuple[int, int, float]]:
        """For each proposal (action) with basis words: (#basis, #non-halting for its former, avg len)."""
        ...

    def level2(self, c: str, a: int, n: int) -> dict[int, tuple[int, int, int]]:
        """For proposal `a` of `c`, each next proposal with basis words: (#basis, #non-halting for
        the next player, #words non-halting for both us (under `a`) and the next player)."""
        ...


@dataclass
class Analysis:
    scenario: str
    scores: dict[int, float]  # candidate action -> the ratio the choice maximises
    window: float  # t: candidates within this of the best (ignored when the best is 1)
    bwr: dict[int, float] = field(default_factory=dict)

    def best(self) -> float:
        return max(self.scores.values())


def analyse(p: Provider, c: str, n: int, naive: bool, t: float) -> Analysis:
    if c and p.is_word(c):
        return Analysis(CHALLENGE_A_WORD, {CHALLENGE_WORD: 1.0}, 0.0)
    if c and not p.is_live(c):
        return Analysis(CHALLENGE_A_DEAD, {CHALLENGE_DEAD: 1.0}, 0.0)
    l1 = p.level1(c, n)
    if not l1:  # only reachable with a word list whose only word containing c is c itself
        return Analysis(CHALLENGE_A_DEAD, {CHALLENGE_DEAD: 1.0}, 0.0)
    bwr = {a: nh / b for a, (b, nh, _) in l1.items()}
    sure = {a: 1.0 for a, (b, nh, _) in l1.items() if nh == b}
    if sure:
        return Analysis(SURE_WIN, sure, 0.0, bwr)
    if all(nh == 0 for (_, nh, _) in l1.values()):
        return Analysis(IMMINENT_LOSS, {a: avg for a, (_, _, avg) in l1.items()}, 0.0, bwr)
    if naive:
        return Analysis(INCONCLUSIVE, bwr, t, bwr)
    scores: dict[int, float] = {}
    for a, (_, nh, _) in l1.items():
        if nh == 0:
            continue
        l2 = p.level2(c, a, n)
        s_prime = [x for x, (b2, nh2, _) in l2.items() if nh2 == b2]  # assumption 1: sure wins
        if not s_prime:
            s_prime = [x for x, (_, nh2, _) in l2.items() if nh2 > 0]  # assumption 2
        if not s_prime:
            scores[a] = 1.0  # the next player faces an imminent loss (see module limits)
            continue
        scores[a] = sum(l2[x][2] / l2[x][1] for x in s_prime) / len(s_prime)
    return Analysis(INCONCLUSIVE, scores, t, bwr)


def opponent_analysis(an: Analysis, careful: bool) -> Analysis:
    """The paper's naive or careful opponent (section "Assumptions and Strategies for the Inconclusive
    Scenario") from the BWR analysis `an` (analysed with `naive=True`): every candidate scores 1, so
    `choose` draws uniformly among them. A careful opponent with no proposal of BWR > 0 (an imminent
    loss) picks any proposal with basis words, as the naive one does (the paper is silent there)."""
    if an.scenario in (CHALLENGE_A_WORD, CHALLENGE_A_DEAD):
        return an
    pool = list(an.bwr)
    if careful:
        pool = [a for a, v in an.bwr.items() if v >= 1.0] or [a for a, v in an.bwr.items() if v > 0] or pool
    return Analysis(an.scenario, dict.fromkeys(pool, 1.0), 0.0, an.bwr)


def choose(an: Analysis, rng: random.Random) -> tuple[int, list[int]]:
    """The chosen action and the proposal window it was drawn from."""
    best = an.best()
    if an.scenario == IMMINENT_LOSS:  # scores are average lengths, not ratios: the exact maximum
        window = [a for a, v in an.scores.items() if v >= best - 1e-12]
    elif best >= 1.0:
        window = [a for a, v in an.scores.items() if v >= 1.0]
    else:
        window = [a for a, v in an.scores.items() if v >= best - an.window - 1e-12]
    window.sort()
    return rng.choice(window), window
