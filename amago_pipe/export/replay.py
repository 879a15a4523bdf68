"""Replay recorded episodes through the original agent and through exported step programs; compare the actions.

Episodes are batched as parallel envs and replayed teacher-forced (each step is told the recorded previous action
and reward); an env whose episode ends starts it again with fresh memory, so a replay of `steps` > max_seq_len
exercises the rolling cache and per-env resets. numpy + torch.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from amago_pipe.actions import ActionCodec
from amago_pipe.agents.agent import Agent
from amago_pipe.agents.policy import AgentPolicy
from amago_pipe.store import Episode

StepFn = Callable[..., Sequence[np.ndarray]]
"""`(obs_1..obs_k, prev_action, prev_reward, time, state_1..state_m) -> (action, state'...)` on numpy arrays."""


@dataclass
class Replay:
    """The inputs of every step of a replay: (T, N, ...) arrays."""

    obs: dict[str, np.ndarray]
    prev_action: np.ndarray
    prev_reward: np.ndarray
    time: np.ndarray
    """(T, N) int64; 0 where an env starts (again) an episode, with fresh memory."""

    @property
    def steps(self) -> int:
        return int(self.time.shape[0])


def build_replay(episodes: Sequence[Episode], steps: int) -> Replay:
    """`steps` steps of `len(episodes)` parallel envs, each env cycling through its episode."""
    n = len(episodes)
    first = episodes[0]
    obs = {k: np.zeros((steps, n, *v.shape[1:]), v.dtype) for k, v in first.obs.items()}
    actions = np.asarray(first.actions)
    prev_action = np.zeros((steps, n, *actions.shape[1:]), actions.dtype)
    prev_reward = np.zeros((steps, n), np.float32)
    time = np.zeros((steps, n), np.int64)
    for i, ep in enumerate(episodes):
        pos = np.arange(steps) % ep.length  # (T,) step within the (repeated) episode
        for k in obs:
            obs[k][:, i] = ep.obs[k][pos]
        has_prev = pos > 0
        prev_action[has_prev, i] = np.asarray(ep.actions)[pos[has_prev] - 1]
        prev_reward[has_prev, i] = np.asarray(ep.rewards, np.float32)[pos[has_prev] - 1]
        time[:, i] = pos
    return Replay(obs, prev_action, prev_reward, time)


@torch.no_grad()
def replay_agent(agent: Agent, replay: Replay) -> np.ndarray:
    """Greedy env-space actions (T, N, ...) of the agent, through the rollout path (AgentPolicy + ActionCodec)."""
    codec = ActionCodec(agent.spec.action)
    n = replay.time.shape[1]
    policy = AgentPolicy(agent, greedy=True, device=next(agent.parameters()).device)
    policy.reset(n)
    out = []
    for t in range(replay.steps):
        time = replay.time[t]
        if t > 0:
            policy.reset_envs(time == 0)
        started = (time > 0)[:, None]
        rl2 = np.concatenate([replay.prev_reward[t][:, None], codec.rl2_features(replay.prev_action[t])], axis=1)
        actions = policy.act({k: v[t] for k, v in replay.obs.items()}, (rl2 * started).astype(np.float32), time)
        out.append(codec.to_env(actions))
    return np.stack(out)


def replay_program(
    step: StepFn, replay: Replay, obs_keys: Sequence[str], initial_state: Sequence[np.ndarray], axes: Sequence[int]
) -> np.ndarray:
    """Env-space actions (T, N, ...) of a step program; `initial_state` is the memory of N fresh envs and `axes`
    the batch axis of each state tensor (where a restarting env's memory is reset)."""
    state = [s.copy() for s in initial_state]
    out = []
    for t in range(replay.steps):
        time = replay.time[t]
        restart = np.flatnonzero(time == 0) if t > 0 else np.zeros(0, np.int64)
        for s, init, axis in zip(state, initial_state, axes, strict=True):
            if len(restart):
                index: list[Any] = [slice(None)] * s.ndim
                index[axis] = restart
                s[tuple(index)] = init[tuple(index)]
        inputs = [replay.obs[k][t] for k in obs_keys] + [replay.prev_action[t], replay.prev_reward[t], time]
        action, *new_state = step(*inputs, *state)
        state = [np.array(s) for s in new_state]
        out.append(np.asarray(action))
    return np.stack(out)


def action_error(reference: np.ndarray, other: np.ndarray) -> float:
    """Largest difference between two action arrays: |a - b| / (1 + |a|) (exact ids for discrete kinds)."""
    ref = reference.astype(np.float64)
    diff = np.abs(ref - other.astype(np.float64)) / (1.0 + np.abs(ref))
    return float(diff.max()) if diff.size else 0.0
