"""`cwm`: plays with (IS)MCTS on a synthesized code world model (CWM-(IS)MCTS of "Code World
Models for General Game Playing", Lehrach, Hennes, Lázaro-Gredilla et al.).

- One long-lived sandbox per agent (`agents.cwm.sandbox`) holds the model (and its value
  function); the whole search runs inside it: only the turn goes in (action texts of the
  history, or the seat's observation/action history) and the chosen action text comes out.
- Perfect information: the history's action texts are replayed on the model from its initial
  state, then MCTS (`simulations`, `rollouts` random rollouts per leaf or the value function).
- Imperfect information: the seat's (observation, action) pairs are kept per match; the
  model's inference function resamples histories (appendix H.6, up to 10 tries each,
  `determinizations` of them) and SO-ISMCTS searches over those states.
- The agent always answers in time: if the model fails (exception, no legal action, an
  action the referee did not offer, timeout, inference failure), a random legal action of the
  turn is played and the failure counted; with `forfeit_on_model_error` it answers no action
  instead, and the referee's fault policy (forfeit by default) decides, as the paper's player
  forfeits when it gives no valid action. Each move's stats
  carry `model_failures` (this match) and `online_transition_accuracy` over every step this
  agent has observed so far, all its matches together: each turn (the model agreed with the
  referee on player, observation and legal actions) and each match's final step, which the
  agent learns from `match_ended` (its `history` and `observation`: the model must end the
  game there, with the seat's observation and the returns the referee announced); a model
  without diagonal wins at tic-tac-toe agrees at every turn and fails only there.
  `online_steps` counts those steps; imperfect-information games add
  `online_inference_accuracy` (steps where the inference function recreated the observation).

Limits: a turn's search stops at `time_fraction` of its deadline; concurrent matches share
the one sandbox (a lock), so they queue.
"""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path
from typing import Any

from pydantic import Field, field_validator

from agents.base import Decision, MatchContext, Strategy, StrategyOptions, decision_rng
from agents.cwm.harness import TERMINAL, norm
from agents.cwm.model_dir import ModelDirError, load_meta
from agents.cwm.sandbox import Limits, Sandbox, SandboxError, SandboxUnavailable, check_available
from bus.protocol import MatchEnded, MatchStarted, MoveStats, Turn
from games.loader import GameSpecError, parse_spec

log = logging.getLogger(__name__)
FINAL_CHECK_S = 20.0  # wall clock for the check of a match's final step (off any turn's clock)


class CwmOptions(StrategyOptions):
    model: str = Field(description="folder written by `spielbus cwm synthesize`")
    simulations: int = Field(default=1000, ge=1)
    rollouts: int = Field(default=10, ge=1, description="random rollouts per leaf (the paper uses 10)")
    value_function: bool = Field(
        default=True, description="use the chosen value function if the folder has one"
    )
    uct_c: float = Field(default=2.0, gt=0)
    determinizations: int = Field(default=8, ge=1, le=200, description="resampled states per ISMCTS search")
    time_fraction: float = Field(default=0.6, gt=0, le=0.9, description="share of the deadline for search")
    forfeit_on_model_error: bool = Field(
        default=False,
        description="when the model gives no valid action, answer none (the referee's fault policy, "
        "forfeit by default, decides) instead of a random legal action; the paper's player forfeits",
    )

    @field_validator("model")
    @classmethod
    def _model_dir(cls, v: str) -> str:
        try:
            load_meta(Path(v))
        except ModelDirError as exc:
            raise ValueError(str(exc)) from None
        return v


