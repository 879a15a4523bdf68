"""Stepper: runs a policy in a BatchedEnv a given number of steps at a time, for online collection.

Unlike `rollout` (a fixed number of whole episodes), a Stepper keeps the envs, the policy's memory and the
episodes in progress between calls, so an online learner can collect a few thousand timesteps per epoch of
endless or long tasks. Long episodes can be handed out in pieces. numpy + the store's Episode; no torch.
"""

from __future__ import annotations

import time as _time
from collections.abc import Callable
from typing import Any

import numpy as np

from amago_pipe.envs.protocol import RolloutPolicy
from amago_pipe.envs.rollout import EpisodeCallback, Recorder, RolloutResult
from amago_pipe.envs.wrapper import BatchedEnv, EnvStep
from amago_pipe.store import Episode


class Stepper:
    """`run(steps)` advances every env `steps` times; finished episodes and pieces go to `on_episode`."""

    def __init__(
        self,
        env: BatchedEnv,
        policy: RolloutPolicy,
        *,
        seed: int,
        source: str = "",
        save_every: tuple[int, int] | None = None,
    ):
        self.env, self.policy = env, policy
        self.seed = seed
        self.save_every = save_every
        self.recorder = Recorder(env, source=source, meta={}, keep_data=True)
        self.rng = np.random.default_rng(seed + 31)
        self.limit = np.full(env.n_envs, np.iinfo(np.int64).max, dtype=np.int64)
        self.step: EnvStep | None = None

    @property
    def meta(self) -> dict[str, Any]:
        """Metadata stamped on every episode handed out from now on (e.g. the policy version)."""
        return self.recorder.meta

    def _start(self) -> EnvStep:
        step = self.env.reset(seed=self.seed)
        self.policy.reset(self.env.n_envs)
        self.recorder.begin(step)
        self._draw_limits(np.ones(self.env.n_envs, dtype=bool))
        return step

    def _draw_limits(self, mask: np.ndarray) -> None:
        if self.save_every is not None and mask.any():
            low, high = self.save_every
            self.limit[mask] = self.rng.integers(low, high + 1, size=int(mask.sum()))

    def run(
        self,
        steps: int,
        *,
        on_episode: Callable[[Episode], None],
        on_stats: EpisodeCallback | None = None,
        check_stop: Callable[[], None] | None = None,
    ) -> RolloutResult:
        """Advance every env `steps` times (the envs start on the first call and keep running after it)."""
        result = RolloutResult(stats=[])
        started = _time.perf_counter()
        step = self.step if self.step is not None else self._start()
        active = np.ones(self.env.n_envs, dtype=bool)
        for _ in range(steps):
            if check_stop is not None:
                check_stop()
            step = self.env.step(self.policy.act(step.obs, step.rl2, step.time))
            result.env_steps += self.env.n_envs
            if step.started.any():
                self.policy.reset_envs(step.started)
            ended = np.zeros(self.env.n_envs, dtype=bool)
            for i, (episode, stats) in self.recorder.record(step, active=active):
                ended[i] = True
                result.stats.append(stats)
                if episode is not None:
                    on_episode(episode)
                if on_stats is not None and episode is not None:
                    on_stats(episode, stats)
            self._draw_limits(ended)
            if self.save_every is not None:
                pieces = self.recorder.pieces(self.limit)
                for _, piece in pieces:
                    on_episode(piece)
                self._draw_limits(np.isin(np.arange(self.env.n_envs), [i for i, _ in pieces]))
        self.step = step
        result.seconds = _time.perf_counter() - started
        return result
