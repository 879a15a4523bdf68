"""Synthetic datasets in each converter source layout (D4RL HDF5, Minari, AMAGO npz) for tests and benchmarks.

Each writer returns the ground-truth episodes it wrote. numpy + h5py/gymnasium/minari (lazily); no torch.
"""

from __future__ import annotations

import uuid
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from amago_pipe.spec import flatten_obs
from amago_pipe.store import Episode


@dataclass
class TrueEpisode(Episode):
    """A store Episode plus the per-step D4RL `infos/*` arrays (T+1 rows) a synthetic source also wrote."""

    infos: dict[str, np.ndarray] = field(default_factory=dict)


def _flags(length: int, end: str) -> tuple[np.ndarray, np.ndarray]:
    term, trunc = np.zeros(length, bool), np.zeros(length, bool)
    term[-1] = end in ("terminal", "both")
    trunc[-1] = end in ("timeout", "both")
    return term, trunc


def continuous_episode(
    rng: np.random.Generator, length: int, end: str, obs_dim: int = 3, act_dim: int = 2, info_dim: int = 0
) -> TrueEpisode:
    """A float32 episode with observations drifting by the action (so consecutive rows are distinct)."""
    term, trunc = _flags(length, end)
    obs = rng.standard_normal((length + 1, obs_dim)).astype(np.float32)
    infos = {"goal": rng.standard_normal((length + 1, info_dim)).astype(np.float32)} if info_dim else {}
    return TrueEpisode(
        obs={"observation": obs},
        actions=rng.uniform(-1, 1, (length, act_dim)).astype(np.float32),
        rewards=rng.standard_normal(length).astype(np.float32),
        terminated=term,
        truncated=trunc,
        infos=infos,
    )


def write_d4rl_hdf5(
    path: str | Path,
    episodes: list[TrueEpisode],
    *,
    next_observations: bool = True,
    timeouts: bool = True,
) -> Path:
    """Write `episodes` back to back in the D4RL layout (one row per transition; the final obs only in next_obs)."""
    import h5py

    path = Path(path)
    rows = {
        "observations": np.concatenate([e.obs["observation"][:-1] for e in episodes]),
        "actions": np.concatenate([e.actions for e in episodes]),
        "rewards": np.concatenate([e.rewards for e in episodes]),
        "terminals": np.concatenate([e.terminated for e in episodes]),
    }
    if timeouts:
        rows["timeouts"] = np.concatenate([e.truncated for e in episodes])
    if next_observations:
        rows["next_observations"] = np.concatenate([e.obs["observation"][1:] for e in episodes])
    for key in episodes[0].infos:
        rows[f"infos/{key}"] = np.concatenate([e.infos[key][:-1] for e in episodes])
    with h5py.File(path, "w") as f:
        for key, value in rows.items():
            f.create_dataset(key, data=value)
        f.create_dataset("metadata/algorithm", data="synthetic")
    return path


def write_d4rl_hdf5_large(
    path: str | Path,
    timesteps: int,
    *,
    episode_length: int = 1000,
    obs_dim: int = 17,
    act_dim: int = 6,
    block: int = 100_000,
    seed: int = 0,
) -> Path:
    """A big continuous D4RL file written block by block (bounded memory): timeouts every `episode_length` rows."""
    import h5py

    rng = np.random.default_rng(seed)
    path = Path(path)
    with h5py.File(path, "w") as f:
        shapes = {
            "observations": (obs_dim,),
            "next_observations": (obs_dim,),
            "actions": (act_dim,),
            "rewards": (),
            "terminals": (),
            "timeouts": (),
        }
        ds = {
            k: f.create_dataset(
                k,
                shape=(timesteps, *s),
                dtype=bool if k in ("terminals", "timeouts") else np.float32,
                chunks=(min(block, timesteps), *s),
            )
            for k, s in shapes.items()
        }
        for b0 in range(0, timesteps, block):
            n = min(block, timesteps - b0)
            obs = rng.standard_normal((n + 1, obs_dim)).astype(np.float32)
            ds["observations"][b0 : b0 + n] = obs[:-1]
            ds["next_observations"][b0 : b0 + n] = obs[1:]
            ds["actions"][b0 : b0 + n] = rng.uniform(-1, 1, (n, act_dim)).astype(np.float32)
            ds["rewards"][b0 : b0 + n] = rng.standard_normal(n).astype(np.float32)
            rows = np.arange(b0, b0 + n)
            ds["terminals"][b0 : b0 + n] = False
            ds["timeouts"][b0 : b0 + n] = (rows + 1) % episode_length == 0
    return path


