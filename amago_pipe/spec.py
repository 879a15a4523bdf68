"""DataSpec: what a dataset or environment looks like (observation keys, action space, goals).

The spec is stored with the data and is the only source of shapes; YAML carries hyperparameters. Text keys hold
token ids, marked by their `TextSpec` (vocabulary and length, `amago_pipe.tokens`).
Leaf module: numpy only (gymnasium is imported lazily inside `from_spaces`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from amago_pipe.errors import DataError
from amago_pipe.tokens import TOKEN_DTYPE, TextSpec

ActionKind = Literal["discrete", "continuous", "multibinary", "multidiscrete"]
KEY_SEP = "/"
"""Separator used when nested Dict/Tuple observation spaces are flattened to named keys."""
DEFAULT_OBS_KEY = "observation"
"""Key given to a non-dict observation space."""
ACTION_MASK_KEY = "action_mask"
"""Observation key of a discrete action mask (1 = the action is valid now): the agent's policy and the random
and exploring policies choose among valid actions only (task sets with joined action sets add it)."""


@dataclass(frozen=True)
class ArraySpec:
    """Shape and dtype of one per-timestep array (without the time axis)."""

    shape: tuple[int, ...]
    dtype: str
    low: float | None = None
    high: float | None = None
    text: TextSpec | None = None
    """Set on a text key: its `(max_tokens,)` values are token ids of this vocabulary, not numbers."""

    def to_json(self) -> dict[str, Any]:
        out = {"shape": list(self.shape), "dtype": self.dtype, "low": self.low, "high": self.high}
        return {**out, "text": self.text.to_json()} if self.text is not None else out

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> ArraySpec:
        text = TextSpec.from_json(d["text"]) if d.get("text") is not None else None
        return cls(tuple(int(s) for s in d["shape"]), str(d["dtype"]), d.get("low"), d.get("high"), text)

    @property
    def kind(self) -> str:
        """`text` for token ids, else `array`."""
        return "text" if self.text is not None else "array"


def text_array_spec(text: TextSpec) -> ArraySpec:
    """The ArraySpec of a text key read as `text`'s token ids."""
    return ArraySpec((text.max_tokens,), TOKEN_DTYPE, 0.0, float(text.vocab_size - 1), text)


@dataclass(frozen=True)
class ActionSpec:
    """The action space: kind and size. Discrete actions are stored as integer ids."""

    kind: ActionKind
    shape: tuple[int, ...]
    """Per-step stored shape: () for discrete, (A,) otherwise."""
    n: int = 0
    """Number of choices (discrete) or of binary outputs (multibinary)."""
    nvec: tuple[int, ...] = ()
    """Choices per sub-action (multidiscrete)."""
    low: tuple[float, ...] = ()
    high: tuple[float, ...] = ()

    @property
    def dim(self) -> int:
        """Width of the action vector the networks see (one-hot for discrete kinds)."""
        if self.kind == "discrete":
            return self.n
        if self.kind == "multidiscrete":
            return int(sum(self.nvec))
        return int(np.prod(self.shape)) if self.shape else 1

    @property
    def dtype(self) -> str:
        return "float32" if self.kind == "continuous" else "int64"

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "shape": list(self.shape),
            "n": self.n,
            "nvec": list(self.nvec),
            "low": list(self.low),
            "high": list(self.high),
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> ActionSpec:
        return cls(
            kind=d["kind"],
            shape=tuple(int(s) for s in d["shape"]),
            n=int(d.get("n", 0)),
            nvec=tuple(int(v) for v in d.get("nvec", ())),
            low=tuple(float(v) for v in d.get("low", ())),
            high=tuple(float(v) for v in d.get("high", ())),
        )


