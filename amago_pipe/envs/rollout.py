"""Rollouts: run any RolloutPolicy in a BatchedEnv, collecting finished episodes and per-episode stats.

Policies implement `amago_pipe.envs.protocol.RolloutPolicy`. numpy + the store's Episode; no torch.
"""

from __future__ import annotations

import time as _time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from amago_pipe.envs.factory import ENV_ERROR
from amago_pipe.envs.protocol import RolloutPolicy
from amago_pipe.envs.stats import EpisodeStats, summarize
from amago_pipe.envs.tasks import TASK_INFO
from amago_pipe.envs.wrapper import BatchedEnv, EnvStep
from amago_pipe.store import Episode

INFO_PREFIX = "amago_pipe/"
"""`info` keys starting with this prefix (e.g. `amago_pipe/attempt_2_return`) are kept per episode (last value)."""
SUCCESS_KEYS = ("success", "is_success")
"""`info` keys read as the episode's success flag (the last value reported in the episode)."""


@dataclass
class RolloutResult:
    """Everything one rollout produced."""

    stats: list[EpisodeStats]
    episodes: list[Episode] = field(default_factory=list)
    """The finished episodes (empty when `keep_episodes=False`)."""
    env_steps: int = 0
    """Vector steps times n_envs, wasted ones included (envs past their quota, autoreset steps)."""
    seconds: float = 0.0
    held_out: frozenset[str] = frozenset()
    """Names of the held-out tasks that ran (summarised apart from the training tasks)."""
    task_notes: tuple[str, ...] = ()
    """How a task set's spaces were unified (padding, joined actions), for reports."""

    def summary(self) -> dict[str, Any]:
        """Return/length/success statistics (see `summarize`), plus throughput."""
        out = summarize(self.stats, held_out=self.held_out)
        out["env_steps"] = self.env_steps
        out["seconds"] = round(self.seconds, 3)
        out["env_steps_per_s"] = round(self.env_steps / self.seconds, 1) if self.seconds > 0 else None
        return out


EpisodeCallback = Callable[[Episode, EpisodeStats], None]


