"""The env wrappers of `env.wrappers` (frame_stack, resize, grayscale, success_on_reward, plugins; atari in
`transforms_atari`) and `apply_wrappers`, which builds them in order on one env, refusing a wrapper that does not fit the space it gets.

Images are channel-last, `(H, W)` or `(H, W, C)`, as gymnasium's and MiniGrid's pixel observations (the CNN
encoder reads that layout); dtypes are kept (uint8 stays uint8). gymnasium + numpy only, no torch.
"""

from __future__ import annotations

import re
from collections import deque
from typing import Any, cast

import gymnasium as gym
import numpy as np

from amago_pipe.config.transforms import (
    FrameStackConfig,
    ImageWrapperConfig,
    PluginWrapperConfig,
    ResizeConfig,
    SuccessOnRewardConfig,
    WrapperConfig,
)
from amago_pipe.envs.plugins import call_for_env
from amago_pipe.errors import ConfigError
from amago_pipe.registry import import_path

LUMA = np.array([0.299, 0.587, 0.114], dtype=np.float32)
"""ITU-R 601 weights of R, G and B (what OpenCV and Pillow use for RGB -> L)."""
_TASK_SUFFIX = re.compile(r"\.(tasks|held_out)\[\d+\]$")


def wrappers_where(where: str) -> str:
    """Key path of the `wrappers` list of the env config at `where` (a task's factory names the task set's)."""
    return f"{_TASK_SUFFIX.sub('', where)}.wrappers"


def apply_wrappers(env: gym.Env, wrappers: tuple[WrapperConfig, ...], *, where: str) -> gym.Env:  # type: ignore[type-arg]
    """`env` inside each wrapper in turn; ConfigError naming `where.N` (the env closed) when one does not fit."""
    for i, cfg in enumerate(wrappers):
        try:
            env = _wrap(env, cfg, f"{where}.{i}")
        except ConfigError:
            env.close()
            raise
    return env


def _wrap(env: gym.Env, cfg: WrapperConfig, at: str) -> gym.Env:  # type: ignore[type-arg]
    if not isinstance(cfg, PluginWrapperConfig):
        wrapped: gym.Env = cfg.implementation()(env, cfg, where=at)  # type: ignore[type-arg]
        return wrapped
    fn = import_path(cfg.type, what="wrapper", where=f"{at}.type")
    if not callable(fn):
        raise ConfigError(
            f"{at}.type: '{cfg.type}' is {type(fn).__name__}, not callable; a wrapper plugin is a gymnasium Wrapper "
            "class or a function called as Name(env, **kwargs)",
            path=f"{at}.type",
        )
    hint = "a wrapper plugin is called as Name(env, **kwargs) and returns the wrapped env"
    kwargs = dict(cfg.kwargs or {})
    return call_for_env(fn, (env,), kwargs, name=cfg.type, at=f"{at}.type", kwargs_at=f"{at}.kwargs", hint=hint)


def _is_image(space: gym.Space[Any]) -> bool:
    return isinstance(space, gym.spaces.Box) and len(space.shape) in (2, 3) and space.dtype == np.uint8


