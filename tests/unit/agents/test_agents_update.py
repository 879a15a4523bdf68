"""Every agent type on every supported action kind: one update, gradients where they belong, acting, policy."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from unit.data.learning_data import make_spec, make_store

from amago_pipe.agents import filters as filters_module
from amago_pipe.agents.agent import Agent
from amago_pipe.agents.multitask import MultiTaskAgent
from amago_pipe.agents.policy import AgentPolicy
from amago_pipe.agents.terms import terms as terms_of
from amago_pipe.config.agent import AgentConfig, ExpFilterConfig, MultiTaskConfig
from amago_pipe.config.nets import (
    ActorHeadConfig,
    CriticHeadConfig,
    FFTstepConfig,
    ModelConfig,
    TransformerConfig,
)
from amago_pipe.data.loader import BatchLoader
from amago_pipe.errors import ConfigError

TINY = ModelConfig(
    tstep_encoder=FFTstepConfig(d_hidden=16, d_output=16),
    traj_encoder=TransformerConfig(d_model=16, n_heads=2, n_layers=1, dropout_emb=0.0, dropout_ff=0.0),
)
AGENTS = {"agent": (Agent, AgentConfig), "multitask": (MultiTaskAgent, MultiTaskConfig)}


def _agent(kind: str, name: str, **overrides: object) -> Agent:
    cls, cfg_cls = AGENTS[name]
    bins = {"output": "bins", "num_bins": 16} if name == "multitask" else {}
    critic = CriticHeadConfig(d_hidden=16, num_critics=3, **bins)  # type: ignore[arg-type]
    overrides = {"reward_multiplier": 10.0, **overrides}  # fixed: no learner resolves `auto` here
    cfg = cfg_cls(actor=ActorHeadConfig(d_hidden=16), critic=critic, **overrides)  # type: ignore[arg-type]
    return cls(make_spec(kind), TINY, cfg, max_seq_len=6)


@pytest.fixture(scope="module")
def batches(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    out = {}
    for kind in ("discrete", "continuous"):
        store = make_store(tmp_path_factory.mktemp(kind) / "s.zarr", kind, episodes=6)
        out[kind] = next(
            BatchLoader(store, batch_size=4, seq_len=6, partitions={"protected": 1.0}, seed=0, threaded=False)
        )
    return out


@pytest.mark.parametrize("name", ["agent", "multitask"])
@pytest.mark.parametrize("kind", ["discrete", "continuous"])
def test_update_gives_finite_loss_and_gradients_to_every_trained_part(batches, kind: str, name: str) -> None:
    torch.manual_seed(0)
    agent = _agent(kind, name, online_coeff=1.0, offline_coeff=0.5)
    losses, metrics = agent(batches[kind])
    loss = sum(losses.values())
    assert set(losses) == {"critic", "actor", "history"}  # named terms, summed by the learner
    assert torch.isfinite(loss) and {"critic_loss", "actor_loss", "q_mean", "bc_filter_rate"} <= set(metrics)
    loss.backward()
    for part in ("model", "actor", "critic"):
        grads = [p.grad for p in getattr(agent, part).parameters() if p.requires_grad]
        assert grads and all(g is not None for g in grads), part
    assert all(p.grad is None for p in agent.target_critic.parameters())
    assert all(p.grad is None for p in agent.target_actor.parameters())


@pytest.mark.parametrize("trains_model", [True, False])
@pytest.mark.parametrize("kind", ["discrete", "continuous"])
def test_actor_trains_model_decides_whether_the_actor_loss_reaches_the_sequence_model(
    batches, kind: str, trains_model: bool
) -> None:
    torch.manual_seed(0)
    agent = _agent(kind, "agent", actor_trains_model=trains_model)
    batch = batches[kind]
    states, _ = agent.model(batch.obs, batch.rl2, batch.time)
    terms = terms_of(agent, states, batch)
    (-(terms.q_pi.mean() + terms.logp_data.mean())).backward()  # the actor's two terms, no critic loss
    reached = [p.grad is not None and bool(p.grad.abs().sum() > 0) for p in agent.model.parameters()]
    assert any(reached) == trains_model
    assert all(p.grad is not None for p in agent.actor.parameters())


def _actor_grads(batch, kind: str, share: bool | float) -> tuple[torch.Tensor, list[torch.Tensor], list[torch.Tensor]]:
    """The BC term and the gradients of the sequence model and of the actor head from the actor's two terms alone,
    for a fresh seed-0 agent."""
    torch.manual_seed(0)
    agent = _agent(kind, "agent", actor_trains_model=share)
    states, _ = agent.model(batch.obs, batch.rl2, batch.time)
    terms = terms_of(agent, states, batch)
    (-(terms.q_pi.mean() + terms.logp_data.mean())).backward()
    model = [p.grad for p in agent.model.parameters() if p.grad is not None]
    return terms.logp_data.detach(), model, [p.grad for p in agent.actor.parameters()]


@pytest.mark.parametrize("kind", ["discrete", "continuous"])
def test_a_fractional_actor_trains_model_scales_the_actor_gradient_into_the_sequence_model(batches, kind: str) -> None:
    logp_full, model_full, actor_full = _actor_grads(batches[kind], kind, True)
    logp, model, actor = _actor_grads(batches[kind], kind, 0.25)
    torch.testing.assert_close(logp, logp_full)  # the same forward pass
    assert len(model) == len(model_full) and any(g.abs().sum() > 0 for g in model_full)
    for quarter, full in zip(model, model_full, strict=True):
        torch.testing.assert_close(quarter, 0.25 * full, rtol=1e-4, atol=1e-7)
    for head, full in zip(actor, actor_full, strict=True):  # the actor head still learns at full strength
        torch.testing.assert_close(head, full)


@pytest.mark.parametrize("kind", ["discrete", "continuous"])
def test_policy_gradient_term_leaves_the_critics_untouched(batches, kind: str) -> None:
    """The critics seen by the actor loss take no gradient (AMAGO's copy accumulated its own)."""
    agent = _agent(kind, "agent", online_coeff=1.0, offline_coeff=0.0)
    states, _ = agent.model(batches[kind].obs, batches[kind].rl2, batches[kind].time)
    terms = terms_of(agent, states, batches[kind])
    terms.q_pi.min(dim=2).values.mean().backward()
    assert all(p.grad is None or p.grad.abs().sum() == 0 for p in agent.critic.parameters())
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in agent.actor.parameters())