def rollout(
    env: BatchedEnv,
    policy: RolloutPolicy,
    episodes: int,
    *,
    seed: int | None = None,
    source: str = "",
    meta: dict[str, Any] | None = None,
    keep_episodes: bool = True,
    on_episode: EpisodeCallback | None = None,
    check_stop: Callable[[], None] | None = None,
) -> RolloutResult:
    """Run `policy` until `episodes` episodes have finished; env i contributes a fixed quota of them.

    Fixed per-env quotas keep the sample unbiased (short episodes are not over-represented). Each finished
    episode is passed to `on_episode` as soon as it ends (e.g. to a store writer) and kept if `keep_episodes`.
    With neither, only statistics are recorded (no observation buffers: cheap for image envs).
    """
    n = env.n_envs
    quota = np.full(n, episodes // n, dtype=np.int64)
    quota[: episodes % n] += 1
    finished = np.zeros(n, dtype=np.int64)
    notes = env.tasks.notes if env.tasks is not None else ()
    result = RolloutResult(stats=[], held_out=env.held_out, task_notes=notes)
    recorder = Recorder(env, source=source, meta=meta or {}, keep_data=keep_episodes or on_episode is not None)
    started_at = _time.perf_counter()
    step = env.reset(seed=seed)
    policy.reset(n)
    recorder.begin(step)
    while np.any(finished < quota):
        if check_stop is not None:
            check_stop()
        actions = policy.act(step.obs, step.rl2, step.time)
        step = env.step(actions)
        result.env_steps += n
        if step.started.any():
            policy.reset_envs(step.started)
        for i, (episode, stats) in recorder.record(step, active=finished < quota):
            finished[i] += 1
            result.stats.append(stats)
            if keep_episodes and episode is not None:
                result.episodes.append(episode)
            if on_episode is not None and episode is not None:
                on_episode(episode, stats)
    result.seconds = _time.perf_counter() - started_at
    return result


class Recorder:
    """Time-major buffers (C, N, ...) for all envs; a finished episode (or a saved piece of a long one) is one
    slice of them per array."""

    def __init__(self, env: BatchedEnv, *, source: str, meta: dict[str, Any], keep_data: bool, capacity: int = 256):
        self.env = env
        self.keep_data = keep_data
        """False: record rewards and flags only (statistics), no observations or actions."""
        self.n = env.n_envs
        self.source = source
        self.meta = meta
        self.capacity = capacity
        spec = env.spec
        obs_specs = spec.observations.items() if keep_data else []
        self.obs = {k: np.zeros((capacity, self.n, *s.shape), dtype=s.dtype) for k, s in obs_specs}
        self.actions = np.zeros((capacity, self.n, *(spec.action.shape if keep_data else ())), dtype=spec.action.dtype)
        self.rewards = np.zeros((capacity, self.n), dtype=np.float32)
        self.terminated = np.zeros((capacity, self.n), dtype=bool)
        self.truncated = np.zeros((capacity, self.n), dtype=bool)
        self.row = 0
        """Row of the latest observation."""
        self.start = np.zeros(self.n, dtype=np.int64)
        """Row of each env's current episode's first observation."""
        self.info: dict[str, np.ndarray] = {}
        """Last value of each tracked info key per env (NaN: not reported in this episode)."""
        self.offset = np.zeros(self.n, dtype=np.int64)
        """Timesteps of each env's current episode already handed out as pieces."""
        self.carried = np.zeros(self.n, dtype=np.float64)
        """Return of those pieces."""

    def begin(self, step: EnvStep) -> None:
        self.row = 0
        self.start[:] = 0
        self.offset[:] = 0
        self.carried[:] = 0.0
        for k, arr in self.obs.items():
            arr[0] = step.obs[k]
        self._track_info(step)

    def record(self, step: EnvStep, *, active: np.ndarray) -> list[tuple[int, tuple[Episode | None, EpisodeStats]]]:
        """Write one vector step; return (env index, (episode, stats)) for each active env that finished."""
        if self.row + 1 >= self.capacity:
            self._make_room(active)
        self.row += 1
        r = self.row
        for k, arr in self.obs.items():
            arr[r] = step.obs[k]
        if step.env_actions is not None and self.keep_data:
            self.actions[r] = step.env_actions
        self.rewards[r] = step.reward
        self.terminated[r] = step.terminated
        self.truncated[r] = step.truncated
        self.start[step.started] = r
        for key in self.info:
            self.info[key][step.started] = np.nan
        self._track_info(step)
        out = []
        for i in np.flatnonzero(step.done & active):
            out.append((int(i), self._finish(int(i))))
        return out

    def _episode(self, i: int, s: int, e: int) -> Episode:
        """Env i's episode whose observations are rows s..e (its actions/rewards are rows s+1..e)."""
        return Episode(
            obs={k: v[s : e + 1, i].copy() for k, v in self.obs.items()},  # (T+1, ...)
            actions=self.actions[s + 1 : e + 1, i].copy(),  # (T, ...)
            rewards=self.rewards[s + 1 : e + 1, i].copy(),  # (T,)
            terminated=self.terminated[s + 1 : e + 1, i].copy(),
            truncated=self.truncated[s + 1 : e + 1, i].copy(),
            env_name=self.env.task_name(i),
            source=self.source,
            time_start=int(self.offset[i]),
            meta=dict(self.meta),
        )

    def pieces(self, limit: np.ndarray) -> list[tuple[int, Episode]]:
        """Hand out the running part of each env whose unsaved steps reached `limit[i]` (N,) as a piece: it ends
        at the latest observation, which the next piece starts from (its `time_start` continues the count)."""
        out = []
        for i in np.flatnonzero(self.row - self.start >= limit):
            s, e = int(self.start[i]), self.row
            out.append((int(i), self._episode(int(i), s, e)))
            self.offset[i] += e - s
            self.carried[i] += float(self.rewards[s + 1 : e + 1, i].sum(dtype=np.float64))
            self.start[i] = e
        return out

    def _finish(self, i: int) -> tuple[Episode | None, EpisodeStats]:
        """Env i's finished episode (None when not kept, or when the env failed under `on_error: skip`)."""
        s, e = int(self.start[i]), self.row
        info = {k: float(v[i]) for k, v in self.info.items() if not np.isnan(v[i])}
        episode = self._episode(i, s, e) if self.keep_data and ENV_ERROR not in info else None
        success = next((bool(info.pop(k)) for k in SUCCESS_KEYS if k in info), None)
        for k in SUCCESS_KEYS:
            info.pop(k, None)
        stats = EpisodeStats(
            env_name=self.env.task_name(i),
            env_index=i,
            episode_return=float(self.carried[i] + self.rewards[s + 1 : e + 1, i].sum(dtype=np.float64)),
            length=int(self.offset[i] + e - s),
            terminated=bool(self.terminated[e, i]),
            truncated=bool(self.truncated[e, i]),
            success=success,
            info=info,
        )
        for v in self.info.values():
            v[i] = np.nan
        self.offset[i], self.carried[i] = 0, 0.0
        self.start[i] = self.row + 1  # NEXT_STEP autoreset: the next row is this env's new first observation
        return episode, stats

    def _track_info(self, step: EnvStep) -> None:
        """Remember the latest value of success flags and `amago_pipe/` info keys per env."""
        for key, values in step.infos.items():
            if key.startswith("_") or key == TASK_INFO or not (key in SUCCESS_KEYS or key.startswith(INFO_PREFIX)):
                continue
            mask = np.asarray(step.infos.get(f"_{key}", np.ones(self.n, dtype=bool)), dtype=bool)
            try:
                vals = np.asarray(values, dtype=np.float64).reshape(self.n)
            except (TypeError, ValueError):
                continue  # non-numeric info values are not statistics
            slot = self.info.setdefault(key, np.full(self.n, np.nan))
            slot[mask] = vals[mask]

    def _make_room(self, active: np.ndarray) -> None:
        """Drop rows no running episode needs; grow (x2) when more than half the buffer is still needed."""
        keep_from = int(self.start[active].min()) if active.any() else self.row
        keep = self.row + 1 - keep_from
        new_cap = self.capacity * 2 if keep > self.capacity // 2 else self.capacity
        arrays: list[tuple[dict[str, np.ndarray] | None, str, np.ndarray]] = [
            (self.obs, k, v) for k, v in self.obs.items()
        ]
        for name in ("actions", "rewards", "terminated", "truncated"):
            arrays.append((None, name, getattr(self, name)))
        for holder, name, arr in arrays:
            fresh = np.zeros((new_cap, *arr.shape[1:]), dtype=arr.dtype)
            fresh[:keep] = arr[keep_from : self.row + 1]
            if holder is None:
                setattr(self, name, fresh)
            else:
                holder[name] = fresh
        self.capacity = new_cap
        self.start = np.maximum(self.start - keep_from, 0)
        self.row = keep - 1
