"""The synthesis prompts (templates in `prompts/`, from the paper's appendix H) and the unit
tests rendered as the Python `unittest` text the LLM reads (appendix H.2 style), each failing
test with its error as a comment before it."""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent / "prompts"


@cache
def template(name: str) -> str:
    return (HERE / f"{name}.txt").read_text()


def signature(imperfect: bool, closed_deck: bool, inference: str = "history") -> str:
    """H.2's signature, plus for imperfect-information games the inference function: H.3 (open
    deck), H.5 (closed deck) or, with `inference` "state", H.4's `resample_state`."""
    sig = template("signature_perfect")
    if imperfect and inference == "state":
        sig += template("signature_state")
    elif imperfect:
        sig += template("signature_history_closed" if closed_deck else "signature_history_open")
    return sig


def py_lit(value: Any) -> str:
    """`value` (JSON data) as a Python literal, for the generated test code."""
    return json.dumps(value).replace("null", "None").replace("true", "True").replace("false", "False")


def render_test(t: dict[str, Any], error: str | None = None) -> str:
    """One test as unittest code; `error` becomes the TODO comment before it."""
    lines = []
    if error:
        lines += ["# TODO: this test fails with:"] + [f"# {x}" for x in error.strip().splitlines()[-15:]]
    name = re.sub(r"\W", "_", t["id"])
    lines.append(f"class Test_{name}(unittest.TestCase):")
    lines.append(f"    def test_{name}(self):")
    body: list[str] = []
    if t["kind"] == "transition":
        e = t["expect"]
        body.append(f"state = {py_lit(t['state'])}")
        body.append(f"self.assertEqual({e['current_player']}, get_current_player(state))")
        body.append(f"self.assertEqual({py_lit(e['rewards'])}, get_rewards(state))")
        if e.get("observations") is not None:
            body.append(f"self.assertEqual({py_lit(e['observations'])}, get_observations(state))")
        if e["current_player"] != -4:
            body.append(
                f"self.assertEqual(set({py_lit(sorted(e['legal_actions']))}), set(get_legal_actions(state)))"
            )
        if t.get("action") is not None:
            body.append(f"self.assertEqual({py_lit(t['next_state'])}, apply_action(state, {t['action']!r}))")
    elif t["kind"] == "inference" and t.get("inference") == "state":  # H.4's unit test
        body.append(f"obs_action_history = {py_lit(t['obs_action_history'])}")
        body.append(f"player_id = {t['player_id']}")
        body.append("resampled_state = resample_state(obs_action_history, player_id)")
        body.append(
            "self.assertEqual(obs_action_history[-1][0], get_observations(resampled_state)[player_id])"
        )
        body.append("self.assertEqual(player_id, get_current_player(resampled_state))")
    elif t["kind"] == "inference":
        body.append(f"state = {py_lit(t['initial_state'])}")
        body.append(f"obs_action_history = {py_lit(t['obs_action_history'])}")
        body.append(f"player_id = {t['player_id']}")
        call = "resample_history(obs_action_history, player_id)"
        if t.get("last_is_terminal") is not None:
            body.append(f"last_is_terminal = {t['last_is_terminal']}")
            call = "resample_history(obs_action_history, player_id, last_is_terminal)"
        body += [
            "obs_and_action_iter = iter(obs_action_history)",
            "current_player_obs, current_player_action = next(obs_and_action_iter)",
            f"for action in {call}:",
            "    if get_current_player(state) == player_id:",
            "        self.assertEqual(current_player_obs, get_observations(state)[player_id])",
            "        self.assertEqual(current_player_action, action)",
            "        current_player_obs, current_player_action = next(obs_and_action_iter, (None, None))",
            "    state = apply_action(state, action)",
            "self.assertEqual(current_player_obs, get_observations(state)[player_id])",
        ]
    else:
        body += [
            f"state = {py_lit(t['initial_state'])}",
            f"rg = random.Random({t['seed']})",
            "for it in range(1000):  # upper bound on game length",
            "    current_player = get_current_player(state)",
            f"    assert len(get_rewards(state)) == {t['num_players']}",
            "    if current_player == -4:",
            "        break",
            "    state = apply_action(state, rg.choice(get_legal_actions(state)))",
            "else:",
            "    raise ValueError('Game did not end after 1000 steps.')",
        ]
    lines += ["        " + b for b in body]
    return "\n".join(lines)


def render_tests(tests: list[dict[str, Any]], errors: dict[str, str] | None = None) -> str:
    errors = errors or {}
    return "\n\n".join(render_test(t, errors.get(t["id"])) for t in tests)


def pick_tests(
    tests: list[dict[str, Any]], per_kind: int, failures: list[dict[str, Any]] | None
) -> list[dict]:
    """`num_tests_on_init` tests of each kind, or `num_tests_on_error` failing ones (appendix D.1.3)."""
    if failures:
        ids = {f["id"] for f in failures}
        pool = [t for t in tests if t["id"] in ids]
    else:
        pool = tests
    out: list[dict[str, Any]] = []
    for kind in ("transition", "inference", "random_play"):
        out += [t for t in pool if t["kind"] == kind][:per_kind]
    return out


def tree_prompt(
    game_name: str, rules: str, sig: str, tests_text: str, orig_code: str | None, num_targets: int = 1
) -> str:
    orig = template("orig_code").format(orig_code=orig_code) if orig_code else ""
    return template("tree_search").format(
        game_name=game_name,
        game_desc=rules,
        function_signature=sig,
        orig_block=orig,
        test_code=tests_text,
        num_targets=num_targets,
    )


_FENCE = re.compile(r"```(?:python|py)?[ \t]*\n(.*?)(?:```|\Z)", re.S)


def extract_code(text: str) -> str | None:
    """The first fenced code block (an unclosed last fence counts: replies get cut at max_tokens)."""
    blocks = [b.strip() for b in _FENCE.findall(text) if b.strip()]
    return max(blocks, key=len) if blocks else None
