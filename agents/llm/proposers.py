"""Action generators for the LLM tree searches (minimax_tot, tot): the thought generator of ToT.

A `Proposer` works on a true OpenSpiel state and proposes actions for the
player to move there, with the prompts of the Minimax-ToT paper appendix B:

- `GhostProposer`: "provide a word that starts with the letters {prefix} but not
  starts with {banned} and has a length of at least {n}" (few-shot, as in B.2);
  the letter after the prefix is the action; prefixes already proposed are
  banned in the next prompt (no i.i.d. sampling, section 3). With
  `constrain_words` the word is decoded under a JSON schema pattern
  `^prefix[allowed][a-z]+$` (exact but slow on llama.cpp; off by default), so
  the small model cannot leave the prefix or repeat a banned letter. The LLM
  validity check of B.2 ("Is "{word}" a correct English word?" YES/NO) filters.
  "challenge" is always a candidate once the fragment is non-empty.
- `WordChainProposer`: "Give me 10 base form adjectives starting with {letter}
  excluding {used}…" (few-shot, B.1), validity by the B.1 check ("Is "{word}"
  an adjective?") and by the game's own word list (the legal actions).
- `GenericProposer` (any other game): "choose one of these legal moves", asked
  again without the moves already proposed; with `constrain` an enum schema.

Candidates are deduplicated and sorted (longer proposed words first, the
paper's "better actions first" for alpha-beta, by a hand-made heuristic).

Seeds: attempt i at a state uses seed + i, so a repeated state gives repeated
requests (served by the cache) while attempts at one state differ.
Limits: the prompts speak English word games; the generic prompt only lists
legal moves and may be long for games with many actions (rules are not sent).
"""

from __future__ import annotations

import abc
import re
import string
from dataclasses import dataclass

import pyspiel

from agents.llm.base import LLMError
from agents.llm.client import LLMClient
from agents.llm.prompts import ANSWER_FORMAT
from agents.llm.strategy import Budget
from agents.llm.usage import UsageMeter

LETTERS = string.ascii_lowercase

GHOST_FEW_SHOT: list[tuple[str, str]] = [
    (
        "user",
        'Please provide a word that starts with the letters "exc" but not starts with "excl" or "excu" '
        "and has a length of at least 5.",
    ),
    ("assistant", "exclaim"),
    ("user", 'Please provide a word that starts with the letters "a" has a length of at least 6.'),
    ("assistant", "anyone"),
    ("user", 'Please provide a word that starts with the letters "can" has a length of at least 5.'),
    ("assistant", "candidate"),
]

GHOST_CHECK_FEW_SHOT: list[tuple[str, str]] = [
    ("user", 'Is "apple" a correct English word?'),
    ("assistant", "YES"),
    ("user", 'Is "narrat" a correct English word?'),
    ("assistant", "NO"),
    ("user", 'Is "like" a correct English word?'),
    ("assistant", "YES"),
]

WORDCHAIN_FEW_SHOT: list[tuple[str, str]] = [
    (
        "user",
        'Give me 10 base form nouns starting with "a". The longer the words the better. '
        "Make sure the words are commonly used. Don't output compound words with hyphens.",
    ),
    (
        "assistant",
        "1. Application; 2. Association; 3. Architecture; 4. Argumentation; 5. Abstraction; "
        "6. Advancement; 7. Anticipation; 8. Appreciation; 9. Authorization; 10. Accommodation",
    ),
    (
        "user",
        'Give me 10 base form verbs starting with "c" excluding "come, alienate, exam". The longer the '
        "words the better. Make sure the words are commonly used. Don't output compound words with hyphens.",
    ),
    (
        "assistant",
        "1. Communicate; 2. Collaborate; 3. Contribute; 4. Calculate; 5. Coordinate; 6. Construct; "
        "7. Criticize; 8. Cultivate; 9. Celebrate; 10. Customize",
    ),
]

WORDCHAIN_CHECK_FEW_SHOT: list[tuple[str, str]] = [
    ("user", 'Is "bigger" an adjective?'),
    ("assistant", "YES"),
    ("user", 'Is "heavy" an adjective?'),
    ("assistant", "YES"),
    ("user", 'Is "make" an adjective?'),
    ("assistant", "NO"),
]

POS_WORDS = {"adj": "adjectives", "noun": "nouns", "verb": "verbs", "adv": "adverbs"}
POS_ONE = {"adj": "an adjective", "noun": "a noun", "verb": "a verb", "adv": "an adverb"}


@dataclass
class ProposerSettings:
    temperature: float = 0.5  # the Minimax-ToT paper: Llama 2 at temperature 0.5
    constrain: bool = True
    llm_check: bool = True  # the appendix B validity prompts
    max_attempts: int = 6  # generation calls per state, at most
    seed: int = 0
    max_tokens: int = 24
    # Ghost words under a regex-pattern schema: exact, but llama.cpp's grammar sampler makes
    # such open patterns slow (seconds per call on 2 busy cores), so off by default.
    constrain_words: bool = False


