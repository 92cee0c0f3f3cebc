"""`wordnt`: the Wordn't bot of the Wordn't paper.

Each turn it rebuilds the true state from `turn.state` (Wordn't is perfect
information), then follows the seed: challenge a word or a dead string; else
BWR over the 52 proposals (sure win / imminent loss with stalling / inconclusive)
and, unless `naive`, the average NIR against careful opponents; proposal windows
with threshold `threshold` (t) pick at random among near-best proposals.

Options: `naive` (BWR alone), `opponent` (`naive` or `careful`: play the paper's opponent model
instead of the bot, for measuring the bot against it), `threshold` (t, default 0.01), `seed`, `cache`
(memoise analyses per (word list, string, players): the analysis depends on
nothing else, and the empty string's careful analysis costs about a second).

Limits: the word index is built once per (word list, min_word_length) per
process (a few seconds for the 110k list, ~50 MB); analyses run in a worker
thread so the agent stays responsive; only the `wordnt` game is accepted.
"""

from __future__ import annotations

import asyncio
import threading
from collections import OrderedDict
from typing import Any, Literal

from pydantic import Field

from agents.base import Decision, MatchContext, Strategy, StrategyOptions, decision_rng, run_cpu
from agents.wordnt.analysis import Analysis, analyse, choose, opponent_analysis
from agents.wordnt.index import WordntIndex, get_index
from agents.wordnt.providers import IndexProvider
from bus.protocol import MatchStarted, MoveStats, Turn
from games.loader import load_game
from games.word.wordnt import CHALLENGE_DEAD, WordntGame, WordntState, action_text

_CACHE_SIZE = 4096
_cache: OrderedDict[tuple[Any, ...], Analysis] = OrderedDict()
_lock = threading.Lock()


class WordntOptions(StrategyOptions):
    naive: bool = Field(default=False, description="BWR only (assumes naive opponents); else AVG NIR")
    threshold: float = Field(default=0.01, ge=0.0, le=1.0, description="proposal window t")
    opponent: Literal["naive", "careful"] | None = Field(
        default=None, description="play the paper's naive or careful opponent model instead of the bot"
    )
    cache: bool = True


def index_for(game: WordntGame) -> WordntIndex:
    with _lock:  # one build per list even when several matches start together
        return get_index(game.words_name, game.min_len)


def cached_analysis(game: WordntGame, c: str, naive: bool, t: float, use_cache: bool = True) -> Analysis:
    key = (game.words_name, game.min_len, c, game.n, naive, t)
    if use_cache:
        with _lock:
            hit = _cache.get(key)
            if hit is not None:
                _cache.move_to_end(key)
                return hit
    an = analyse(IndexProvider(index_for(game)), c, game.n, naive, t)
    if use_cache:
        with _lock:
            _cache[key] = an
            while len(_cache) > _CACHE_SIZE:
                _cache.popitem(last=False)
    return an


def _state_for(turn: Turn, ctx: MatchContext) -> WordntState:
    """The true state, advanced incrementally from the last turn of this match when possible."""
    if turn.state is None:
        raise ValueError("wordnt needs the full action list (`state`) of a perfect-information game")
    game = load_game(turn.game)
    if not isinstance(game, WordntGame):
        raise ValueError(f"the wordnt agent plays only wordnt, not {turn.game.name}")
    cached = ctx.data.get("wordnt_state")
    done = ctx.data.get("wordnt_actions", [])
    if cached is None or turn.state[: len(done)] != done:
        cached, done = game.new_initial_state(), []
    for a in turn.state[len(done) :]:
        cached.apply_action(a)
    ctx.data["wordnt_state"] = cached
    ctx.data["wordnt_actions"] = list(turn.state)
    return cached


class WordntStrategy(Strategy):
    kind = "wordnt"
    version = "1"
    Options = WordntOptions
    games = ("wordnt",)

    def __init__(self, options: WordntOptions) -> None:
        super().__init__(options)
        self.opts = options
        # The opponent models need only the BWR analysis (no NIR: a level-2 search per proposal).
        self._naive = options.naive or options.opponent is not None

    async def match_started(self, msg: MatchStarted, ctx: MatchContext) -> None:
        game = load_game(msg.game)
        if isinstance(game, WordntGame):
            # Build the index, and the empty string's analysis (the costliest, a few hundred ms),
            # before the first turn so that the first move does not eat the clock.
            args = (game, "", self._naive, self.opts.threshold, self.opts.cache)
            await asyncio.to_thread(cached_analysis, *args)

    def decide_sync(self, turn: Turn, ctx: MatchContext) -> Decision:
        state = _state_for(turn, ctx)
        game = state.get_game()
        assert isinstance(game, WordntGame)
        an = cached_analysis(game, state.string, self._naive, self.opts.threshold, self.opts.cache)
        if self.opts.opponent is not None:
            an = opponent_analysis(an, careful=self.opts.opponent == "careful")
        # One RNG per decision, from the seed and the seat's view: reproducible under concurrency.
        action, window = choose(an, decision_rng(self.opts.seed, turn))
        legal = {la.id for la in turn.legal_actions}
        if action not in legal:  # the string is as long as the longest word: it must be dead
            action = CHALLENGE_DEAD
        score = an.scores.get(action)
        note = f"{an.scenario}: {action_text(action)}"
        if score is not None:
            note += f" score={score:.3f} window={len(window)}"
        return Decision(action=action, note=note, stats=MoveStats(nodes=len(an.scores)))

    async def decide(self, turn: Turn, ctx: MatchContext) -> Decision:
        return await run_cpu(ctx.deadline, self.decide_sync, turn, ctx)