@dataclass(frozen=True)
class DataSpec:
    """Observation keys, action space and optional goal fields of a dataset or environment."""

    observations: dict[str, ArraySpec]
    action: ActionSpec
    goals: dict[str, ArraySpec] = field(default_factory=dict)
    """Optional `achieved_goal` / `desired_goal` arrays used by hindsight relabeling."""
    spaces: dict[str, Any] | None = None
    """The gymnasium `observation`/`action` spaces it was made from (`gym_spaces.space_to_json`), when known."""
    transforms: list[dict[str, Any]] | None = None
    """The env `wrappers:` the observations came through, as config records (`[]`: none); None: not known (a
    converted dataset, data from before wrappers were recorded)."""

    @property
    def rl2_dim(self) -> int:
        """Width of `rl2 = [previous reward, previous action]`."""
        return 1 + self.action.dim

    def to_json(self) -> dict[str, Any]:
        return {
            "observations": {k: v.to_json() for k, v in self.observations.items()},
            "action": self.action.to_json(),
            "goals": {k: v.to_json() for k, v in self.goals.items()},
            **({"spaces": self.spaces} if self.spaces is not None else {}),
            **({"transforms": self.transforms} if self.transforms is not None else {}),
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> DataSpec:
        try:
            return cls(
                observations={k: ArraySpec.from_json(v) for k, v in d["observations"].items()},
                action=ActionSpec.from_json(d["action"]),
                goals={k: ArraySpec.from_json(v) for k, v in d.get("goals", {}).items()},
                spaces=d.get("spaces"),
                transforms=d.get("transforms"),
            )
        except (KeyError, TypeError, ValueError) as e:
            raise DataError(f"malformed data spec ({e!r}); expected keys observations/action") from e

    def check_compatible(self, other: DataSpec, *, what: str = "data", against: str = "store") -> None:
        """Raise DataError naming the first field where `other` disagrees with this spec."""
        problems = []
        mine, theirs = set(self.observations), set(other.observations)
        if mine != theirs:
            problems.append(f"observation keys differ: {against} has {sorted(mine)}, {what} has {sorted(theirs)}")
        for key in sorted(mine & theirs):
            a, b = self.observations[key], other.observations[key]
            if a.shape != b.shape or a.dtype != b.dtype:
                problems.append(
                    f"observations['{key}']: {against} has shape {a.shape} {a.dtype}, "
                    f"{what} has shape {b.shape} {b.dtype}"
                )
            elif a.text != b.text:
                problems.append(f"observations['{key}']: {_text_difference(a.text, b.text, against, what)}")
        a_act, b_act = self.action, other.action
        if (a_act.kind, a_act.shape, a_act.n, a_act.nvec) != (b_act.kind, b_act.shape, b_act.n, b_act.nvec):
            problems.append(f"action: {against} has {describe_action(a_act)}, {what} has {describe_action(b_act)}")
        if set(self.goals) != set(other.goals):
            problems.append(f"goal fields differ: {against} has {sorted(self.goals)}, {what} has {sorted(other.goals)}")
        if transforms_differ(self.transforms, other.transforms):
            problems.append(
                f"wrappers differ: {against} came through {describe_transforms(self.transforms)}, {what} has "
                f"{describe_transforms(other.transforms)}"
            )
        if problems:
            raise DataError(f"{what} does not match the {against}'s data spec: " + "; ".join(problems))


def _text_difference(a: TextSpec | None, b: TextSpec | None, against: str, what: str) -> str:
    """Why two text keys' token ids do not mean the same words."""
    if a is None or b is None:
        text_side = against if a is not None else what
        return f"token ids of a text in the {text_side}, numbers in the other"
    if a.vocabulary != b.vocabulary:
        extra = sorted(set(b.vocabulary) - set(a.vocabulary))[:5]
        return (
            f"text vocabularies differ ({against}: {len(a.vocabulary)} words, {what}: {len(b.vocabulary)}"
            + (f"; {what} adds {extra}" if extra else "; same words in another order")
            + "): use the same `text.vocabulary`"
        )
    return f"text tokenizers differ ({a.tokenizer} vs {b.tokenizer})"


def action_mask_key(spec: DataSpec) -> str | None:
    """`ACTION_MASK_KEY` when the spec's discrete actions come with a mask of one entry per action, else None."""
    mask = spec.observations.get(ACTION_MASK_KEY)
    if spec.action.kind != "discrete" or mask is None or mask.shape != (spec.action.n,):
        return None
    return ACTION_MASK_KEY


def describe_action(a: ActionSpec) -> str:
    """Short human description, e.g. `discrete(2)` or `continuous(6,)`."""
    if a.kind == "discrete":
        return f"discrete({a.n})"
    if a.kind == "multidiscrete":
        return f"multidiscrete{list(a.nvec)}"
    return f"{a.kind}{a.shape}"


def from_spaces(observation_space: Any, action_space: Any) -> DataSpec:
    """Build a DataSpec from gymnasium spaces; nested Dict/Tuple observations are flattened (spaces kept)."""
    from amago_pipe.gym_spaces import spaces_json

    return DataSpec(
        observations=flatten_space(observation_space),
        action=action_spec(action_space),
        spaces=spaces_json(observation_space, action_space),
    )


def action_spec(space: Any) -> ActionSpec:
    """ActionSpec of a gymnasium action space (Box, Discrete, MultiBinary, MultiDiscrete)."""
    from gymnasium import spaces

    if isinstance(space, spaces.Discrete):
        if int(space.start) != 0:
            raise DataError(f"Discrete action spaces must start at 0 (got start={space.start})")
        return ActionSpec("discrete", (), n=int(space.n))
    if isinstance(space, spaces.Box):
        low = np.broadcast_to(space.low, space.shape).astype(np.float64).ravel()
        high = np.broadcast_to(space.high, space.shape).astype(np.float64).ravel()
        return ActionSpec(
            "continuous", tuple(int(s) for s in space.shape), low=tuple(low.tolist()), high=tuple(high.tolist())
        )
    if isinstance(space, spaces.MultiBinary):
        shape = tuple(int(s) for s in np.atleast_1d(space.n))
        return ActionSpec("multibinary", shape, n=int(np.prod(shape)))
    if isinstance(space, spaces.MultiDiscrete):
        nvec = tuple(int(v) for v in np.asarray(space.nvec).ravel())
        return ActionSpec("multidiscrete", (len(nvec),), nvec=nvec)
    raise DataError(
        f"unsupported action space {type(space).__name__}; expected Box, Discrete, MultiBinary or MultiDiscrete"
    )


def flatten_space(space: Any, prefix: str = "", *, text: Mapping[str, TextSpec] | None = None) -> dict[str, ArraySpec]:
    """Flatten a (possibly nested) observation space to `{key: ArraySpec}` with '/'-joined keys; text leaves named in
    `text` (or token-id spaces carrying a `text_spec`, as `amago_pipe.envs.text` makes) become token-id keys."""
    from gymnasium import spaces

    if isinstance(space, spaces.Dict | spaces.Tuple):
        items = space.spaces.items() if isinstance(space, spaces.Dict) else enumerate(space.spaces)
        out: dict[str, ArraySpec] = {}
        for k, sub in items:
            out.update(flatten_space(sub, f"{prefix}{k}{KEY_SEP}", text=text))
        return out
    key = prefix[: -len(KEY_SEP)] if prefix else DEFAULT_OBS_KEY
    if isinstance(getattr(space, "text_spec", None), TextSpec):
        return {key: text_array_spec(space.text_spec)}
    if is_text_space(space):
        if text is not None and key in text:
            return {key: text_array_spec(text[key])}
        raise DataError(
            f"unsupported observation space {type(space).__name__} at '{key}' (text) unless read as word ids: set "
            "`text: {vocabulary: minigrid, max_tokens: 32}` (or a list of words)"
        )
    return {key: _leaf_spec(space, key)}


def _leaf_spec(space: Any, key: str) -> ArraySpec:
    """The ArraySpec of a Box, Discrete, MultiBinary or MultiDiscrete space."""
    from gymnasium import spaces

    if isinstance(space, spaces.Box):
        low, high = np.min(space.low), np.max(space.high)
        return ArraySpec(
            tuple(int(s) for s in space.shape),
            np.dtype(space.dtype).name,
            float(low) if np.isfinite(low) else None,
            float(high) if np.isfinite(high) else None,
        )
    if isinstance(space, spaces.Discrete):
        return ArraySpec((), "int64", float(space.start), float(int(space.start) + int(space.n) - 1))
    if isinstance(space, spaces.MultiBinary):
        return ArraySpec(tuple(int(s) for s in np.atleast_1d(space.n)), "int8", 0.0, 1.0)
    if isinstance(space, spaces.MultiDiscrete):
        start = np.asarray(space.start)
        low, high = float(np.min(start)), float(np.max(start + space.nvec - 1))
        return ArraySpec(tuple(int(s) for s in np.shape(space.nvec)), "int64", low, high)
    raise DataError(f"unsupported observation space {type(space).__name__} at '{key}'")


def is_text_space(space: Any) -> bool:
    """Whether observations of `space` are strings: gymnasium's `Text`, or any space of a string dtype (MiniGrid's
    `MissionSpace`)."""
    from gymnasium import spaces

    if isinstance(space, spaces.Text):
        return True
    dtype = getattr(space, "dtype", None)
    return isinstance(space, spaces.Space) and dtype is not None and np.dtype(dtype).kind in "US"


def text_keys(space: Any, prefix: str = "") -> list[str]:
    """Flattened keys of the text leaves of an observation space (as `flatten_space` names them)."""
    from gymnasium import spaces

    if isinstance(space, spaces.Dict | spaces.Tuple):
        items = space.spaces.items() if isinstance(space, spaces.Dict) else enumerate(space.spaces)
        return [k for key, sub in items for k in text_keys(sub, f"{prefix}{key}{KEY_SEP}")]
    return [prefix[: -len(KEY_SEP)] if prefix else DEFAULT_OBS_KEY] if is_text_space(space) else []


def flatten_obs(obs: Any, prefix: str = "") -> dict[str, np.ndarray]:
    """Flatten a nested observation (dicts/tuples of arrays) the same way as `flatten_space`."""
    if isinstance(obs, dict):
        out: dict[str, np.ndarray] = {}
        for k, v in obs.items():
            out.update(flatten_obs(v, f"{prefix}{k}{KEY_SEP}"))
        return out
    if isinstance(obs, tuple):
        out = {}
        for i, v in enumerate(obs):
            out.update(flatten_obs(v, f"{prefix}{i}{KEY_SEP}"))
        return out
    key = prefix[: -len(KEY_SEP)] if prefix else DEFAULT_OBS_KEY
    return {key: np.asarray(obs)}


def nest_like(space: Any, flat: dict[str, np.ndarray], prefix: str = "") -> Any:
    """Inverse of `flatten_obs` following `space` (Dict -> dict, Tuple -> tuple), leaves in the space's dtypes."""
    from gymnasium import spaces

    if isinstance(space, spaces.Dict):
        return {k: nest_like(sub, flat, f"{prefix}{k}{KEY_SEP}") for k, sub in space.spaces.items()}
    if isinstance(space, spaces.Tuple):
        return tuple(nest_like(sub, flat, f"{prefix}{i}{KEY_SEP}") for i, sub in enumerate(space.spaces))
    leaf = np.asarray(flat[prefix[: -len(KEY_SEP)] if prefix else DEFAULT_OBS_KEY])
    return leaf.astype(space.dtype, copy=False) if space.dtype is not None else leaf


def transforms_differ(a: list[dict[str, Any]] | None, b: list[dict[str, Any]] | None) -> bool:
    """Whether two recorded wrapper lists differ (an unknown one, None, is taken to match)."""
    return a is not None and b is not None and a != b


def describe_transforms(records: list[dict[str, Any]] | None) -> str:
    """`[atari(frame_skip=4, ...), frame_stack(k=4)]`, `no wrappers`, or `unknown wrappers` (None)."""
    if records is None:
        return "unknown wrappers"
    if not records:
        return "no wrappers"
    parts = []
    for record in records:
        fields = ", ".join(f"{k}={v}" for k, v in record.items() if k != "type" and v is not None)
        parts.append(f"{record.get('type')}({fields})")
    return "[" + ", ".join(parts) + "]"
