"""`amago-pipe play`: run an exported policy (through `Policy`, as a user would) in a gymnasium env and score it.

Text observations reach the policy as the env's strings; `Policy` turns them into word ids with the vocabulary
stored in the export.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np

from amago_pipe.envs.factory import EnvFactory, check_observation_space
from amago_pipe.envs.rollout import SUCCESS_KEYS
from amago_pipe.envs.text import text_space
from amago_pipe.errors import ConfigError, DataError
from amago_pipe.export.policy import Policy
from amago_pipe.spec import from_spaces

log = logging.getLogger("amago_pipe.export")


def _video_writer() -> Any:
    try:
        import imageio.v2 as imageio
    except ImportError as e:
        raise ConfigError(
            "--video needs imageio with ffmpeg: pip install 'imageio[ffmpeg]' (or leave out --video)"
        ) from e
    return imageio


def _log_text(policy: Policy) -> None:
    """A warning per text key that met words outside the stored vocabulary or texts longer than `max_tokens`."""
    for tally in policy.text_tallies.values():
        if tally.unknown or tally.truncated:
            log.warning("play: %s", tally.summary())


def play_policy(
    export_dir: Path,
    env_id: str,
    *,
    kwargs: dict[str, Any] | None = None,
    obs_keys: list[str] | None = None,
    episodes: int = 10,
    seed: int = 0,
    sample: bool = False,
    video: Path | None = None,
) -> dict[str, Any]:
    """Play `episodes` episodes; returns returns, lengths, their mean and the success rate (when the env reports
    one). The env's spaces must match the ones the policy was trained on (`obs_keys`: keep only those keys of a Dict
    observation, as the env config's `obs_keys`)."""
    policy = Policy.load(export_dir)
    imageio = _video_writer() if video is not None else None
    env_kwargs = {**(kwargs or {}), **({"render_mode": "rgb_array"} if video is not None else {})}
    keep = tuple(obs_keys) if obs_keys else None
    env = EnvFactory(id=env_id, kwargs=env_kwargs, obs_keys=keep, where="--env")()
    try:
        texts = {k: a.text for k, a in policy.spec.observations.items() if a.text is not None}
        seen = text_space(env.observation_space, texts) if texts else env.observation_space  # as the policy reads it
        check_observation_space(seen, where="--env", env_name=env_id)
        policy.spec.check_compatible(
            from_spaces(seen, env.action_space), what=f"env '{env_id}'", against="exported policy"
        )
        if video is not None and "rgb_array" not in (env.metadata.get("render_modes") or []):
            raise DataError(f"--video: env '{env_id}' cannot render rgb_array frames (its render modes: "
                            f"{env.metadata.get('render_modes') or 'none'}); leave out --video")  # fmt: skip
        returns, lengths, successes, frames = [], [], [], []
        policy.reset(1)
        for i in range(episodes):
            obs, info = env.reset(seed=seed + i)
            policy.reset_envs([True])
            reward, total, steps, done = None, 0.0, 0, False
            while not done:
                if video is not None and i == 0:
                    frames.append(env.render())
                action = policy.act(obs, reward=reward, sample=sample)
                obs, reward, terminated, truncated, info = env.step(action)
                total, steps, done = total + float(reward), steps + 1, bool(terminated or truncated)
            returns.append(total)
            lengths.append(steps)
            successes.extend([bool(info[k]) for k in SUCCESS_KEYS if k in info][:1])
    finally:
        env.close()
        _log_text(policy)
    if imageio is not None and video is not None:
        video.parent.mkdir(parents=True, exist_ok=True)
        imageio.mimsave(str(video), frames, fps=int(env.metadata.get("render_fps") or 30))
    return {
        "returns": returns,
        "lengths": lengths,
        "return_mean": float(np.mean(returns)) if returns else float("nan"),
        "success_rate": float(np.mean(successes)) if successes else None,
    }