def action_text(state: pyspiel.State, action: int) -> str:
    return state.action_to_string(state.current_player(), action)


class Proposer(abc.ABC):
    def __init__(self, llm: LLMClient, settings: ProposerSettings) -> None:
        self.llm = llm
        self.s = settings

    async def propose(self, state: pyspiel.State, n: int, budget: Budget, meter: UsageMeter) -> list[int]:
        """Up to n distinct legal actions for the player to move, best first (may be empty).

        Never raises LLMError: a failed call (server down, time spent) ends the
        generation with what was found so far, so a search can still answer.
        """
        found: list[int] = []
        try:
            await self._generate(state, n, budget, meter, salt=0, check=self.s.llm_check, out=found)
        except LLMError:
            pass
        return self._finish(state, found)

    def _finish(self, state: pyspiel.State, found: list[int]) -> list[int]:
        return found

    async def sample_one(
        self, state: pyspiel.State, budget: Budget, meter: UsageMeter, salt: int
    ) -> int | None:
        """One LLM action for a rollout step (no validity check: "sample one action each time")."""
        found: list[int] = []
        try:
            await self._generate(state, 1, budget, meter, salt=salt, check=False, out=found)
        except LLMError:
            pass
        return found[0] if found else None

    def default_action(self, state: pyspiel.State) -> int | None:
        """The action played when the search finds nothing (ToT's default); None: none."""
        return None

    @abc.abstractmethod
    async def _generate(
        self,
        state: pyspiel.State,
        n: int,
        budget: Budget,
        meter: UsageMeter,
        salt: int,
        check: bool,
        out: list[int],
    ) -> None:
        """Append up to n actions to `out`, best first (kept sorted as they come)."""

    async def _yes(self, few_shot: list[tuple[str, str]], question: str, budget: Budget) -> bool:
        """An appendix-B YES/NO check; an unclear answer counts as NO."""
        result = await self.llm.chat(
            [*few_shot, ("user", question)],
            choices=["YES", "NO"],
            constrain=self.s.constrain,
            temperature=0.0,
            max_tokens=16,
            deadline=budget.deadline,
        )
        return result.choice == "YES"


class GhostProposer(Proposer):
    """The Minimax-ToT paper appendix B.2."""

    CHALLENGE_TEXT = "challenge"

    @staticmethod
    def _fragment(state: pyspiel.State) -> str:
        return str(state).strip().lower()

    @staticmethod
    def _min_len(state: pyspiel.State) -> int:
        return int(state.get_game().get_parameters().get("min_word_length", 5))

    def _prompt(self, prefix: str, banned: list[str], length: int) -> str:
        starts = f'starts with the letters "{prefix}"' if prefix else "is an English word"
        ban = ""
        if banned:
            ban = " but not starts with " + " or ".join(f'"{b}"' for b in banned)
        return f"Please provide a word that {starts}{ban} and has a length of at least {length}."

    def _letter_actions(self, state: pyspiel.State) -> dict[str, int]:
        out: dict[str, int] = {}
        for a in state.legal_actions():
            text = action_text(state, a).strip().lower()
            if len(text) == 1 and text in LETTERS:
                out[text] = a
        return out

    def _challenge(self, state: pyspiel.State) -> int | None:
        for a in state.legal_actions():
            if action_text(state, a).strip().lower() == self.CHALLENGE_TEXT:
                return a
        return None

    def default_action(self, state: pyspiel.State) -> int | None:
        return self._challenge(state)

    def _finish(self, state: pyspiel.State, found: list[int]) -> list[int]:
        challenge = self._challenge(state)
        return found + ([challenge] if challenge is not None else [])

    async def _generate(
        self,
        state: pyspiel.State,
        n: int,
        budget: Budget,
        meter: UsageMeter,
        salt: int,
        check: bool,
        out: list[int],
    ) -> None:
        prefix = self._fragment(state)
        letters = self._letter_actions(state)
        # At least two letters beyond the prefix: the added letter must not complete a word.
        length = max(self._min_len(state), len(prefix) + 2)
        found: list[tuple[str, str]] = []  # (letter, word)
        tried: set[str] = set()
        for attempt in range(self.s.max_attempts):
            if len(found) >= n or budget.spent():
                break
            allowed = "".join(c for c in LETTERS if c in letters and c not in tried)
            if not allowed:
                break
            banned = [prefix + c for c in sorted(tried)]
            schema = None
            if self.s.constrain and self.s.constrain_words:
                rest = max(1, length - len(prefix) - 1)
                pattern = f"^{prefix}[{allowed}][a-z]{{{rest},20}}$"
                word_schema = {"type": "string", "pattern": pattern}
                schema = {"type": "object", "properties": {"word": word_schema}, "required": ["word"]}
            result = await self.llm.chat(
                [*GHOST_FEW_SHOT, ("user", self._prompt(prefix, banned, length))],
                schema=schema,
                temperature=self.s.temperature,
                max_tokens=self.s.max_tokens,
                seed=self.s.seed + 7919 * salt + attempt,
                deadline=budget.deadline,
            )
            word = _first_word(result.text, skip={"word"})
            if not word or not word.startswith(prefix) or len(word) <= len(prefix):
                meter.bad_outputs += 1
                continue
            letter = word[len(prefix)]
            if letter in tried or letter not in letters:
                meter.bad_outputs += 1
                tried.add(letter)
                continue
            tried.add(letter)
            if check and not await self._yes(
                GHOST_CHECK_FEW_SHOT, f'Is "{word}" a correct English word?', budget
            ):
                continue
            found.append((letter, word))
            # Longer target words first: the fragment stays alive longer along them.
            found.sort(key=lambda lw: -len(lw[1]))
            out[:] = [letters[lt] for lt, _ in found]


