"""AMAGO's extra action heads in the update: multidiscrete, multibinary, discrete-as-continuous, GMM and n-step."""

from __future__ import annotations

import pytest
import torch
from unit.data.learning_data import make_spec, make_store

from amago_pipe.agents.agent import Agent
from amago_pipe.config.agent import AgentConfig, TargetsConfig
from amago_pipe.config.nets import ActorHeadConfig, CriticHeadConfig, FFTstepConfig, GruConfig, ModelConfig
from amago_pipe.data.loader import BatchLoader
from amago_pipe.testing.recall import MEMORY_RECIPE

TINY = ModelConfig(tstep_encoder=FFTstepConfig(d_hidden=16, d_output=16), traj_encoder=GruConfig(d_model=16))
CASES = {
    "multidiscrete": ("multidiscrete", {}, {}),
    "multibinary": ("multibinary", {}, {}),
    "discrete_as_continuous": ("discrete", {}, {"discrete_as_continuous": True}),
    "gmm": ("continuous", {"continuous_dist": "gmm", "gmm_components": 3}, {}),
}


def _batch(tmp_path_factory: pytest.TempPathFactory, kind: str) -> object:
    store = make_store(tmp_path_factory.mktemp(kind) / "s.zarr", kind, episodes=6)
    return next(BatchLoader(store, batch_size=4, seq_len=6, partitions={"protected": 1.0}, seed=0, threaded=False))


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("n_step", [1, 3])
@pytest.mark.parametrize("memory_recipe", [False, True])
def test_update_is_finite_trains_every_part_and_acts(
    tmp_path_factory, case: str, n_step: int, memory_recipe: bool
) -> None:
    kind, actor, critic = CASES[case]
    torch.manual_seed(0)
    recipe = MEMORY_RECIPE if memory_recipe else {"critic": {}, "targets": {}}  # its blocks, and nothing else
    cfg = AgentConfig(
        actor=ActorHeadConfig(d_hidden=16, **actor),  # type: ignore[arg-type]
        critic=CriticHeadConfig(d_hidden=16, num_critics=2, **critic, **recipe["critic"]),  # type: ignore[arg-type]
        targets=TargetsConfig(n_step=n_step, **recipe["targets"]),  # Python builds tree_backup at n_step 1 too
        reward_multiplier=10.0,
    )
    spec = make_spec(kind)
    agent = Agent(spec, TINY, cfg, max_seq_len=6)
    losses, _ = agent(_batch(tmp_path_factory, kind))
    loss = sum(losses.values())
    assert torch.isfinite(loss)
    loss.backward()
    for part in ("model", "actor", "critic"):
        grads = [p.grad for p in getattr(agent, part).parameters() if p.requires_grad]
        assert any(g is not None and g.abs().sum() > 0 for g in grads), part
    assert all(p.grad is None for p in agent.target_critic.parameters())
    actions = agent.act(torch.randn(5, agent.model.out_dim), greedy=False)
    assert tuple(actions.shape) == (5, *spec.action.shape)


def test_n_step_changes_the_critic_targets(tmp_path_factory) -> None:
    batch = _batch(tmp_path_factory, "discrete")
    losses = []
    for n_step in (1, 3):
        torch.manual_seed(0)
        cfg = AgentConfig(
            critic=CriticHeadConfig(d_hidden=16), targets=TargetsConfig(n_step=n_step), reward_multiplier=10.0
        )
        losses.append(Agent(make_spec("discrete"), TINY, cfg, max_seq_len=6)(batch)[1]["td_target_mean"])
    assert not torch.allclose(losses[0], losses[1])


@pytest.mark.parametrize("kind", ["discrete", "multibinary"])
def test_tree_backup_changes_n_step_targets_of_discrete_kinds(tmp_path_factory, kind: str) -> None:
    """The correction reaches the targets through both paths: Q of every action (discrete) and action-input
    critics (multibinary); with n_step 1 there is nothing to correct."""
    batch = _batch(tmp_path_factory, kind)

    def target_mean(n_step: int, correction: str) -> torch.Tensor:
        torch.manual_seed(0)
        targets = TargetsConfig(n_step=n_step, correction=correction)  # type: ignore[arg-type]
        cfg = AgentConfig(critic=CriticHeadConfig(d_hidden=16), targets=targets, reward_multiplier=10.0)
        return Agent(make_spec(kind), TINY, cfg, max_seq_len=6)(batch)[1]["td_target_mean"]

    assert not torch.allclose(target_mean(3, "none"), target_mean(3, "tree_backup"))
    torch.testing.assert_close(target_mean(1, "none"), target_mean(1, "tree_backup"))
