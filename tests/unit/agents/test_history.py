"""The history objective (`history_coeff`): which steps it asks about, what it trains, what it ignores."""

from __future__ import annotations

import pytest
import torch
from unit.agents.test_agents_update import _agent
from unit.data.learning_data import make_store

from amago_pipe.agents.history import HistoryHead, earlier_steps
from amago_pipe.data.loader import BatchLoader


def test_earlier_steps_draw_every_earlier_step_and_skip_the_first_and_padding() -> None:
    torch.manual_seed(0)
    mask = torch.ones(2000, 6, dtype=torch.bool)
    mask[0, 4:] = False
    k, source, valid = earlier_steps(mask)
    assert not valid[:, 0].any() and not valid[0, 4:].any() and valid[1:, 1:].all()
    t = torch.arange(6).expand(2000, 6)
    assert bool(((k >= 1) & (k <= t) & (source == t - k))[:, 1:].all())
    for step in range(1, 6):  # uniform over 0..t-1: every earlier step drawn, none far more often
        counts = torch.bincount(source[:, step], minlength=step)[:step].float()
        assert counts.min() > 0.7 * 2000 / step


def test_history_loss_ignores_padded_steps() -> None:
    head = HistoryHead(8, 4, 6)
    states, emb = torch.randn(3, 6, 8), torch.randn(3, 6, 4)
    mask = torch.ones(3, 6, dtype=torch.bool)
    mask[0, 3:] = False
    torch.manual_seed(1)
    before = head.loss(states, emb, mask)
    states[0, 3:] = 100.0  # padding: neither predicted nor a target of a valid step
    emb[0, 3:] = -100.0
    torch.manual_seed(1)
    torch.testing.assert_close(head.loss(states, emb, mask), before)


@pytest.mark.parametrize("kind", ["discrete", "continuous"])
def test_history_objective_trains_the_sequence_model_and_its_head_only(tmp_path, kind: str) -> None:
    store = make_store(tmp_path / "s.zarr", kind, episodes=4)
    batch = next(BatchLoader(store, batch_size=4, seq_len=6, partitions={"protected": 1.0}, seed=0, threaded=False))
    torch.manual_seed(0)
    agent = _agent(kind, "agent", history_coeff=0.5)
    assert agent.history is not None
    _, metrics = agent(batch)
    assert float(metrics["history_loss"]) > 0
    states, emb = agent.model.encode(batch.obs, batch.rl2, batch.time)
    agent.history.loss(states, emb, batch.obs_mask).backward()
    for part in (agent.model.tstep_encoder, agent.model.traj_encoder, agent.history):
        assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in part.parameters())
    for part in (agent.actor, agent.critic):
        assert all(p.grad is None for p in part.parameters())


def test_history_off_builds_no_head_and_logs_no_loss(tmp_path) -> None:
    store = make_store(tmp_path / "s.zarr", "discrete", episodes=4)
    batch = next(BatchLoader(store, batch_size=4, seq_len=6, partitions={"protected": 1.0}, seed=0, threaded=False))
    agent = _agent("discrete", "agent", history_coeff=0.0)
    assert agent.history is None and "history_loss" not in agent(batch)[1]
