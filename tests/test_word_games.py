"""Rules of Ghost, Word chain and Wordn't on small hand-made word lists."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyspiel
import pytest

from games.loader import load_game, replay
from games.word.common import LETTERS
from games.word.ghost import CHALLENGE
from games.word.wordlists import SHIPPED, WordListError, load_words
from games.word.wordnt import APPEND, CHALLENGE_DEAD, CHALLENGE_WORD


def L(c: str) -> int:
    return LETTERS.index(c)


def write_words(tmp_path: Path, words: list[str], name: str = "words.txt") -> str:
    path = tmp_path / name
    path.write_text("# a test list\n" + "\n".join(words) + "\n", encoding="utf-8")
    return str(path)


def play(state: pyspiel.State, texts: list[str]) -> pyspiel.State:
    """Apply actions given by their texts (as the referee matches free text)."""
    for t in texts:
        player = state.current_player()
        legal = {state.action_to_string(player, a): a for a in state.legal_actions()}
        assert t in legal, f"{t!r} not legal at {state}"
        state.apply_action(legal[t])
    return state


# --- word lists -------------------------------------------------------------------------------------
def test_shipped_lists_load_and_user_file_is_cleaned(tmp_path: Path) -> None:
    scowl = load_words("scowl70")
    assert 100_000 < len(scowl) < 130_000
    assert {"apple", "zebra", "cabin"} <= set(scowl)
    adj = set(load_words("wordnet_adj"))
    assert {"happy", "green", "bigger"} <= adj and "table" not in adj
    assert set(SHIPPED) >= {"scowl70", "wordnet_adj"}
    path = write_words(tmp_path, ["Apple", "  pear ", "it's", "naïve", "", "pear"])
    assert load_words(path) == ("apple", "pear")
    with pytest.raises(WordListError):
        load_words(str(tmp_path / "missing.txt"))


# --- Ghost ------------------------------------------------------------------------------------------
@pytest.fixture
def ghost_words(tmp_path: Path) -> str:
    return write_words(tmp_path, ["apple", "apply", "band", "bandit", "cab", "cabin"])


def ghost(words: str, **params: object) -> pyspiel.Game:
    extra = "".join(f",{k}={v}" for k, v in params.items())
    return load_game(f"ghost(words={words},min_word_length=4{extra})")


def test_ghost_completing_a_word_loses_at_once(ghost_words: str) -> None:
    s = play(ghost(ghost_words).new_initial_state(), ["b", "a", "n", "d"])
    assert s.is_terminal()
    assert s.returns() == [1.0, -1.0]  # player 1 spelled "band"
    assert 'completed the word "band"' in s.observation_string(0)


def test_ghost_short_words_do_not_count(ghost_words: str) -> None:
    s = play(ghost(ghost_words).new_initial_state(), ["c", "a", "b"])
    assert not s.is_terminal()  # "cab" has 3 letters, below min_word_length=4
    s = play(s, ["i", "n"])
    assert s.is_terminal() and s.returns() == [-1.0, 1.0]  # player 0 spelled "cabin"


def test_ghost_challenge_of_a_live_fragment_loses(ghost_words: str) -> None:
    s = play(ghost(ghost_words).new_initial_state(), ["a", "p", "challenge"])
    assert s.is_terminal() and s.returns() == [-1.0, 1.0]  # player 0 challenged "ap"


def test_ghost_challenge_of_a_dead_fragment_wins(ghost_words: str) -> None:
    s = play(ghost(ghost_words).new_initial_state(), ["a", "z", "challenge"])
    assert s.is_terminal() and s.returns() == [1.0, -1.0]  # player 1 bluffed "az"


def test_ghost_actions_and_views(ghost_words: str) -> None:
    game = ghost(ghost_words)
    s = game.new_initial_state()
    assert s.legal_actions() == list(range(26))  # no challenge on the empty fragment
    s.apply_action(L("a"))
    assert CHALLENGE in s.legal_actions()
    texts = [s.action_to_string(1, a) for a in s.legal_actions()]
    assert texts[:3] == ["a", "b", "c"] and texts[-1] == "challenge" and len(set(texts)) == 27
    view = s.observation_string(1)
    assert 'Fragment: "a"' in view and "player 1 (you)" in view and "at least 4 letters" in view
    assert s.information_state_string(1) == view


def test_ghost_fragment_cap_and_first_letter(ghost_words: str) -> None:
    s = ghost(ghost_words, first_letter="z").new_initial_state()
    assert s.fragment == "z" and s.current_player() == 0
    for _ in range(5):  # longest word "bandit" has 6 letters
        s.apply_action(L("q"))
    assert len(s.fragment) == 6 and s.legal_actions() == [CHALLENGE]
    c = s.clone()
    c.apply_action(CHALLENGE)
    assert c.is_terminal() and not s.is_terminal()


def test_ghost_python_mcts_plays_full_games(ghost_words: str) -> None:
    # OpenSpiel's C++ MCTSBot crashes on every Python game in open_spiel 2.0.2 (python_tic_tac_toe
    # included); the Python MCTS works on ours.
    from open_spiel.python.algorithms import mcts

    game = ghost(ghost_words)
    rs = np.random.RandomState(0)
    bot = mcts.MCTSBot(game, 2.0, 50, mcts.RandomRolloutEvaluator(1, rs), random_state=rs)
    for _ in range(3):
        s = game.new_initial_state()
        while not s.is_terminal():
            s.apply_action(bot.step(s))
        assert sorted(s.returns()) == [-1.0, 1.0]


# --- Word chain -------------------------------------------------------------------------------------
@pytest.fixture
def chain_words(tmp_path: Path) -> str:
    words = ["able", "elegant", "tall", "lucid", "dark", "keen", "nice", "easy", "yellow"]
    return write_words(tmp_path, words)


def test_word_chain_threshold_with_half_counted_opener(chain_words: str) -> None:
    game = load_game(f"word_chain(words={chain_words},threshold=10,first_letter=e)")
    s = play(game.new_initial_state(), ["elegant", "tall", "lucid"])
    # Without the half rule player 0 would have 7 + 5 = 12 >= 10; with it 3 + 5 = 8.
    assert s.scores == [8, 4] and not s.is_terminal()
    s = play(s, ["dark", "keen"])
    assert s.scores == [12, 8] and s.is_terminal() and s.returns() == [1.0, -1.0]


def test_word_chain_first_letter_chain_and_no_repeats(chain_words: str) -> None:
    game = load_game(f"word_chain(words={chain_words},first_letter=e)")
    s = game.new_initial_state()
    texts = {s.action_to_string(0, a) for a in s.legal_actions()}
    assert texts == {"elegant", "easy"}
    s = play(s, ["easy", "yellow"])
    # "yellow" ends in w: no word starts with w, so player 0 cannot answer and loses.
    assert s.is_terminal() and s.returns() == [-1.0, 1.0]
    s = play(game.new_initial_state(), ["elegant", "tall", "lucid", "dark", "keen", "nice"])
    assert {s.action_to_string(1, a) for a in s.legal_actions()} == {"easy"}  # elegant is used


def test_word_chain_adjectives_only_by_default() -> None:
    game = load_game("word_chain(first_letter=h)")
    s = game.new_initial_state()
    texts = {s.action_to_string(0, a) for a in s.legal_actions()}
    assert {"happy", "huge", "honest"} <= texts
    assert not {"house", "hurry", "hello"} & texts  # a noun, a verb, an interjection
    noun = load_game("word_chain(first_letter=h,pos=noun)").new_initial_state()
    assert "house" in {noun.action_to_string(0, a) for a in noun.legal_actions()}


def test_word_chain_random_first_letter_is_a_chance_node(chain_words: str) -> None:
    s = load_game(f"word_chain(words={chain_words})").new_initial_state()
    assert s.is_chance_node() and len(s.chance_outcomes()) == 26
    s.apply_action(L("e"))
    assert s.current_player() == 0
    assert 'must start with "e"' in s.observation_string(0)


# --- Wordn't ----------------------------------------------------------------------------------------
@pytest.fixture
def wordnt_words(tmp_path: Path) -> str:
    return write_words(tmp_path, ["cab", "cabin", "cable", "table", "stable", "bacon"])


def wordnt(words: str, players: int = 3, rounds: int = 2) -> pyspiel.Game:
    return load_game(f"wordnt(words={words},players={players},rounds={rounds},min_word_length=4)")


def start_round(s: pyspiel.State, order: list[int]) -> pyspiel.State:
    for seat in order[:-1]:
        assert s.is_chance_node()
        s.apply_action(seat)
    assert s.order == order
    return s


def test_wordnt_challenge_word_upheld_then_next_round_reshuffles(wordnt_words: str) -> None:
    s = start_round(wordnt(wordnt_words).new_initial_state(), [2, 0, 1])
    assert s.current_player() == 2
    assert [s.action_to_string(2, a) for a in s.legal_actions()][:2] == ["append a", "append b"]
    s = play(s, ["append c", "append a", "append b", "append l", "append e"])  # seat 0 spelled "cable"
    assert s.string == "cable" and s.current_player() == 1
    s = play(s, ["challenge word"])
    assert s.losses == [1, 0, 0] and s.round == 1 and s.string == ""
    # The next round draws a new order: chance nodes over every seat again.
    assert s.is_chance_node() and sorted(o for o, _ in s.chance_outcomes()) == [0, 1, 2]
    start_round(s, [1, 2, 0])
    assert s.current_player() == 1


def test_wordnt_wrong_word_challenge_and_short_words(wordnt_words: str) -> None:
    s = start_round(wordnt(wordnt_words).new_initial_state(), [0, 1, 2])
    s = play(s, ["append c", "append a", "append b", "challenge word"])  # "cab" < 4 letters
    assert s.losses == [1, 0, 0]  # the challenger (seat 0) loses


def test_wordnt_dead_challenges(wordnt_words: str) -> None:
    s = start_round(wordnt(wordnt_words).new_initial_state(), [0, 1, 2])
    s = play(s, ["append b", "prepend a", "append l", "challenge dead"])  # "abl" is in "cable"
    assert s.losses == [1, 0, 0]  # seat 0 challenged wrongly
    assert '"abl" is in "cable"' in s.observation_string(0)
    s = start_round(s, [0, 1, 2])
    s = play(s, ["append c", "append x", "challenge dead"])  # no word contains "cx"
    assert s.losses == [1, 1, 0] and s.is_terminal()  # seat 1 made the dead string
    assert s.returns() == [-1.0, -1.0, 0.0] and sum(s.returns()) == -2.0


def test_wordnt_actions_views_and_replay(wordnt_words: str) -> None:
    game = wordnt(wordnt_words, players=2, rounds=1)
    s = start_round(game.new_initial_state(), [1, 0])
    assert s.legal_actions() == list(range(APPEND, CHALLENGE_WORD))  # empty string: append only
    s = play(s, ["append b"])
    legal = s.legal_actions()
    assert legal == [*range(CHALLENGE_WORD), CHALLENGE_WORD, CHALLENGE_DEAD]
    texts = [s.action_to_string(0, a) for a in legal]
    assert len(set(texts)) == len(texts) and {"prepend a", "append z", "challenge dead"} <= set(texts)
    view = s.observation_string(0)
    assert 'String: "b"' in view and "seat 0 (you)" in view and "seat 1" in view
    again = replay(game, s.history())
    assert again.string == "b" and again.order == [1, 0]


def test_wordnt_round_lengths_are_bounded(wordnt_words: str) -> None:
    s = start_round(wordnt(wordnt_words, players=2, rounds=1).new_initial_state(), [0, 1])
    for _ in range(6):  # the longest word ("stable") has 6 letters
        s.apply_action(APPEND + L("q"))
    assert s.legal_actions() == [CHALLENGE_WORD, CHALLENGE_DEAD]
