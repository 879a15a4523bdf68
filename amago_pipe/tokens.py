"""Text observations as token ids: the word tokenizer, the builtin vocabularies and `TextSpec` (kept in a DataSpec).

A text (a MiniGrid mission, a gymnasium `Text` observation) becomes `max_tokens` int32 ids: its words lowercased and
split on anything that is not a letter or digit, each word looked up in a closed vocabulary (ids 0 = padding,
1 = a word outside the vocabulary, 2.. the vocabulary's words in order); longer texts are cut to `max_tokens`.
Leaf module: standard library and numpy only (no gymnasium, torch or minari).
"""

from __future__ import annotations

import logging
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

log = logging.getLogger("amago_pipe.text")

PAD_ID = 0
"""Id of the padding after a text's last word."""
UNKNOWN_ID = 1
"""Id of a word outside the vocabulary."""
FIRST_WORD_ID = 2
"""Id of the vocabulary's first word."""
TOKEN_DTYPE = "int32"
"""Stored dtype of token ids."""
TOKENIZER = "words"
"""The one tokenizer: lowercased runs of letters and digits (whitespace and punctuation split words)."""
_WORD = re.compile(r"[a-z0-9]+")
LOGGED_WORDS = 10
"""Distinct unknown words logged one by one per text key; the rest are only counted."""

MINIGRID_WORDS = (
    # colours, objects (minigrid.core.constants)
    "red", "green", "blue", "purple", "yellow", "grey",
    "door", "key", "ball", "box", "goal", "lava", "wall", "floor", "object", "square",
    # BabyAI verbs and locations (minigrid/envs/babyai/core/verifier.py): go to / pick up / open / put ... next
    # to, joined by `and`, `then`, `after you`; `a`/`the`; `on your left`, `in front of you`, `behind you`
    "go", "to", "pick", "up", "open", "put", "next", "near", "and", "then", "after", "you", "a", "the",
    "on", "your", "left", "right", "in", "front", "of", "behind",
    # the other MiniGrid missions (minigrid/envs/*.py)
    "get", "fetch", "must", "use", "unlock", "reach", "traverse", "room", "rooms", "maze", "avoid", "find",
    "opening", "matching", "at", "end", "hallway", "from",
)  # fmt: skip
"""Every word of the MiniGrid and BabyAI missions (minigrid 3.x)."""
BUILTIN_VOCABULARIES: dict[str, tuple[str, ...]] = {"minigrid": MINIGRID_WORDS, "babyai": MINIGRID_WORDS}
"""Vocabularies known by name (`vocabulary: minigrid`)."""


def words(text: str) -> list[str]:
    """`text` as words: lowercased, split on whitespace and punctuation (`"Go to the red ball, then"` ->
    `['go', 'to', 'the', 'red', 'ball', 'then']`)."""
    return _WORD.findall(text.lower())


def vocabulary_problem(vocabulary: str | Sequence[str]) -> str | None:
    """Why `vocabulary` (a builtin name or a list of words) cannot be used, or None."""
    if isinstance(vocabulary, str):
        if vocabulary in BUILTIN_VOCABULARIES:
            return None
        return (
            f"unknown vocabulary '{vocabulary}' (builtin: {', '.join(BUILTIN_VOCABULARIES)}); or give a list of words"
        )
    if not vocabulary:
        return "give at least one word (or a builtin vocabulary name such as minigrid)"
    bad = [w for w in vocabulary if words(str(w)) != [w]]
    if bad:
        return f"{bad[:3]} are not single lowercase words of letters and digits (as the tokenizer splits text)"
    repeated = sorted(w for w, n in Counter(vocabulary).items() if n > 1)
    if repeated:
        return f"words listed twice: {repeated[:5]}"
    return None


def resolve_vocabulary(vocabulary: str | Sequence[str]) -> tuple[str, ...]:
    """The words of a builtin vocabulary name, or the given list; ValueError naming the problem."""
    problem = vocabulary_problem(vocabulary)
    if problem:
        raise ValueError(problem)
    return BUILTIN_VOCABULARIES[vocabulary] if isinstance(vocabulary, str) else tuple(vocabulary)