def test_targets_follow_the_online_networks_by_polyak_averaging() -> None:
    agent = _agent("discrete", "agent", tau=0.5)
    with torch.no_grad():
        for p in agent.critic.parameters():
            p.add_(1.0)
    before = [p.clone() for p in agent.target_critic.parameters()]
    agent.update_targets()
    for b, t, o in zip(before, agent.target_critic.parameters(), agent.critic.parameters()):
        torch.testing.assert_close(t, 0.5 * b + 0.5 * o)


@pytest.mark.parametrize("name", ["agent", "multitask"])
def test_conservative_term_lowers_the_actions_the_data_does_not_take(batches, name: str) -> None:
    torch.manual_seed(0)
    agent = _agent("discrete", name, conservative_coeff=1.0)
    batch = batches["discrete"]
    taken = torch.nn.functional.one_hot(batch.actions, agent.spec.action.n).bool()  # (B, L, A)

    def margin() -> torch.Tensor:
        """Mean over steps and critics of Q(s, a_data) minus the mean Q of the other actions (normalised)."""
        with torch.no_grad():
            states, _ = agent.model(batch.obs, batch.rl2, batch.time)
            q = agent.values(agent.critic(states[:, :-1]), axis=-2)[..., -1, :]  # (K, B, L, A)
            data = q.masked_fill(~taken, 0).sum(-1)
            others = q.masked_fill(taken, 0).sum(-1) / (q.shape[-1] - 1)
            return (data - others)[:, batch.mask].mean()

    before = margin()
    opt = torch.optim.Adam(agent.critic.parameters(), lr=1e-2)
    for _ in range(10):
        states, _ = agent.model(batch.obs, batch.rl2, batch.time)
        terms = terms_of(agent, states, batch)
        opt.zero_grad()
        terms.conservative[batch.mask].mean().backward()
        opt.step()
    assert all(p.grad is None or p.grad.abs().sum() == 0 for p in agent.actor.parameters())
    assert margin() > before + 0.1
    assert float(agent(batch)[1]["conservative_gap"]) > 0


def test_conservative_term_is_refused_for_critics_without_one_output_per_action() -> None:
    with pytest.raises(ConfigError, match="conservative_coeff"):
        _agent("continuous", "agent", conservative_coeff=1.0)


def test_policy_average_is_what_policy_files_and_acting_weights_hold() -> None:
    torch.manual_seed(0)
    agent = _agent("discrete", "agent", policy_average=0.5)
    plain = _agent("discrete", "agent")
    assert agent.policy_state_dict().keys() == plain.policy_state_dict().keys()
    start = {k: v.clone() for k, v in agent.policy_state_dict().items()}
    live = dict(agent.named_parameters())
    with torch.no_grad():
        for p in [*agent.model.parameters(), *agent.actor.parameters()]:
            p.add_(1.0)
    agent.update_targets()
    averaged = agent.policy_state_dict()
    for k, v in start.items():
        if k in live:  # parameters move half way; buffers follow the live ones
            torch.testing.assert_close(averaged[k], v + 0.5)
    trained = {k: v.clone() for k, v in live.items()}
    with agent.acting_weights():
        for k in start:
            if k in live:
                torch.testing.assert_close(live[k], averaged[k])
    for k, v in trained.items():  # the live weights come back untouched
        torch.testing.assert_close(live[k], v)
    agent.reset_policy_average()
    for k in start:
        if k in live:
            torch.testing.assert_close(agent.policy_state_dict()[k], live[k])


