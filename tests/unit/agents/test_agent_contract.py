"""The agent contract: every registered agent x every action kind x every registered sequence model, at tiny size.

One update gives a finite loss; its gradients reach every trainable parameter of the sequence model, actor, critics
and PopArt; the target networks and the TD targets carry no gradient; a checkpoint round trip (state dict through a
file) gives a new agent whose loss on the same batch is the same. A new agent or encoder registered in
`amago_pipe.config.registries` is covered without touching this file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from unit.data.learning_data import make_spec, make_store

from amago_pipe.agents.agent import Agent
from amago_pipe.agents.terms import terms as terms_of
from amago_pipe.config.build import build_strict
from amago_pipe.config.nets import ModelConfig
from amago_pipe.config.registries import AGENTS, TRAJ_ENCODERS
from amago_pipe.data.loader import BatchLoader
from amago_pipe.registry import import_path

KINDS = ("discrete", "continuous", "multidiscrete", "multibinary")
SEQ = 6
TINY_TRAJ: dict[str, dict[str, Any]] = {
    "ff": {"d_model": 16},
    "gru": {"d_model": 16},
    "transformer": {"d_model": 16, "n_heads": 2, "n_layers": 1},
    "mamba": {"d_model": 16, "n_layers": 1},
}
"""Tiny sizes of the built-in sequence models; a registered one missing here is built with its defaults."""


def _agent(agent_type: str, traj: str, kind: str) -> Agent:
    cfg_cls = AGENTS.get(agent_type)
    critic: dict[str, Any] = {"d_hidden": 16, "num_critics": 3}
    if agent_type == "multitask":
        critic.update(output="bins", num_bins=16)
    cfg = build_strict(cfg_cls, {"type": agent_type, "actor": {"d_hidden": 16}, "critic": critic, "online_coeff": 1.0,
                                 "offline_coeff": 0.5, "targets": {"n_step": 2}, "reward_multiplier": 10.0})  # fmt: skip
    model = build_strict(
        ModelConfig,
        {"tstep_encoder": {"type": "ff", "d_hidden": 16, "d_output": 16},
         "traj_encoder": {"type": traj, **TINY_TRAJ.get(traj, {})}},
    )  # fmt: skip
    impl = import_path(cfg_cls.impl, what="agent")
    return impl(make_spec(kind), model, cfg, max_seq_len=SEQ)  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def batches(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = {}
    for kind in KINDS:
        store = make_store(tmp_path_factory.mktemp(kind) / "s.zarr", kind, episodes=6, lengths=(3, 10))
        loader = BatchLoader(store, batch_size=3, seq_len=SEQ, partitions={"protected": 1.0}, seed=0, threaded=False)
        out[kind] = next(loader)
    return out


def _loss(agent: Agent, batch: Any) -> torch.Tensor:
    torch.manual_seed(123)  # the TD targets draw critics and continuous actions: same draws on both sides
    return sum(agent(batch)[0].values())


@pytest.mark.parametrize("traj", TRAJ_ENCODERS.names())
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("agent_type", AGENTS.names())
def test_agent_contract(batches, tmp_path: Path, agent_type: str, kind: str, traj: str) -> None:
    torch.manual_seed(0)
    agent = _agent(agent_type, traj, kind).eval()  # eval: no dropout, so the round trip compares like with like
    batch = batches[kind]

    loss = _loss(agent, batch)
    assert loss.dim() == 0 and torch.isfinite(loss), f"loss {loss}"
    loss.backward()
    trained = {n: p for n, p in agent.named_parameters() if p.requires_grad}
    assert trained, "no trainable parameters"
    missing = [n for n, p in trained.items() if p.grad is None or not torch.isfinite(p.grad).all()]
    assert not missing, f"no (finite) gradient reaches: {missing}"
    for frozen in (agent.target_actor, agent.target_critic):
        assert all(not p.requires_grad and p.grad is None for p in frozen.parameters())

    states, _ = agent.model(batch.obs, batch.rl2, batch.time)
    terms = terms_of(agent, states, batch)
    assert not terms.targets.requires_grad and not terms.q_data.requires_grad and not terms.v_pi.requires_grad

    path = tmp_path / "agent.pt"
    torch.save(agent.state_dict(), path)
    torch.manual_seed(1)  # a differently initialised twin: everything it computes must come from the file
    twin = _agent(agent_type, traj, kind).eval()
    twin.load_state_dict(torch.load(path, weights_only=True))
    torch.testing.assert_close(_loss(twin, batch), _loss(agent, batch), rtol=1e-5, atol=1e-6)
