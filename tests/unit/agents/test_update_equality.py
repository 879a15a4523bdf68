"""One update with the fast kernels (`nets.onednn_linear`) gives the losses and gradients of the plain one.

The reference is the same agent, batch and seed with every product on `F.linear` (`plain_kernels`): torch's own
kernels, computed the straightforward way. Tolerance: rtol 1e-4, atol 1e-5 (float32 summation order).
"""

from __future__ import annotations

import pytest
import torch
from unit.data.learning_data import make_spec, make_store

from amago_pipe.agents.agent import Agent
from amago_pipe.config.agent import AgentConfig
from amago_pipe.config.nets import ActorHeadConfig, CriticHeadConfig, FFTstepConfig, ModelConfig, TransformerConfig
from amago_pipe.data.loader import BatchLoader
from amago_pipe.nets import onednn_linear
from amago_pipe.nets.onednn_linear import plain_kernels

MODEL = ModelConfig(
    tstep_encoder=FFTstepConfig(d_hidden=32, d_output=32),
    traj_encoder=TransformerConfig(d_model=32, n_heads=2, n_layers=2),  # dropout on: the seed fixes its masks
)


def _update(agent: Agent, batch: object) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """Losses and the gradient of their sum for every trained parameter, from seed 1."""
    torch.manual_seed(1)
    agent.zero_grad(set_to_none=True)
    losses, _ = agent(batch)
    sum(losses.values()).backward()  # type: ignore[union-attr]
    grads = {k: p.grad.clone() for k, p in agent.named_parameters() if p.grad is not None}
    return {k: v.detach() for k, v in losses.items()}, grads


@pytest.mark.skipif(not onednn_linear.AVAILABLE, reason="torch built without oneDNN")
@pytest.mark.parametrize("kind", ["discrete", "continuous"])
def test_fast_update_equals_the_plain_one(tmp_path, monkeypatch: pytest.MonkeyPatch, kind: str) -> None:
    monkeypatch.setattr(onednn_linear, "ONEDNN_MIN_MACS", 0)  # every product of these tiny nets on oneDNN
    monkeypatch.setattr(onednn_linear, "_enabled", [True])  # also on an Intel CPU, where it is off by default
    store = make_store(tmp_path / "s.zarr", kind, episodes=6)
    batch = next(BatchLoader(store, batch_size=4, seq_len=8, partitions={"protected": 1.0}, seed=0, threaded=False))
    cfg = AgentConfig(
        reward_multiplier=10.0,
        actor=ActorHeadConfig(d_hidden=32),  # type: ignore[call-arg]
        critic=CriticHeadConfig(d_hidden=32, num_critics=3),  # type: ignore[call-arg]
    )  # the defaults otherwise: 4 value samples, n-step targets, the history head
    torch.manual_seed(0)
    agent = Agent(make_spec(kind), MODEL, cfg, max_seq_len=8)
    state = {k: v.clone() for k, v in agent.state_dict().items()}
    losses, grads = _update(agent, batch)
    agent.load_state_dict(state)  # PopArt's statistics moved: start the reference where the first one started
    with plain_kernels():
        ref_losses, ref_grads = _update(agent, batch)
    assert set(losses) == set(ref_losses) and set(grads) == set(ref_grads)
    for name in ref_losses:
        torch.testing.assert_close(losses[name], ref_losses[name], rtol=1e-4, atol=1e-5, msg=name)
    for name in ref_grads:
        torch.testing.assert_close(grads[name], ref_grads[name], rtol=1e-4, atol=1e-5, msg=name)
