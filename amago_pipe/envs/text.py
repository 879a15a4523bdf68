"""Text observations read as token ids at the env boundary, so what is stored is what the agent sees.

`TextObservation` (one env) and `VectorTextObservation` (an already vectorized env) replace each text leaf of the
observation space (gymnasium `Text`, MiniGrid's `mission`) by a `TokenIds` Box of `max_tokens` int32 ids that
carries its TextSpec; `spec.flatten_space` reads that mark, so the DataSpec knows the key is text. Unknown words
and texts cut to `max_tokens` are counted per key and logged (first occurrences, then a summary at close).
gymnasium + numpy only, no torch.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import numpy as np

from amago_pipe.errors import ConfigError
from amago_pipe.spec import DEFAULT_OBS_KEY, KEY_SEP, text_keys
from amago_pipe.tokens import TOKEN_DTYPE, TextSpec, TextTally

log = logging.getLogger("amago_pipe.envs")


class TokenIds(gym.spaces.Box):
    """A Box of `max_tokens` token ids in `[0, vocab_size)` that carries its TextSpec."""

    def __init__(self, text_spec: TextSpec, seed: int | np.random.Generator | None = None):
        high = text_spec.vocab_size - 1
        super().__init__(0, high, (text_spec.max_tokens,), np.dtype(TOKEN_DTYPE), seed=seed)  # type: ignore[arg-type]
        self.text_spec = text_spec

    def __eq__(self, other: object) -> bool:
        return super().__eq__(other) and getattr(other, "text_spec", None) == self.text_spec

    def __repr__(self) -> str:
        spec = self.text_spec
        return f"TokenIds({spec.max_tokens} ids, {len(spec.vocabulary)} words + pad/unknown)"


def text_space(space: gym.Space[Any], specs: Mapping[str, TextSpec], prefix: str = "") -> gym.Space[Any]:
    """`space` with the text leaf at each flattened key of `specs` replaced by its TokenIds."""
    if isinstance(space, gym.spaces.Dict):
        return gym.spaces.Dict({k: text_space(s, specs, f"{prefix}{k}{KEY_SEP}") for k, s in space.spaces.items()})
    if isinstance(space, gym.spaces.Tuple):
        return gym.spaces.Tuple([text_space(s, specs, f"{prefix}{i}{KEY_SEP}") for i, s in enumerate(space.spaces)])
    key = prefix[: -len(KEY_SEP)] if prefix else DEFAULT_OBS_KEY
    return TokenIds(specs[key]) if key in specs else space


def encode_text(
    obs: Any, space: gym.Space[Any], tallies: Mapping[str, TextTally], prefix: str = "", *, batched: bool = False
) -> Any:
    """`obs` of the (unwrapped) `space` with the texts at the keys of `tallies` as token ids: `(max_tokens,)`, or
    `(N, max_tokens)` for a `batched` observation of N envs."""
    if isinstance(space, gym.spaces.Dict):
        return {
            k: encode_text(obs[k], s, tallies, f"{prefix}{k}{KEY_SEP}", batched=batched)
            for k, s in space.spaces.items()
        }
    if isinstance(space, gym.spaces.Tuple):
        return tuple(
            encode_text(obs[i], s, tallies, f"{prefix}{i}{KEY_SEP}", batched=batched)
            for i, s in enumerate(space.spaces)
        )
    key = prefix[: -len(KEY_SEP)] if prefix else DEFAULT_OBS_KEY
    if key not in tallies:
        return obs
    return tallies[key].encode_many(obs) if batched else tallies[key].encode(obs)


def make_tallies(
    space: gym.Space[Any], spec: TextSpec, keys: tuple[str, ...] | None, *, where: str
) -> dict[str, TextTally]:
    """One TextTally per text key of `space` to read (`keys`, or every text leaf); ConfigError when the env has no
    text observation or a named key is not one."""
    found = text_keys(space)
    if not found:
        raise ConfigError(
            f"{where}.text: the env has no text observation (its observation space is {space}); drop `text:`",
            path=f"{where}.text",
        )
    chosen = list(found if keys is None else keys)
    missing = [k for k in chosen if k not in found]
    if missing:
        raise ConfigError(
            f"{where}.text.keys: {missing} are not text observations of the env (its text keys: {found})",
            path=f"{where}.text.keys",
        )
    return {k: TextTally(spec, k, where) for k in chosen}


def log_summary(tallies: Mapping[str, TextTally]) -> None:
    """One line per text key that met unknown words or cut texts."""
    for tally in tallies.values():
        if tally.unknown or tally.truncated:
            log.warning("%s: %s", tally.where, tally.summary())


class TextObservation(gym.ObservationWrapper):  # type: ignore[type-arg]
    """The env with its text observations as token ids (`keys`: the flattened text keys, default all)."""

    def __init__(
        self,
        env: gym.Env,  # type: ignore[type-arg]
        spec: TextSpec,
        keys: tuple[str, ...] | None = None,
        *,
        where: str = "env",
    ):
        super().__init__(env)
        self.tallies = make_tallies(env.observation_space, spec, keys, where=where)
        self.observation_space = text_space(env.observation_space, {k: spec for k in self.tallies})

    def observation(self, observation: Any) -> Any:
        return encode_text(observation, self.env.observation_space, self.tallies)

    def close(self) -> None:
        log_summary(self.tallies)
        super().close()


class VectorTextObservation(gym.vector.VectorObservationWrapper):
    """An already vectorized env with its text observations (N strings per key) as `(N, max_tokens)` token ids."""

    def __init__(
        self, env: gym.vector.VectorEnv, spec: TextSpec, keys: tuple[str, ...] | None = None, *, where: str = "env"
    ):
        super().__init__(env)
        self.tallies = make_tallies(env.single_observation_space, spec, keys, where=where)
        self.single_observation_space = text_space(env.single_observation_space, {k: spec for k in self.tallies})
        self.observation_space = gym.vector.utils.batch_space(self.single_observation_space, env.num_envs)

    def observations(self, observations: Any) -> Any:
        return encode_text(observations, self.env.single_observation_space, self.tallies, batched=True)

    def close(self, **kwargs: Any) -> None:
        log_summary(self.tallies)
        super().close(**kwargs)
