"""One step of a trained policy as a pure function of tensors, its memory made explicit: `StepProgram`.

    (obs_1..obs_k, prev_action, prev_reward, time, state_1..state_m) -> (action, state_1'..state_m')

Observations are batched `(N, ...)` in the stored dtypes (keys sorted; a text key as its `(N, max_tokens)` int32 word
ids, the vocabulary in the manifest's `policy.spec`, tokenized as `amago_pipe.tokens` does); `prev_action` is the env-space action
taken before this observation and `prev_reward` the reward it earned (both ignored where `time == 0`, an episode
start); the returned action is the greedy env-space action. The memory tensors are the trajectory encoder's state
(KV cache ring, GRU hidden state, Mamba conv/SSM states; none for `ff`), described by `state_contract`. The
program is traced (TorchScript) and exported (ONNX) with static shapes, so it runs without amago-pipe. Pure torch.
"""

from __future__ import annotations

import copy
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from amago_pipe.agents.agent import Agent
from amago_pipe.spec import DataSpec


def state_contract(agent: Agent) -> list[dict[str, Any]]:
    """Name, shape (`N` = envs), dtype, batch axis and initial value of each memory tensor, in input order."""
    state = agent.model.init_state(1, "cpu")
    out = []
    for name in sorted(state):
        tensor = state[name]
        axis = _batch_axis(agent, name)
        shape: list[Any] = list(tensor.shape)
        shape[axis] = "N"
        out.append(
            {
                "name": name,
                "shape": shape,
                "dtype": str(tensor.dtype).removeprefix("torch."),
                "batch_axis": axis,
                "init": tensor.flatten()[0].item() if tensor.numel() else 0,  # every element starts equal
            }
        )
    return out


def _batch_axis(agent: Agent, name: str) -> int:
    """The axis of `name` that grows with the number of envs (found by comparing states of 1 and 2 envs)."""
    one, two = agent.model.init_state(1, "cpu")[name].shape, agent.model.init_state(2, "cpu")[name].shape
    return next(i for i, (a, b) in enumerate(zip(one, two, strict=True)) if a != b)


class StepProgram(nn.Module):
    """The traceable single step of `agent` (a deep copy in eval mode; the agent itself is not changed)."""

    low: torch.Tensor
    high: torch.Tensor
    bounded: torch.Tensor

    def __init__(self, agent: Agent):
        super().__init__()
        agent = copy.deepcopy(agent).cpu().eval().requires_grad_(False)
        encoder = agent.model.traj_encoder
        if hasattr(encoder, "static_cache"):
            setattr(encoder, "static_cache", True)  # noqa: B010  static shapes
            setattr(encoder, "cache_out_of_place", True)  # noqa: B010  ONNX has no in-place writes
        self.model, self.actor = agent.model, agent.actor
        self.spec: DataSpec = agent.spec
        self.obs_keys = sorted(self.spec.observations)
        self.mask_key = agent.mask_key
        self.state_names = [s["name"] for s in state_contract(agent)]
        action = self.spec.action
        self.kind, self.n, self.nvec = action.kind, action.n, tuple(action.nvec)
        self.action_shape = tuple(action.shape)
        if action.kind == "continuous":
            low = torch.tensor(action.low, dtype=torch.float32).reshape(action.shape)
            high = torch.tensor(action.high, dtype=torch.float32).reshape(action.shape)
            bounded = torch.isfinite(low) & torch.isfinite(high)
            self.register_buffer("bounded", bounded)
            self.register_buffer("low", torch.where(bounded, low, -torch.ones_like(low)))
            self.register_buffer("high", torch.where(bounded, high, torch.ones_like(high)))
        self.eval()

    def train(self, mode: bool = True) -> StepProgram:
        """Always in evaluation mode (exporters switch modes back and forth)."""
        return super().train(False)

    def input_names(self) -> list[str]:
        return [f"obs/{k}" for k in self.obs_keys] + ["prev_action", "prev_reward", "time"] + self.state_names

    def output_names(self) -> list[str]:
        return ["action"] + [f"next/{n}" for n in self.state_names]

    def forward(self, *inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        k = len(self.obs_keys)
        obs = {key: inputs[i][:, None] for i, key in enumerate(self.obs_keys)}  # (N, 1, ...)
        prev_action, prev_reward, time = inputs[k], inputs[k + 1], inputs[k + 2]
        state = {name: inputs[k + 3 + i].clone() for i, name in enumerate(self.state_names)}  # updated in place
        started = (time > 0).to(torch.float32)[:, None]  # (N, 1): no previous step at an episode start
        rl2 = torch.cat([prev_reward.to(torch.float32)[:, None], self._features(prev_action)], dim=-1) * started
        out, new_state = self.model(obs, rl2[:, None], time[:, None], state)  # (N, 1, D)
        valid = None if self.mask_key is None else obs[self.mask_key].to(torch.float32)  # (N, 1, n)
        params = self.actor.params(out[:, :1], acting=True)  # (N, 1, 1, P): the acting gamma
        actions = self.actor.act(params, valid, greedy=True)[:, 0, 0].reshape(-1, *self.action_shape)  # policy space
        return (self._to_env(actions), *(new_state[name] for name in self.state_names))

    def _features(self, env_actions: torch.Tensor) -> torch.Tensor:
        """rl2 action features (N, A) of env-space actions, as `ActionCodec.rl2_features`."""
        if self.kind == "discrete":
            return F.one_hot(env_actions.long().reshape(-1), self.n).to(torch.float32)
        if self.kind == "multidiscrete":
            cols = [F.one_hot(env_actions[:, i].long(), n).to(torch.float32) for i, n in enumerate(self.nvec)]
            return torch.cat(cols, dim=-1)
        flat = env_actions.reshape(env_actions.shape[0], -1).to(torch.float32)
        if self.kind == "multibinary":
            return flat
        scale = torch.where(self.high > self.low, self.high - self.low, torch.ones_like(self.high))
        unit = torch.clamp(2.0 * (env_actions.to(torch.float32) - self.low) / scale - 1.0, -1.0, 1.0)
        return torch.where(self.bounded, unit, env_actions.to(torch.float32)).reshape(env_actions.shape[0], -1)

    def _to_env(self, actions: torch.Tensor) -> torch.Tensor:
        """Policy-space actions -> env space, as `ActionCodec.to_env`."""
        if self.kind != "continuous":
            return actions.to(torch.int64)
        unit = torch.where(self.bounded, torch.clamp(actions, -1.0, 1.0), actions)
        env = self.low + (unit + 1.0) * 0.5 * (self.high - self.low)
        return torch.where(self.bounded, env, actions).to(torch.float32)

    def example_inputs(self, n_envs: int) -> tuple[torch.Tensor, ...]:
        """Inputs of a first step of `n_envs` envs (zeros, time 0, initial memory)."""
        obs = [
            torch.zeros((n_envs, *a.shape), dtype=getattr(torch, a.dtype if a.dtype != "bool" else "bool"))
            for a in (self.spec.observations[k] for k in self.obs_keys)
        ]
        action = self.spec.action
        prev_action = torch.zeros(
            (n_envs, *action.shape), dtype=torch.float32 if self.kind == "continuous" else torch.int64
        )
        state = self.model.init_state(n_envs, "cpu")
        return (
            *obs,
            prev_action,
            torch.zeros(n_envs, dtype=torch.float32),
            torch.zeros(n_envs, dtype=torch.int64),
            *(state[n] for n in self.state_names),
        )
