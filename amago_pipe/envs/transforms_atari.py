"""The `atari` env wrapper: ALE (ale-py) preprocessing — frame skipping with max-pooling, no-op starts, optional
life-loss terminals; sticky actions are the emulator's own (`repeat_action_probability`, set when the env is made).

ale-py is imported only here and only when an ALE env or this wrapper is used (MissingDependencyError otherwise).
gymnasium + numpy only, no torch.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from amago_pipe.config.transforms import AtariConfig, WrapperConfig
from amago_pipe.errors import ConfigError, import_optional

INSTALL_HINT = 'pip install -e ".[atari]" (or: pip install "ale-py>=0.9"; the Atari ROMs ship with it)'
NAMESPACE = "ALE/"
"""gymnasium namespace of ale-py's env ids (`ALE/Pong-v5`); its v4 ids (`PongNoFrameskip-v4`) have none."""


def register_ale_envs() -> None:
    """Register ale-py's `ALE/...` ids with gymnasium (the `ALE` entry of `amago_pipe.envs.namespaces`)."""
    require_ale("env.id (an ALE/... id)")


def require_ale(where: str) -> Any:
    """The `ale_py` module (importing it registers the ALE ids with gymnasium); MissingDependencyError otherwise."""
    ale_py = import_optional("ale_py", needs=f"{where}: Atari envs need", package="ale-py", install=INSTALL_HINT)
    gym.register_envs(ale_py)
    return ale_py


def make_kwargs(
    env_id: str, wrappers: tuple[WrapperConfig, ...], kwargs: dict[str, Any], *, where: str, kwargs_at: str
) -> dict[str, Any]:
    """What the wrappers (at key path `where`) need `gymnasium.make(env_id, ...)` to be given (the atari wrapper:
    `frameskip=1` and the sticky-action probability); ConfigError when the env is not an ALE env or its `kwargs`
    (at `kwargs_at`) set those otherwise."""
    out: dict[str, Any] = {}
    for i, cfg in enumerate(wrappers):
        extra = cfg.make_kwargs()
        if not extra:
            continue
        at = f"{where}.{i}"
        if isinstance(cfg, AtariConfig):
            require_ale(at)
            registered = env_id.rsplit(":", 1)[-1]  # gymnasium's `module:ID` form (ale_py:ALE/Pong-v5) names ID
            entry = str(gym.spec(registered).entry_point) if registered in gym.registry else ""
            if not entry.startswith("ale_py"):
                raise ConfigError(
                    f"{at} (atari): wraps ALE envs (ale-py ids such as ALE/Pong-v5); '{env_id}' is not one (leave "
                    "this wrapper out)",
                    path=at,
                )
        for key, value in extra.items():
            if key in kwargs and kwargs[key] != value:
                raise ConfigError(
                    f"{kwargs_at}: {key}={kwargs[key]!r} conflicts with {at} ({cfg.type}), which makes the env with "
                    f"{key}={value!r}; drop `{key}` from kwargs (set it on the wrapper)",
                    path=kwargs_at,
                )
        out.update(extra)
    return out


class AtariPreprocessing(gym.Wrapper):  # type: ignore[type-arg]
    """Each action is repeated `frame_skip` emulator frames (rewards summed, the observation the max of the last
    two frames, as DQN did against flicker); a reset takes 1..`noop_max` no-ops; with `terminal_on_life_loss`, a
    lost life ends the episode. The observation space is the env's own (RGB frames of 210x160)."""

    def __init__(self, env: gym.Env, cfg: AtariConfig, *, where: str):  # type: ignore[type-arg]
        super().__init__(env)
        ale_py = require_ale(where)
        base = env.unwrapped
        if not isinstance(base, ale_py.AtariEnv):
            raise ConfigError(
                f"{where} (atari): wraps ALE envs (ale-py's AtariEnv, e.g. id: ALE/Pong-v5); this env is "
                f"{type(base).__name__} (leave this wrapper out)",
                path=where,
            )
        frameskip = getattr(base, "_frameskip", 1)
        if frameskip != 1 and cfg.frame_skip > 1:
            raise ConfigError(
                f"{where}.frame_skip: the env already skips frames (frameskip={frameskip}); the atari wrapper skips "
                "them itself: make the env with frameskip=1 (an `id:` env is; drop `frameskip` from its kwargs)",
                path=f"{where}.frame_skip",
            )
        sticky = float(base.ale.getFloat("repeat_action_probability"))
        if abs(sticky - cfg.sticky_actions) > 1e-6:
            raise ConfigError(
                f"{where}.sticky_actions: the env was made with repeat_action_probability={sticky:g}, the wrapper asks "
                f"for {cfg.sticky_actions:g}; make the env with repeat_action_probability={cfg.sticky_actions:g} (an "
                "`id:` env is)",
                path=f"{where}.sticky_actions",
            )
        self.cfg, self.ale = cfg, base.ale
        self.lives = 0
        self._rng = np.random.default_rng()

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        obs, info = self.env.reset(seed=seed, options=options)
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        noops = int(self._rng.integers(1, self.cfg.noop_max + 1)) if self.cfg.noop_max > 0 else 0
        for _ in range(noops):
            obs, _, terminated, truncated, info = self.env.step(0)  # ALE's action 0 is NOOP in every game
            if terminated or truncated:
                obs, info = self.env.reset()
        self.lives = int(self.ale.lives())
        return obs, info

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        total, previous = 0.0, None
        obs: Any = None
        terminated = truncated = False
        info: dict[str, Any] = {}
        for t in range(self.cfg.frame_skip):
            obs, reward, terminated, truncated, info = self.env.step(action)
            total += float(reward)
            if terminated or truncated:
                break
            if t == self.cfg.frame_skip - 2:
                previous = np.array(obs, copy=True)
        if previous is not None and not (terminated or truncated):
            obs = np.maximum(previous, obs)
        if self.cfg.terminal_on_life_loss:
            lives = int(self.ale.lives())
            terminated = terminated or lives < self.lives
            self.lives = lives
        return obs, total, bool(terminated), bool(truncated), info
