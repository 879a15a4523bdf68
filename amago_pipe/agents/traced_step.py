"""Acting through a traced step: the sequence model and the actor's acting parameters as one TorchScript graph.

A rollout step of a small model is dominated by dispatching ~100 small ops one by one; the same kernels run
from a traced graph take ~1.5x less CPU time. The graph shares the live agent's parameters (optimizer steps,
policy averaging and `load_state_dict` all write in place, so it follows them), takes the sigma-reparam layers'
effective weights as inputs (computed eagerly, once per weight change), and is rebuilt when the env count, the
parameter tensors, the observations' or memory's shapes or dtypes, or the device change. Every build is checked
against the eager step on the same inputs; a build that fails or disagrees is dropped for good and acting stays
eager. Pure torch.
"""

from __future__ import annotations

import logging
import warnings
from typing import Any

import torch
from torch import nn

from amago_pipe.nets.base import TrajState
from amago_pipe.nets.heads import ActorHead
from amago_pipe.nets.layers import SigmaReparamLinear

log = logging.getLogger(__name__)

WARMUP_STEPS = 32
"""Eager steps before a graph is built (short rollouts, e.g. a test's, never pay for tracing)."""
TOLERANCE = 1e-4
"""Largest difference between the traced and eager step (parameters and memory) a build may show."""


class _Step(nn.Module):
    """(obs_1..k, rl2, time, state_1..m, sigma weights) -> (acting params (N, 1, P), state_1'..m')."""

    def __init__(self, model: nn.Module, actor: ActorHead, obs_keys: list[str], state_names: list[str]):
        super().__init__()
        self.model, self.actor = model, actor
        self.obs_keys, self.state_names = obs_keys, state_names
        self.sigma = [m for part in (model, actor) for m in part.modules() if isinstance(m, SigmaReparamLinear)]

    def forward(self, *x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        k, m = len(self.obs_keys), len(self.state_names)
        obs = {key: x[i][:, None] for i, key in enumerate(self.obs_keys)}  # (N, 1, ...)
        state = {name: x[k + 2 + i] for i, name in enumerate(self.state_names)}
        for layer, weight in zip(self.sigma, x[k + 2 + m :], strict=True):
            layer.given_weight = weight
        try:
            out, state = self.model(obs, x[k][:, None], x[k + 1][:, None], state)  # (N, 1, D)
            params = self.actor.params(out, acting=True)[:, 0]  # (N, 1, P)
        finally:
            for layer in self.sigma:
                layer.given_weight = None
        return (params, *(state[name] for name in self.state_names))


class TracedActing:
    """One traced step of `agent` per env count; `step` returns None where acting stays eager."""

    def __init__(self, agent: Any):
        self.agent = agent
        self.disabled = False
        """A build failed or disagreed with the eager step: this agent acts eagerly from now on."""
        self._graph: Any = None
        self._key: tuple[Any, ...] = ()
        self._eager_steps = 0
        self._sigma: list[SigmaReparamLinear] = []
        self._params: list[torch.Tensor] = []

    def step(
        self, obs: dict[str, torch.Tensor], rl2: torch.Tensor, time: torch.Tensor, state: TrajState
    ) -> tuple[torch.Tensor, TrajState] | None:
        """Acting params `(N, 1, P)` and the next state of one step (`obs (N, 1, ...)`, `rl2 (N, 1, F)`, `time
        (N, 1)`, the state updated in place where the eager step does), or None: step eagerly this time."""
        agent = self.agent
        if (
            self.disabled
            or agent.training
            or rl2.device.type != "cpu"
            or torch.is_grad_enabled()
            or torch.is_autocast_enabled("cpu")
        ):
            return None
        if not self._params:
            self._params = [*agent.model.parameters(), *agent.actor.parameters()]
        key = (  # another batch, observation or memory layout, or moved or replaced weights: build again
            rl2.shape,
            *((k, v.shape, v.dtype) for k, v in sorted(obs.items())),
            *((n, t.shape, t.dtype) for n, t in sorted(state.items())),
            *(p.data_ptr() for p in self._params),
        )
        if key != self._key:
            self._key, self._graph, self._eager_steps = key, None, 0
        if self._graph is None:
            self._eager_steps += 1
            if self._eager_steps <= WARMUP_STEPS:
                return None
            self._build(obs, rl2, time, state)
            if self._graph is None:
                return None
        names = sorted(state)
        inputs = self._inputs(obs, rl2, time, state, names)
        params, *new = self._graph(*inputs)
        return params, dict(zip(names, new, strict=True))

    def _inputs(
        self, obs: dict[str, torch.Tensor], rl2: torch.Tensor, time: torch.Tensor, state: TrajState, names: list[str]
    ) -> tuple[torch.Tensor, ...]:
        weights = [layer.acting_weight() for layer in self._sigma]  # eager; reused until a weight changes
        return (*(obs[k][:, 0] for k in sorted(obs)), rl2[:, 0], time[:, 0], *(state[n] for n in names), *weights)

    def _build(self, obs: dict[str, torch.Tensor], rl2: torch.Tensor, time: torch.Tensor, state: TrajState) -> None:
        """Trace the step on these inputs (copies of the state) and keep it if it equals the eager step."""
        agent, names = self.agent, sorted(state)
        encoder = agent.model.traj_encoder
        module = _Step(agent.model, agent.actor, sorted(obs), names)
        self._sigma = module.sigma
        copies = [{n: t.clone() for n, t in state.items()} for _ in range(3)]
        had_static = getattr(encoder, "static_cache", None)
        try:
            if had_static is not None:
                encoder.static_cache = True  # static shapes: no host sync, every ring slot read
            with warnings.catch_warnings():  # shapes and branches are fixed on purpose; the check below verifies
                warnings.simplefilter("ignore", torch.jit.TracerWarning)
                warnings.simplefilter("ignore", DeprecationWarning)  # torch.jit.trace's own notice
                graph = torch.jit.trace(module, self._inputs(obs, rl2, time, copies[0], names), check_trace=False)
        except Exception as err:  # any failure: acting stays eager, as it was
            self._give_up(f"tracing failed ({type(err).__name__}: {err})")
            return
        finally:
            if had_static is not None:
                encoder.static_cache = had_static
        traced_params, *traced_state = graph(*self._inputs(obs, rl2, time, copies[1], names))
        out, eager_state = agent.model(obs, rl2, time, copies[2])
        eager = [agent.actor.params(out, acting=True)[:, 0], *(eager_state[n] for n in names)]
        gap = max(_gap(a, b) for a, b in zip(eager, [traced_params, *traced_state], strict=True))
        if gap > TOLERANCE:
            self._give_up(f"the traced step differs from the eager one by {gap:.2e}")
            return
        self._graph = graph

    def _give_up(self, why: str) -> None:
        self.disabled = True
        log.info("acting stays eager: %s", why)


def _gap(a: torch.Tensor, b: torch.Tensor) -> float:
    """Largest absolute difference of two tensors (inf where shapes or dtypes differ)."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return float("inf")
    return float((a.double() - b.double()).abs().max()) if a.numel() else 0.0
