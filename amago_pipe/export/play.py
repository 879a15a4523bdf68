"""`amago-pipe play`: run an exported policy (through `Policy`, as a user would) in a gymnasium env and score it.

Text observations reach the policy as the env's strings; `Policy` turns them into word ids with the vocabulary
stored in the export. The env is built inside the wrappers the policy was trained behind (`--env` too).
"""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from amago_pipe.config.build import build_strict
from amago_pipe.config.envs import EnvConfig
from amago_pipe.config.transforms import wrapper_records, wrappers_from_records
from amago_pipe.envs.factory import EnvFactory, check_observation_space
from amago_pipe.envs.rollout import SUCCESS_KEYS
from amago_pipe.envs.tasks import TaskSet, TaskSetEnv
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


def recorded_env(policy: Policy) -> EnvConfig:
    """The env config of the evaluate stage recorded in the export (ConfigError naming `--env` when none is)."""
    env = (policy.manifest.get("evaluation") or {}).get("env_config")
    if not isinstance(env, dict):
        raise ConfigError(
            "play: this export records no evaluation env (export a run that has an evaluate stage of this policy, "
            "or an older export); give one with --env ID",
            path="--env",
        )
    return build_strict(EnvConfig, {**env, "n_envs": 1, "mode": "sync"})  # type: ignore[no-any-return]


def recorded_sampling(policy: Policy) -> bool:
    """Whether the export's evaluation sampled its actions (False when it acted greedily or recorded neither)."""
    return (policy.manifest.get("evaluation") or {}).get("greedy") is False


def _make_env(
    policy: Policy, env_id: str | None, kwargs: dict[str, Any], keep: tuple[str, ...] | None
) -> tuple[Any, list[dict[str, Any]]]:
    """The env to play and the records of the wrappers it was built with: `env_id` with `kwargs` inside the
    policy's recorded wrappers, else the export's recorded evaluation env with its own (a task set draws a task,
    held-out ones included, at each reset)."""
    if env_id is not None:
        wrappers = tuple(wrappers_from_records(policy.wrappers, where="policy.wrappers"))
        env = EnvFactory(id=env_id, kwargs=kwargs, obs_keys=keep, where="--env", wrappers=wrappers)()
        return env, policy.wrappers
    cfg = recorded_env(policy)
    if cfg.tasks is not None:
        tasks = TaskSet.from_config(cfg, where="play", held_out=True)
        return TaskSetEnv(tasks, fixed=None), wrapper_records(cfg.wrappers)
    factory = EnvFactory.from_config(cfg, where="play")
    env = replace(factory, kwargs={**factory.kwargs, **kwargs}, obs_keys=keep or factory.obs_keys)()
    return env, wrapper_records(cfg.wrappers)


def play_policy(
    export_dir: Path,
    env_id: str | None = None,
    *,
    kwargs: dict[str, Any] | None = None,
    obs_keys: list[str] | None = None,
    episodes: int = 10,
    seed: int = 0,
    sample: bool | None = None,
    video: Path | None = None,
) -> dict[str, Any]:
    """Play `episodes` episodes; returns returns, lengths, their mean, the success rate (when the env reports one),
    whether actions were sampled, and the per-task means of a task set. Without `env_id` the export's recorded
    evaluation env is played; `sample` None acts as that evaluation did (greedy unless it sampled). The env's spaces
    must match the ones the policy was trained on (`obs_keys`: keep only those keys of a Dict observation)."""
    policy = Policy.load(export_dir)
    sample = recorded_sampling(policy) if sample is None else sample
    imageio = _video_writer() if video is not None else None
    env_kwargs = {**(kwargs or {}), **({"render_mode": "rgb_array"} if video is not None else {})}
    keep = tuple(obs_keys) if obs_keys else None
    env, wrappers = _make_env(policy, env_id, env_kwargs, keep)
    env_id = env_id or recorded_env(policy).env_name
    tasks: list[str] = []
    try:
        texts = {k: a.text for k, a in policy.spec.observations.items() if a.text is not None}
        seen = text_space(env.observation_space, texts) if texts else env.observation_space  # as the policy reads it
        check_observation_space(seen, where="--env", env_name=env_id)
        played = replace(from_spaces(seen, env.action_space), transforms=wrappers)
        policy.spec.check_compatible(played, what=f"env '{env_id}'", against="exported policy")
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
            if isinstance(env, TaskSetEnv):
                tasks.append(env.tasks.names[env.task])
            successes.extend([bool(info[k]) for k in SUCCESS_KEYS if k in info][:1])
    finally:
        env.close()
        _log_text(policy)
    if imageio is not None and video is not None:
        video.parent.mkdir(parents=True, exist_ok=True)
        imageio.mimsave(str(video), frames, fps=int(env.metadata.get("render_fps") or 30))
    return {
        "env": env_id,
        "returns": returns,
        "lengths": lengths,
        "return_mean": float(np.mean(returns)) if returns else float("nan"),
        "success_rate": float(np.mean(successes)) if successes else None,
        "sampled": sample,
        "per_task": {
            t: float(np.mean([r for r, n in zip(returns, tasks, strict=True) if n == t])) for t in sorted(set(tasks))
        },
    }