@pytest.mark.parametrize("kind", ["discrete", "continuous"])
def test_agent_policy_keeps_memory_per_env_and_resets_it(kind: str) -> None:
    torch.manual_seed(0)
    agent = _agent(kind, "agent").eval()
    policy = AgentPolicy(agent, greedy=True)
    rng = np.random.default_rng(0)
    spec = make_spec(kind)
    obs = {"observation": rng.normal(size=(3, 3)).astype(np.float32)}
    rl2 = np.zeros((3, spec.rl2_dim), dtype=np.float32)
    policy.reset(3)
    first = policy.act(obs, rl2, np.zeros(3, dtype=np.int64))
    assert first.shape == ((3,) if kind == "discrete" else (3, 2))
    if kind == "continuous":
        assert np.abs(first).max() <= 1.0
    policy.act(obs, rl2, np.ones(3, dtype=np.int64))
    assert int(policy.state["count"][0]) == 2
    policy.reset_envs(np.array([True, False, False]))
    assert int(policy.state["count"][0]) == 0 and int(policy.state["count"][1]) == 2


def test_filter_scale_max_reaches_the_filter(batches, monkeypatch: pytest.MonkeyPatch) -> None:
    """With PopArt's sigma at ~40 and the cap at 10, the filter reads the normalised advantages times ~4. (The
    multitask agent shares this forward; its fresh bin critics give zero advantages, so it cannot show it.)"""
    seen: list[torch.Tensor] = []

    def spy(advantage: torch.Tensor, *args: object, **kwargs: object) -> torch.Tensor:
        seen.append(advantage)
        return torch.ones_like(advantage)

    monkeypatch.setattr(filters_module, "bc_filter", spy)
    scaled = {}
    for cap in (None, 10.0):
        torch.manual_seed(0)
        agent = _agent("discrete", "agent", filter=ExpFilterConfig(scale_max=cap))
        agent.popart.updates.fill_(10.0)  # past the first batch, which would reset the statistics
        agent.popart.nu.fill_(1600.0)  # sigma = 40 (mu = 0)
        agent(batches["discrete"])
        scaled[cap] = seen[-1]
    assert 39.0 < float(agent.popart.sigma[-1]) < 41.0 and float(scaled[None].abs().max()) > 1e-3, scaled[None]
    torch.testing.assert_close(scaled[10.0], scaled[None] * agent.popart.sigma.float() / 10.0, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", ["agent", "multitask"])
@pytest.mark.parametrize("kind", ["discrete", "continuous"])
def test_per_task_popart_computes_what_one_popart_with_that_tasks_statistics_does(
    batches, kind: str, name: str
) -> None:
    """Every window of task 1: the per-task agent's losses and metrics equal those of an agent with one PopArt holding
    task 1's statistics (task 0's, far off, are not read); without task ids it refuses."""
    batch = batches[kind]
    torch.manual_seed(0)
    single = _agent(kind, name)
    torch.manual_seed(0)
    per_task = AGENTS[name][0](single.spec, TINY, single.cfg, max_seq_len=6, tasks=("a", "b"))
    for agent, rows in ((single, slice(None)), (per_task, 1)):
        agent.popart.updates.fill_(10.0)  # past the first batch, which would reset the statistics
        agent.popart.mu[rows] = torch.tensor([3.0, -2.0, 5.0], dtype=torch.float64)
        agent.popart.nu[rows] = agent.popart.mu[rows].square() + 4.0
    per_task.popart.mu[0], per_task.popart.nu[0] = 1e3, 1e8
    batch_b = dataclasses.replace(batch, task=torch.ones(batch.batch_size, dtype=torch.int64))
    torch.manual_seed(1)
    losses, metrics = single(batch)
    torch.manual_seed(1)
    losses_b, metrics_b = per_task(batch_b)
    for key in losses:
        torch.testing.assert_close(losses_b[key], losses[key])
    torch.testing.assert_close(metrics_b["q_mean"], metrics["q_mean"])
    torch.testing.assert_close(per_task.popart.mu[1], single.popart.mu)
    assert float(metrics_b["popart_sigma/b"]) == pytest.approx(float(single.popart.sigma[-1]))
    with pytest.raises(ValueError, match="task ids"):
        per_task(batch)