def write_minari(
    dataset_id: str, episodes: list[Any], observation_space: Any, action_space: Any, *, env: Any = None
) -> Any:
    """A local Minari dataset via `create_dataset_from_buffers` (DataCollector would need jax), lossless."""
    import minari

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return minari.create_dataset_from_buffers(
            dataset_id,
            buffer=episodes,
            env=env,
            observation_space=observation_space,
            action_space=action_space,
            algorithm_name="synthetic",
            author="amago-pipe tests",
            author_email="tests@example.org",
            code_permalink="https://example.org/amago-pipe",
            description="synthetic dataset",
            jpeg_encoding=False,
        )


def sampled_minari_episodes(
    observation_space: Any, action_space: Any, lengths: list[int], ends: list[str], seed: int = 0
) -> tuple[list[Any], list[TrueEpisode]]:
    """Minari EpisodeBuffers sampled from the spaces, and the same episodes with flattened observations."""
    from minari.data_collector import EpisodeBuffer

    observation_space.seed(seed)
    action_space.seed(seed + 1)
    rng = np.random.default_rng(seed)
    buffers, truth = [], []
    for length, end in zip(lengths, ends, strict=True):
        steps = [observation_space.sample() for _ in range(length + 1)]
        obs = _stack_nested(steps)
        actions = np.stack([np.asarray(action_space.sample()) for _ in range(length)])
        rewards = rng.standard_normal(length)
        term, trunc = _flags(length, end)
        buffers.append(
            EpisodeBuffer(
                observations=obs,
                actions=actions,
                rewards=rewards,
                terminations=term,
                truncations=trunc,
                infos={"step": np.arange(length + 1)},
            )
        )
        truth.append(TrueEpisode(flatten_obs(obs), actions, rewards, term, trunc, {"step": np.arange(length + 1)}))
    return buffers, truth


def _stack_nested(items: list[Any]) -> Any:
    first = items[0]
    if isinstance(first, dict):
        return {k: _stack_nested([it[k] for it in items]) for k in first}
    if isinstance(first, tuple):
        return tuple(_stack_nested([it[i] for it in items]) for i in range(len(first)))
    return np.stack([np.asarray(it) for it in items])


def write_amago_npz(
    folder: str | Path,
    episode: TrueEpisode,
    *,
    env_name: str = "toy",
    time_start: int = 0,
    discrete_n: int | None = None,
    unix_time: float = 1_700_000_000.0,
) -> Path:
    """One AMAGO FrozenTraj-style `.npz` (`_OBS_KEY_*`, actions, rews, dones, time_idxs, rl2s)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    length = episode.length
    if discrete_n is not None:
        actions = np.zeros((length, discrete_n), np.float32)
        actions[np.arange(length), episode.actions.astype(int)] = 1
    else:
        actions = episode.actions.astype(np.float32)
    prev = np.concatenate([np.zeros((1, actions.shape[1]), np.float32), actions])
    prev_r = np.concatenate([[0.0], episode.rewards]).astype(np.float32)[:, None]
    arrays = {f"_OBS_KEY_{k}": v for k, v in episode.obs.items()}
    arrays.update(
        actions=actions,
        rews=episode.rewards.astype(np.float32)[:, None],
        dones=episode.terminated[:, None],
        time_idxs=(time_start + np.arange(length + 1, dtype=np.int64))[:, None],
        rl2s=np.concatenate([prev_r, prev], axis=1),
    )
    path = folder / f"{env_name}_{uuid.uuid4().hex[:8]}_{unix_time:.6f}.npz"
    np.savez(path, **arrays)  # type: ignore[arg-type]
    return path