class WordChainProposer(Proposer):
    """The Minimax-ToT paper appendix B.1."""

    @staticmethod
    def _pos(state: pyspiel.State) -> str:
        return str(state.get_game().get_parameters().get("pos", "adj")) or "adj"

    async def _generate(
        self,
        state: pyspiel.State,
        n: int,
        budget: Budget,
        meter: UsageMeter,
        salt: int,
        check: bool,
        out: list[int],
    ) -> None:
        legal = {action_text(state, a).strip().lower(): a for a in state.legal_actions()}
        if not legal:
            return
        letter = next(iter(legal))[0]
        pos = self._pos(state)
        used = [w for w in str(state).split() if w]
        found: dict[str, int] = {}
        rejected: list[str] = []
        for attempt in range(max(1, self.s.max_attempts // 3)):
            if len(found) >= n or budget.spent():
                break
            avoid = used[-12:] + rejected[-8:] + list(found)
            excluding = f' excluding "{", ".join(avoid)}"' if avoid else ""
            ask = (
                f'Give me 10 base form {POS_WORDS.get(pos, "words")} starting with "{letter}"{excluding}. '
                "The longer the words the better. Make sure the words are commonly used. "
                "Don't output compound words with hyphens."
            )
            result = await self.llm.chat(
                [*WORDCHAIN_FEW_SHOT, ("user", ask)],
                temperature=self.s.temperature,
                max_tokens=max(self.s.max_tokens, 64),
                seed=self.s.seed + 7919 * salt + attempt,
                deadline=budget.deadline,
            )
            words = [w for w in re.findall(r"[A-Za-z]+", result.text) if len(w) > 1]
            new = 0
            for w in words:
                w = w.lower()
                if w in found or w in rejected:
                    continue
                if w not in legal:
                    rejected.append(w)
                    meter.bad_outputs += 1
                    continue
                if check and not await self._yes(
                    WORDCHAIN_CHECK_FEW_SHOT, f'Is "{w}" {POS_ONE.get(pos, "a word")}?', budget
                ):
                    rejected.append(w)
                    continue
                found[w] = legal[w]
                new += 1
                # more letters first: closer to the threshold
                out[:] = [found[x] for x in sorted(found, key=lambda x: -len(x))]
                if len(found) >= n:
                    break
            if not new and not words:
                meter.bad_outputs += 1


class GenericProposer(Proposer):
    """Any game: choose among the legal action texts, re-asked without those already proposed."""

    def _prompt(self, state: pyspiel.State, options: list[str], excluded: list[str]) -> str:
        ex = f" Do not choose {', '.join(excluded)}." if excluded else ""
        return (
            f"Game: {state.get_game().get_type().long_name}. You are player {state.current_player()}.\n"
            f"State:\n{state}\n\nLegal moves: {', '.join(options)}.{ex}\n"
            f"Choose the best move. {ANSWER_FORMAT}"
        )

    async def _generate(
        self,
        state: pyspiel.State,
        n: int,
        budget: Budget,
        meter: UsageMeter,
        salt: int,
        check: bool,
        out: list[int],
    ) -> None:
        by_text = {action_text(state, a): a for a in state.legal_actions()}
        chosen: list[str] = []
        for attempt in range(self.s.max_attempts):
            options = [t for t in by_text if t not in chosen]
            if len(chosen) >= n or not options or budget.spent():
                break
            result = await self.llm.chat(
                [("user", self._prompt(state, options, chosen))],
                choices=options,
                constrain=self.s.constrain,
                temperature=self.s.temperature,
                max_tokens=self.s.max_tokens,
                seed=self.s.seed + 7919 * salt + attempt,
                deadline=budget.deadline,
            )
            if result.choice is None:
                meter.bad_outputs += 1
                continue
            chosen.append(result.choice)
            out.append(by_text[result.choice])


def _first_word(text: str, skip: set[str]) -> str | None:
    for w in re.findall(r"[A-Za-z]+", text):
        if w.lower() not in skip:
            return w.lower()
    return None


def make_proposer(game_name: str, llm: LLMClient, settings: ProposerSettings) -> Proposer:
    if game_name == "ghost":
        return GhostProposer(llm, settings)
    if game_name == "word_chain":
        return WordChainProposer(llm, settings)
    return GenericProposer(llm, settings)


__all__ = ["LLMError", "Proposer", "ProposerSettings", "make_proposer"]