class CwmStrategy(Strategy):
    kind = "cwm"
    version = "1"
    Options = CwmOptions

    def __init__(self, options: CwmOptions) -> None:
        super().__init__(options)
        self.o = options
        self.folder = Path(options.model).resolve()
        self.meta = load_meta(self.folder)
        self.value = self.meta["value_function"] if options.value_function else None
        self.games = (self.meta["game"],)
        self.inference = self.meta.get("inference", "history")  # resample_history, or H.4's resample_state
        try:  # parameters in a canonical order, as a turn's `game.label()` writes them
            self.game_label = parse_spec(self.meta["game"]).label()
        except GameSpecError:
            self.game_label = str(self.meta["game"])  # no turn will match it: the model fails each
        self.sandbox: Sandbox | None = None
        self.lock = asyncio.Lock()
        # Online accuracy over every step this agent observed (turns and final steps, all matches).
        self.online = {"steps": 0, "agree": 0, "inferred": 0}

    # ---- sandbox -------------------------------------------------------------------------
    def _ensure(self, end: float | None = None) -> Sandbox:
        """The live sandbox, (re)started if needed; `end` (monotonic) bounds the start-up."""
        if self.sandbox is not None and self.sandbox.alive:
            return self.sandbox
        left = 20.0 if end is None else max(0.05, end - time.monotonic())
        sb = Sandbox(limits=Limits(cpu_s=24 * 3600, memory_mb=2048, start_timeout_s=left))
        sb.start()
        left = 15.0 if end is None else max(0.05, end - time.monotonic())
        # The code goes in over the pipe: the model folder (its tests, its report) stays outside.
        code = (self.folder / "model.py").read_text()
        loaded = sb.call(
            "load",
            code=code,
            name="model",
            imperfect=self.meta["imperfect"],
            inference=self.inference,
            timeout=left,
        )
        if not loaded.get("ok"):
            sb.close()
            raise SandboxError(str(loaded.get("error")), str(loaded.get("detail", ""))[:300])
        if self.value:
            value_code = (self.folder / f"{self.value}.py").read_text()
            v = sb.call("load", code=value_code, name=self.value, timeout=15)
            if not v.get("ok"):
                self.value = None  # play on without it
        self.sandbox = sb
        return sb

    def _call(self, op: str, end: float, **args: Any) -> dict[str, Any]:
        sb = self._ensure(end)
        left = end - time.monotonic()
        if left <= 0.02:
            raise SandboxError("timeout", "the turn's time went to starting the sandbox")
        args["time_limit"] = min(float(args.get("time_limit", left)), left * 0.8)
        return sb.call(op, timeout=left, **args)

    async def start(self, name: str) -> None:
        """Refuse to play where no sandbox can be made (never a model run without one)."""
        try:
            await asyncio.to_thread(check_available)
        except SandboxUnavailable as exc:
            raise ValueError(f"{name} (cwm) runs its model only in the sandbox: {exc}") from None

    async def match_started(self, msg: MatchStarted, ctx: MatchContext) -> None:
        ctx.data.update(pairs=[], failures=0)
        # Start (or check) the sandbox before the first turn, off the clock.
        async with self.lock:
            try:
                await asyncio.to_thread(self._ensure)
            except (SandboxError, SandboxUnavailable):
                pass  # decide() retries and falls back to a legal action

    # ---- turns ---------------------------------------------------------------------------

    async def decide(self, turn: Turn, ctx: MatchContext) -> Decision:
        d = ctx.data
        d.setdefault("pairs", [])
        d.setdefault("failures", 0)
        rng = decision_rng(self.o.seed, turn)
        limit = ctx.limit(turn)
        budget = max(0.05, limit.share(self.o.time_fraction))
        end = time.monotonic() + max(0.1, limit.share(0.8))
        legal_texts = {la.text: la.id for la in turn.legal_actions}
        imperfect = self.meta["imperfect"]
        args: dict[str, Any] = {
            "initial_state": self.meta["initial_state"],
            "seat": turn.seat,
            "num_players": self.meta["num_players"],
            "simulations": self.o.simulations,
            "rollouts": self.o.rollouts,
            "uct_c": self.o.uct_c,
            "seed": rng.randrange(2**31),
            "value": self.value,
            "time_limit": budget,
        }
        history = [*d["pairs"], [turn.observation, None]]
        if imperfect:
            args.update(
                history=history,
                closed_deck=self.meta["closed_deck"],
                determinizations=self.o.determinizations,
                inference=self.inference,
            )
        else:
            args["actions"] = [h.text or "" for h in turn.history]
            args["observation"] = turn.observation
        failure: str | None = None
        result: dict[str, Any] = {}
        async with self.lock:
            try:
                if turn.game.label() != self.game_label:
                    raise SandboxError(
                        "game", f"the model is of {self.meta['game']}, the turn of {turn.game.label()}"
                    )
                reply = await asyncio.to_thread(self._call, "search", end, **args)
                if reply.get("ok"):
                    result = reply["result"]
                else:
                    failure = f"{reply.get('error')}: {str(reply.get('detail', ''))[-200:]}"
            except (SandboxError, SandboxUnavailable) as exc:
                failure = f"sandbox {exc}"[:300]
        agree = False
        if result:
            try:
                agree = _agrees(result, turn, imperfect)
            except (TypeError, ValueError, RecursionError):  # an answer of no sensible shape
                pass
        self._observed(agree, bool(result.get("resampled")) if imperfect else None)
        action_text = result.get("action") if result else None
        if failure is None and action_text not in legal_texts:
            failure = f"the model chose {str(action_text)[:60]!r}, not a legal action of the turn"
        if failure is not None and self.o.forfeit_on_model_error:
            d["failures"] += 1
            return Decision(
                note=f"cwm: model failed ({failure}); no valid action, so none is given (forfeit)"[:500],
            )
        if failure is not None:
            d["failures"] += 1
            action = rng.choice(turn.legal_actions)
            action_text, action_id = action.text, action.id
        else:
            action_id = legal_texts[str(action_text)]  # a legal text: failure is None
        d["pairs"].append([turn.observation, action_text])
        stats = MoveStats(nodes=result.get("nodes"))
        extra: dict[str, float | int] = {
            "simulations": result.get("simulations", 0),
            "model_failures": d["failures"],
            **self.online_accuracy(),
        }
        for k, v in extra.items():
            setattr(stats, k, v)
        visits = result.get("visits") or {}
        total = sum(visits.values())
        policy = (
            {str(legal_texts[a]): n / total for a, n in visits.items() if a in legal_texts} if total else None
        )
        return Decision(
            action=action_id,
            stats=stats,
            policy=policy or None,
            note=f"cwm: model failed ({failure}); played a random legal action" if failure else None,
        )

    # ---- online accuracy -------------------------------------------------------------------
    def _observed(self, agree: bool, inferred: bool | None) -> None:
        self.online["steps"] += 1
        self.online["agree"] += int(agree)
        self.online["inferred"] += int(bool(inferred))

    def online_accuracy(self) -> dict[str, float | int]:
        """`online_transition_accuracy` (and, imperfect information, `online_inference_accuracy`)
        over every step observed so far, and `online_steps`, their count."""
        n = self.online["steps"]
        out: dict[str, float | int] = {
            "online_steps": n,
            "online_transition_accuracy": round(self.online["agree"] / n, 4) if n else 0.0,
        }
        if self.meta["imperfect"]:
            out["online_inference_accuracy"] = round(self.online["inferred"] / n, 4) if n else 0.0
        return out

    async def match_ended(self, msg: MatchEnded, ctx: MatchContext) -> None:
        """The final step, which no turn shows: where the referee sent the seat's last view (the
        game reached its end), the model must end the game there too, with the seat's observation
        and the returns announced. Judged here, as the turns are; the model only answers."""
        if msg.history is None or msg.observation is None or msg.seat >= len(msg.returns):
            return  # the game did not reach its end (forfeit, max turns) or an older referee
        imperfect = self.meta["imperfect"]
        args: dict[str, Any] = {
            "initial_state": self.meta["initial_state"],
            "seat": msg.seat,
            "num_players": self.meta["num_players"],
        }
        if imperfect:
            args.update(
                history=[*ctx.data.get("pairs", []), [msg.observation, None]],
                closed_deck=self.meta["closed_deck"],
                inference=self.inference,
            )
        else:
            args["actions"] = [h.text or "" for h in msg.history]
        result: dict[str, Any] = {}
        async with self.lock:
            try:
                end = time.monotonic() + FINAL_CHECK_S
                reply = await asyncio.to_thread(self._call, "final", end, **args)
                result = reply["result"] if reply.get("ok") and isinstance(reply.get("result"), dict) else {}
            except (SandboxError, SandboxUnavailable) as exc:
                log.info("cwm: the final step of %s could not be checked: %s", msg.match_id, exc)
        agree = False
        if result:
            try:
                agree = _final_agrees(result, msg)
            except (TypeError, ValueError, RecursionError):  # an answer of no sensible shape
                pass
        self._observed(agree, bool(result.get("resampled")) if imperfect else None)
        if not agree:
            log.info("cwm: the model disagrees with the final step of %s", msg.match_id)

    async def close(self) -> None:
        if self.sandbox is not None:
            self.sandbox.close()
            self.sandbox = None


def _agrees(result: dict[str, Any], turn: Turn, imperfect: bool) -> bool:
    """Online check, judged here and not in the sandbox: the model's legal actions at the root
    are the turn's and, with perfect information, so are its player and the seat's observation."""
    legal = result.get("legal")
    want = sorted(str(la.text) for la in turn.legal_actions)
    if not isinstance(legal, list) or sorted(map(str, legal)) != want:
        return False
    if imperfect:
        return True
    return result.get("current_player") == turn.seat and norm(result.get("observation")) == norm(
        turn.observation
    )


def _final_agrees(result: dict[str, Any], msg: MatchEnded) -> bool:
    """The model's last state is terminal, shows the seat the referee's final observation and
    gives every seat the announced return."""
    returns = result.get("returns")
    if result.get("current_player") != TERMINAL or not isinstance(returns, list):
        return False
    if len(returns) != len(msg.returns) or norm(result.get("observation")) != norm(msg.observation):
        return False
    return all(abs(float(a) - b) <= 1e-6 for a, b in zip(returns, msg.returns, strict=True))