class KeyedObservation(gym.ObservationWrapper):  # type: ignore[type-arg]
    """Transforms one Box observation: the observation itself, or one key of a Dict observation (`key`, or the one
    uint8 image key when not given). Subclasses define `new_space` (ConfigError when the space does not fit) and
    `transform`."""

    what = "an observation"
    """What the wrapper takes, for messages."""

    def __init__(self, env: gym.Env, cfg: ImageWrapperConfig, *, where: str):  # type: ignore[type-arg]
        super().__init__(env)
        self.cfg, self.where = cfg, where
        space = env.observation_space
        self.key = self._pick_key(space, cfg.key)
        inner = space if self.key is None else space[self.key]  # type: ignore[index]
        if not isinstance(inner, gym.spaces.Box):
            self._refuse(inner, f"needs {self.what} (a Box), got {_brief(inner)}")
        new = self.new_space(inner)  # type: ignore[arg-type]
        if self.key is None:
            self.observation_space = new
        else:
            self.observation_space = gym.spaces.Dict({**space.spaces, self.key: new})  # type: ignore[attr-defined]

    def new_space(self, space: gym.spaces.Box) -> gym.spaces.Box:
        raise NotImplementedError

    def transform(self, x: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def observation(self, observation: Any) -> Any:
        if self.key is None:
            return self.transform(np.asarray(observation))
        return {**observation, self.key: self.transform(np.asarray(observation[self.key]))}

    def _pick_key(self, space: gym.Space[Any], key: str | None) -> str | None:
        if not isinstance(space, gym.spaces.Dict):
            if key is not None:
                raise ConfigError(
                    f"{self.where}.key: '{key}' given, but the observation is {_brief(space)}, not a Dict",
                    path=f"{self.where}.key",
                )
            return None
        keys = list(space.spaces)
        if key is not None:
            if key not in keys:
                raise ConfigError(
                    f"{self.where}.key: '{key}' is not a key of the observation (its keys: {keys})",
                    path=f"{self.where}.key",
                )
            return key
        images = [k for k in keys if _is_image(space[k])]
        if len(images) != 1:
            found = f"its image keys are {images}" if images else "none of them is a uint8 image"
            raise ConfigError(
                f"{self.where}.key: the observation is a Dict with keys {keys} and {found}; give `key:` (the key to "
                f"{self.cfg.type})",
                path=f"{self.where}.key",
            )
        return images[0]

    def _refuse(self, space: gym.Space[Any], problem: str) -> None:
        name = f"observation['{self.key}']" if self.key is not None else "the observation"
        raise ConfigError(f"{self.where} ({self.cfg.type}): {name} does not fit: {problem}", path=self.where)

    def _image_shape(self, space: gym.spaces.Box) -> tuple[int, ...]:
        """The `(H, W)` or `(H, W, C)` shape of an image space; refused otherwise (vectors, channel-first images)."""
        shape = tuple(int(s) for s in space.shape)
        if len(shape) == 1:
            self._refuse(
                space, f"needs an image (H, W) or (H, W, C), got a vector {_brief(space)}; leave this wrapper out"
            )
        if len(shape) not in (2, 3):
            self._refuse(space, f"needs an image (H, W) or (H, W, C), got shape {shape}")
        if len(shape) == 3 and shape[0] <= 4 < shape[2]:
            self._refuse(
                space,
                f"shape {shape} looks channel-first (C, H, W); these wrappers take channel-last (H, W, C) images, as "
                "gymnasium's are: transpose it first (a wrapper of your own)",
            )
        return shape


class FrameStack(KeyedObservation):
    """The last `k` observations side by side on the last axis (oldest first; a reset repeats the first one)."""

    what = "a vector or an image"

    def __init__(self, env: gym.Env, cfg: FrameStackConfig, *, where: str):  # type: ignore[type-arg]
        self.k = cfg.k
        self.frames: deque[np.ndarray] = deque(maxlen=cfg.k)
        super().__init__(env, cfg, where=where)

    def new_space(self, space: gym.spaces.Box) -> gym.spaces.Box:
        if len(space.shape) not in (1, 2, 3):
            self._refuse(space, f"needs a vector (D,) or an image (H, W) / (H, W, C), got shape {space.shape}")
        self._new_axis = len(space.shape) == 2
        low = self._stack([np.broadcast_to(space.low, space.shape)] * self.k)
        high = self._stack([np.broadcast_to(space.high, space.shape)] * self.k)
        return gym.spaces.Box(low, high, dtype=space.dtype)  # type: ignore[arg-type]

    def _stack(self, frames: list[np.ndarray]) -> np.ndarray:
        return np.stack(frames, axis=-1) if self._new_axis else np.concatenate(frames, axis=-1)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        self.frames.clear()
        return super().reset(seed=seed, options=options)

    def transform(self, x: np.ndarray) -> np.ndarray:
        if not self.frames:
            self.frames.extend([x] * self.k)
        else:
            self.frames.append(x)
        return self._stack(list(self.frames))


class Resize(KeyedObservation):
    """Images resized to `size` (H, W): area averaging when shrinking, bilinear when growing; dtype kept."""

    what = "an image"

    def new_space(self, space: gym.spaces.Box) -> gym.spaces.Box:
        shape = self._image_shape(space)
        out_h, out_w = cast(ResizeConfig, self.cfg).size
        self._rows = resize_taps(shape[0], out_h)
        self._cols = resize_taps(shape[1], out_w)
        self._dtype = space.dtype
        low, high = float(np.min(space.low)), float(np.max(space.high))
        return gym.spaces.Box(low, high, shape=(out_h, out_w, *shape[2:]), dtype=space.dtype)  # type: ignore[arg-type]

    def transform(self, x: np.ndarray) -> np.ndarray:
        (row_idx, row_w), (col_idx, col_w) = self._rows, self._cols
        image = x if x.ndim == 3 else x[..., None]  # (H, W, C)
        rows = row_w[:, 0, None, None] * image[row_idx[:, 0]]  # (H', W, C) float32
        for t in range(1, row_idx.shape[1]):
            rows += row_w[:, t, None, None] * image[row_idx[:, t]]
        out = col_w[None, :, 0, None] * rows[:, col_idx[:, 0]]  # (H', W', C)
        for t in range(1, col_idx.shape[1]):
            out += col_w[None, :, t, None] * rows[:, col_idx[:, t]]
        return _cast(out if x.ndim == 3 else out[..., 0], self._dtype)


def resize_weights(n_in: int, n_out: int) -> np.ndarray:
    """(n_out, n_in) weights of a 1-D resize, each row summing to 1: the overlap of each output cell with the input
    pixels when shrinking (area), linear interpolation between pixel centres when growing."""
    weights = np.zeros((n_out, n_in), dtype=np.float64)
    if n_out <= n_in:
        scale = n_in / n_out
        edges = np.arange(n_in + 1, dtype=np.float64)
        for j in range(n_out):
            start, stop = j * scale, (j + 1) * scale
            weights[j] = np.clip(np.minimum(edges[1:], stop) - np.maximum(edges[:-1], start), 0.0, None) / scale
    else:
        src = np.clip((np.arange(n_out) + 0.5) * n_in / n_out - 0.5, 0, n_in - 1)
        low = np.floor(src).astype(int)
        high = np.minimum(low + 1, n_in - 1)
        frac = src - low
        np.add.at(weights, (np.arange(n_out), low), 1.0 - frac)
        np.add.at(weights, (np.arange(n_out), high), frac)
    return weights


def resize_taps(n_in: int, n_out: int) -> tuple[np.ndarray, np.ndarray]:
    """`resize_weights` as taps: `(n_out, T)` input indices and float32 weights of the T pixels each output reads
    (a handful: a gather and a few multiply-adds per axis are ~30x faster than a dense matmul here)."""
    weights = resize_weights(n_in, n_out)
    used = weights > 0
    order = np.argsort(~used, axis=1, kind="stable")[:, : max(1, int(used.sum(axis=1).max()))]  # (n_out, T)
    return order, np.take_along_axis(weights, order, axis=1).astype(np.float32)


class Grayscale(KeyedObservation):
    """RGB (H, W, 3) -> luminance (H, W, 1); stacked RGB frames (H, W, 3k) -> (H, W, k); dtype kept."""

    what = "an RGB image"

    def new_space(self, space: gym.spaces.Box) -> gym.spaces.Box:
        shape = self._image_shape(space)
        channels = shape[2] if len(shape) == 3 else 1
        if channels % 3 != 0:
            gray = " (already one gray channel: leave this wrapper out)" if channels == 1 else ""
            self._refuse(space, f"needs RGB (H, W, 3), or (H, W, 3k) stacked RGB frames; shape {shape} has {channels} "
                         f"channel(s){gray}")  # fmt: skip
        self._dtype = space.dtype
        low, high = float(np.min(space.low)), float(np.max(space.high))
        return gym.spaces.Box(low, high, shape=(shape[0], shape[1], shape[2] // 3), dtype=space.dtype)  # type: ignore[arg-type]

    def transform(self, x: np.ndarray) -> np.ndarray:
        h, w, c = x.shape
        gray = x.reshape(h, w, c // 3, 3).astype(np.float32) @ LUMA  # (H, W, k)
        return _cast(gray, self._dtype)


class SuccessOnReward(gym.Wrapper):  # type: ignore[type-arg]
    """The `success_on_reward` wrapper: `info["success"]` at every step, True where a reward above the threshold
    ends the episode (the last step's value is the episode's, truncated episodes included)."""

    def __init__(self, env: gym.Env, cfg: SuccessOnRewardConfig, *, where: str):  # type: ignore[type-arg]
        super().__init__(env)
        self.threshold = cfg.threshold

    def step(self, action: Any) -> tuple[Any, Any, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        success = bool(terminated) and float(reward) > self.threshold
        return obs, reward, terminated, truncated, {**info, "success": success}


def _brief(space: gym.Space[Any]) -> str:
    """`Box(shape (4,), float32)` (a Box's bounds left out), or the space's own text."""
    if isinstance(space, gym.spaces.Box):
        return f"Box(shape {tuple(int(s) for s in space.shape)}, {space.dtype})"
    return str(space)


def _cast(x: np.ndarray, dtype: Any) -> np.ndarray:
    """Float pixels back to `dtype` (integers rounded and clipped to the dtype's range)."""
    dtype = np.dtype(dtype)
    if dtype.kind in "ui":
        info = np.iinfo(dtype)
        return np.clip(np.rint(x), info.min, info.max).astype(dtype)
    return x.astype(dtype)
