"""Gymnasium spaces kept exactly: to and from plain JSON (stored in a DataSpec), and actions in a space's dtype.

Leaf module: numpy only (gymnasium is imported lazily); must not import torch, minari or the store.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from amago_pipe.errors import DataError

_NONFINITE = {"inf": np.inf, "-inf": -np.inf, "nan": np.nan}


def space_to_json(space: Any) -> dict[str, Any]:
    """A JSON-able description of a Box/Discrete/MultiBinary/MultiDiscrete space or a Dict/Tuple of them."""
    from gymnasium import spaces

    if isinstance(space, spaces.Dict):
        return {"type": "Dict", "spaces": [[k, space_to_json(s)] for k, s in space.spaces.items()]}
    if isinstance(space, spaces.Tuple):
        return {"type": "Tuple", "spaces": [space_to_json(s) for s in space.spaces]}
    if isinstance(space, spaces.Box):
        bounds = {"low": _array_json(space.low), "high": _array_json(space.high)}
        return {"type": "Box", "shape": list(space.shape), "dtype": np.dtype(space.dtype).name, **bounds}
    if isinstance(space, spaces.Discrete):
        return {"type": "Discrete", "n": int(space.n), "start": int(space.start)}
    if isinstance(space, spaces.MultiBinary):
        return {"type": "MultiBinary", "n": np.asarray(space.n).tolist()}
    if isinstance(space, spaces.MultiDiscrete):
        nvec, start = np.asarray(space.nvec).tolist(), np.asarray(space.start).tolist()
        return {"type": "MultiDiscrete", "nvec": nvec, "start": start, "dtype": np.dtype(space.dtype).name}
    raise DataError(
        f"unsupported space {type(space).__name__}; expected Box, Discrete, MultiBinary, MultiDiscrete, Dict or Tuple"
    )


def space_from_json(doc: dict[str, Any]) -> Any:
    """The gymnasium space `space_to_json` described (equal to the original)."""
    from gymnasium import spaces

    try:
        kind = doc["type"]
        if kind == "Dict":
            return spaces.Dict([(str(k), space_from_json(s)) for k, s in doc["spaces"]])
        if kind == "Tuple":
            return spaces.Tuple([space_from_json(s) for s in doc["spaces"]])
        if kind == "Box":
            dtype, shape = np.dtype(doc["dtype"]), tuple(doc["shape"])
            low, high = _array_from_json(doc["low"], dtype, shape), _array_from_json(doc["high"], dtype, shape)
            return spaces.Box(low=low, high=high, shape=shape, dtype=dtype)
        if kind == "Discrete":
            return spaces.Discrete(int(doc["n"]), start=int(doc["start"]))
        if kind == "MultiBinary":
            return spaces.MultiBinary(doc["n"])
        if kind == "MultiDiscrete":
            return spaces.MultiDiscrete(doc["nvec"], dtype=np.dtype(doc["dtype"]), start=doc["start"])
    except (KeyError, TypeError, ValueError) as e:
        raise DataError(f"malformed stored space {doc!r} ({e!r}); expected the output of space_to_json") from e
    raise DataError(
        f"unknown stored space type {kind!r}; expected Box, Discrete, MultiBinary, MultiDiscrete, Dict, Tuple"
    )


def _array_json(values: np.ndarray) -> Any:
    """A scalar when every entry is equal, else nested lists; non-finite floats become 'inf'/'-inf'/'nan'."""
    arr = np.asarray(values)
    flat = arr.ravel()
    if flat.size and (flat == flat[0]).all():
        arr = flat[0]
    if arr.dtype.kind != "f":
        return arr.tolist()
    return _encode_floats(arr.tolist())


def _encode_floats(value: Any) -> Any:
    if isinstance(value, list):
        return [_encode_floats(v) for v in value]
    return value if np.isfinite(value) else str(value)


def _array_from_json(value: Any, dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
    def decode(v: Any) -> Any:
        if isinstance(v, list):
            return [decode(x) for x in v]
        return _NONFINITE[v] if isinstance(v, str) else v

    return np.array(np.broadcast_to(np.asarray(decode(value), dtype=dtype), shape))


def actions_like(actions: np.ndarray, space: Any) -> np.ndarray:
    """`(T, ...)` stored actions in the action space's own dtype and shape, one row per step."""
    dtype = getattr(space, "dtype", None) or actions.dtype
    return np.asarray(actions, dtype=dtype).reshape(len(actions), *(space.shape or ()))


def spaces_json(observation_space: Any, action_space: Any) -> dict[str, Any]:
    """The `DataSpec.spaces` entry for an (observation, action) space pair."""
    return {"observation": space_to_json(observation_space), "action": space_to_json(action_space)}


def spaces_from_json(doc: dict[str, Any]) -> tuple[Any, Any]:
    """The (observation, action) spaces of a `DataSpec.spaces` entry."""
    return space_from_json(doc["observation"]), space_from_json(doc["action"])
