"""Agent kinds by name. Entries are import paths so that a kind's heavy imports
(pyspiel, LLM clients) load only when that kind runs."""

from __future__ import annotations

import importlib

from agents.base import Strategy

KINDS: dict[str, str] = {
    "wordnt": "agents.wordnt_agent:WordntStrategy",
    "ghost_solver": "agents.ghost_solver:GhostSolverStrategy",
    "random": "agents.random_agent:RandomStrategy",
    "first": "agents.random_agent:FirstLegalStrategy",
    "mcts": "agents.mcts_agent:MctsStrategy",
    "llm_policy": "agents.llm_policy:LLMPolicyStrategy",
    "tot": "agents.tot:TotStrategy",
    "minimax_tot": "agents.minimax_tot:MinimaxTotStrategy",
    "llm_mcts": "agents.llm_mcts:LlmMctsStrategy",
    "cwm": "agents.cwm.agent:CwmStrategy",
    "policy_table": "agents.policy_table:PolicyTableStrategy",
    "stockfish": "agents.stockfish_agent:StockfishStrategy",
    "gnugo": "agents.gnugo_agent:GnuGoStrategy",
    "human": "agents.human:HumanStrategy",
}


class UnknownKind(ValueError):
    pass


def strategy_class(kind: str) -> type[Strategy]:
    try:
        path = KINDS[kind]
    except KeyError:
        raise UnknownKind(f"unknown agent kind {kind!r}; known: {', '.join(sorted(KINDS))}") from None
    module, _, name = path.partition(":")
    cls = getattr(importlib.import_module(module), name)
    if not (isinstance(cls, type) and issubclass(cls, Strategy)):
        raise TypeError(f"{path} is not a Strategy")
    return cls