@dataclass(frozen=True)
class Encoded:
    """One text as token ids."""

    ids: np.ndarray
    """(max_tokens,) int32 ids, padded with PAD_ID."""
    unknown: tuple[str, ...]
    """Words outside the vocabulary (each became UNKNOWN_ID)."""
    length: int
    """Words in the text before truncation (> max_tokens: it was cut)."""


@dataclass(frozen=True)
class TextSpec:
    """How a text observation key holds token ids: the vocabulary, the fixed length and the tokenizer."""

    vocabulary: tuple[str, ...]
    """The words; word i has id i + 2 (0 = padding, 1 = unknown word)."""
    max_tokens: int
    """Ids per observation: shorter texts are padded, longer ones cut."""
    tokenizer: str = TOKENIZER

    @property
    def vocab_size(self) -> int:
        """Number of ids, padding and unknown included."""
        return len(self.vocabulary) + FIRST_WORD_ID

    @cached_property
    def _ids(self) -> dict[str, int]:
        return {w: i + FIRST_WORD_ID for i, w in enumerate(self.vocabulary)}

    def encode(self, text: Any) -> Encoded:
        """Token ids of one text (bytes are decoded as UTF-8)."""
        if isinstance(text, bytes):
            text = text.decode("utf-8", "replace")
        found = words(str(text))
        ids = np.zeros(self.max_tokens, dtype=TOKEN_DTYPE)
        looked = [self._ids.get(w, UNKNOWN_ID) for w in found[: self.max_tokens]]
        ids[: len(looked)] = looked
        unknown = tuple(w for w in found if w not in self._ids)
        return Encoded(ids, unknown, len(found))

    def decode(self, ids: Iterable[int]) -> str:
        """The words of token ids (`<unk>` for unknown ones, padding dropped)."""
        shown = [self.vocabulary[i - FIRST_WORD_ID] if i >= FIRST_WORD_ID else "<unk>" for i in map(int, ids) if i]
        return " ".join(shown)

    def to_json(self) -> dict[str, Any]:
        return {"tokenizer": self.tokenizer, "max_tokens": self.max_tokens, "vocabulary": list(self.vocabulary)}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> TextSpec:
        return cls(tuple(str(w) for w in d["vocabulary"]), int(d["max_tokens"]), str(d.get("tokenizer", TOKENIZER)))


@dataclass
class TextTally:
    """What encoding one text key met: texts, unknown words and cut texts (the first occurrences are logged)."""

    spec: TextSpec
    key: str
    where: str = "env"
    texts: int = 0
    truncated: int = 0
    unknown: Counter[str] = field(default_factory=Counter)

    def encode(self, text: Any) -> np.ndarray:
        """(max_tokens,) ids of `text`, counted."""
        enc = self.spec.encode(text)
        self.texts += 1
        for word in enc.unknown:
            if word not in self.unknown and len(self.unknown) < LOGGED_WORDS:
                log.warning(
                    "%s: text '%s': word '%s' is not in the vocabulary (read as the unknown id 1); add it to "
                    "`text.vocabulary`", self.where, self.key, word,
                )  # fmt: skip
            self.unknown[word] += 1
        if enc.length > self.spec.max_tokens:
            if not self.truncated:
                log.warning(
                    "%s: text '%s' has %d words, cut to max_tokens %d (raise `text.max_tokens` to keep them): %r",
                    self.where, self.key, enc.length, self.spec.max_tokens, str(text),
                )  # fmt: skip
            self.truncated += 1
        return enc.ids

    def encode_many(self, texts: Any) -> np.ndarray:
        """(N, max_tokens) ids of N texts (any iterable or array of strings)."""
        rows = [self.encode(t) for t in np.asarray(texts, dtype=object).reshape(-1)]
        return np.stack(rows) if rows else np.zeros((0, self.spec.max_tokens), dtype=TOKEN_DTYPE)

    def summary(self) -> str:
        """One line: texts read, unknown words (most frequent first) and cut texts."""
        top = ", ".join(f"'{w}' x{n}" for w, n in self.unknown.most_common(5))
        unknown = f"{sum(self.unknown.values())} unknown words ({top})" if self.unknown else "no unknown words"
        return (
            f"text '{self.key}': {self.texts} texts, {unknown}, {self.truncated} cut to {self.spec.max_tokens} tokens"
        )
