"""AgentPolicy: acts with a trained agent in N parallel envs, keeping each env's memory (KV cache / hidden state).

Implements the envs' RolloutPolicy protocol structurally (reset, reset_envs, act) without importing envs.
Pure torch + numpy; must not import stores, YAML or pipelines.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np
import torch

from amago_pipe.agents.traced_step import TracedActing
from amago_pipe.nets.base import TrajState


class ActingAgent(Protocol):
    """What AgentPolicy needs from an agent."""

    model: Any
    actor: Any
    training: bool

    def act_on(self, params: torch.Tensor, *, greedy: bool, valid: torch.Tensor | None = None) -> torch.Tensor: ...

    def valid_actions(self, obs: dict[str, torch.Tensor]) -> torch.Tensor | None: ...


class AgentPolicy:
    """Stepwise inference: one observation per env per call; memory reset per env when its episode restarts."""

    def __init__(
        self,
        agent: ActingAgent,
        *,
        greedy: bool = True,
        device: str | torch.device = "cpu",
        seed: int = 0,
        traced: bool = True,
    ):
        self.agent = agent
        self.traced = TracedActing(agent) if traced else None
        """Steps through a traced graph of the agent once warm (CPU; see `traced_step`), else eagerly."""
        self.greedy = greedy
        self.device = torch.device(device)
        self._rng = torch.Generator().manual_seed(seed).get_state()
        """A private torch RNG stream for sampled actions (leaves the global RNG alone)."""
        self.state: TrajState | None = None
        self.n_envs = 0

    def sampling_state(self) -> list[int]:
        """The private sampling stream's state (JSON-able), to resume it exactly."""
        return [int(b) for b in self._rng.tolist()]

    def set_sampling_state(self, state: list[int]) -> None:
        """Continue the sampling stream of `sampling_state()`."""
        self._rng = torch.tensor(state, dtype=torch.uint8)

    def reset(self, n_envs: int) -> None:
        """Fresh memory for `n_envs` environments."""
        self.n_envs = n_envs
        self.state = self.agent.model.init_state(n_envs, self.device)

    def reset_envs(self, done_mask: np.ndarray) -> None:
        """Forget the history of the envs where `done_mask (N,)` is true."""
        if self.state is None:
            self.reset(len(done_mask))
        mask = torch.as_tensor(np.asarray(done_mask, dtype=bool), device=self.device)
        self.state = self.agent.model.reset(self.state, mask)

    @torch.no_grad()
    def act(self, obs: dict[str, np.ndarray], rl2: np.ndarray, time: np.ndarray) -> np.ndarray:
        """Policy-space actions (N, ...) for one step of every env."""
        n = rl2.shape[0]
        if self.state is None or n != self.n_envs:
            self.reset(n)
        obs_t = {k: torch.as_tensor(np.asarray(v), device=self.device)[:, None] for k, v in obs.items()}  # (N, 1, ...)
        rl2_t = torch.as_tensor(np.asarray(rl2, dtype=np.float32), device=self.device)[:, None]  # (N, 1, 1+A)
        time_t = torch.as_tensor(np.asarray(time, dtype=np.int64), device=self.device)[:, None]  # (N, 1)
        assert self.state is not None  # reset above
        stepped = None if self.traced is None else self.traced.step(obs_t, rl2_t, time_t, self.state)
        if stepped is None:
            states, self.state = self.agent.model(obs_t, rl2_t, time_t, self.state)  # (N, 1, D)
            params = self.agent.actor.params(states, acting=True)[:, 0]  # (N, 1, P)
        else:
            params, self.state = stepped
        valid = self.agent.valid_actions(obs_t)  # (N, 1, n) or None
        valid = None if valid is None else valid[:, 0]
        if self.greedy:
            actions = self.agent.act_on(params, greedy=True, valid=valid)  # (N, ...)
        else:
            with torch.random.fork_rng(devices=[]):
                torch.set_rng_state(self._rng)
                actions = self.agent.act_on(params, greedy=False, valid=valid)
                self._rng = torch.get_rng_state()
        return actions.cpu().numpy()
