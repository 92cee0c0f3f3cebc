"""The CWM search values a win as what it pays, once: rewards gathered on the way into the tree and
the leaf's evaluation never both count the same step."""

from __future__ import annotations

import random
import types

from agents.cwm.harness import ModelRules, RolloutEvaluator
from agents.cwm.reference import reference_code
from agents.tree_search import search


def _model() -> types.ModuleType:
    m = types.ModuleType("model")
    exec(compile(reference_code("tic_tac_toe"), "model.py", "exec"), m.__dict__)
    return m


def test_an_immediate_win_is_worth_one_not_two() -> None:
    m = _model()
    root = m.get_initial_state() if hasattr(m, "get_initial_state") else {"history": [], "text": ""}
    for a in ["x(0,0)", "o(1,0)", "x(0,1)", "o(1,1)"]:
        assert a in m.get_legal_actions(root), (a, m.get_legal_actions(root))
        root = m.apply_action(root, a)
    rng = random.Random(0)
    rules = ModelRules(m, 2, information_sets=False)
    out = search(rules, lambda: root, RolloutEvaluator(m, 2, 1, rng), 300, 1.4, rng)
    node = out.tree[out.root_key]
    win = "x(0,2)"
    assert node.visits[win] > 0
    assert node.value[win] / node.visits[win] == 1.0
    assert all(abs(v) <= node.visits[a] for a, v in node.value.items())
