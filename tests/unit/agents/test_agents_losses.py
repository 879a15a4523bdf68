"""The named pieces of the update: TD targets, PopArt, filters, actor/critic losses, Polyak averaging."""

from __future__ import annotations

import pytest
import torch

from amago_pipe.agents.losses import (
    actor_loss,
    advantage_scale,
    bc_filter,
    critic_loss,
    critic_loss_bins,
    masked_mean,
    polyak_update,
    scale_for_filter,
    td_targets,
)
from amago_pipe.agents.popart import PopArt


def test_td_targets_bootstrap_through_truncation_but_not_termination() -> None:
    rewards = torch.tensor([[1.0, 1.0]])  # (B=1, L=2)
    terminated = torch.tensor([[False, True]])
    next_values = torch.full((1, 2, 3, 2), 10.0)  # (B, L, K=3, G=2)
    gammas = torch.tensor([0.5, 0.9])
    y = td_targets(rewards, terminated, next_values, gammas, num_td=2, reduce="min")
    assert y.shape == (1, 2, 2)
    torch.testing.assert_close(y[0, 0], torch.tensor([6.0, 10.0]))  # r + gamma * 10
    torch.testing.assert_close(y[0, 1], torch.tensor([1.0, 1.0]))  # terminal: r only


def test_td_targets_min_and_mean_over_drawn_critics() -> None:
    torch.manual_seed(0)
    next_values = torch.arange(4.0).view(1, 1, 4, 1).expand(64, 1, 4, 1).contiguous()  # critics say 0, 1, 2, 3
    zeros = torch.zeros(64, 1)

    def draw(reduce: str) -> torch.Tensor:  # the same critics drawn for both reductions
        gen = torch.Generator().manual_seed(1)
        return td_targets(zeros, zeros.bool(), next_values, torch.tensor([1.0]), num_td=2, reduce=reduce, generator=gen)

    y_min, y_mean = draw("min"), draw("mean")
    assert y_min.min() == 0 and y_min.max() <= 3 and (y_min <= y_mean).all()
    assert len(torch.unique(y_min)) > 1  # drawn per sample, with replacement


def test_popart_update_preserves_raw_outputs_and_tracks_statistics() -> None:
    popart = PopArt(2, beta=0.5)
    x = torch.randn(5, 2)
    popart.update(torch.tensor([[10.0, 100.0], [14.0, 110.0]]), torch.ones(2, dtype=torch.bool))
    torch.testing.assert_close(popart.mu.float(), torch.tensor([12.0, 105.0]))  # the first batch sets mu
    torch.testing.assert_close(popart.sigma.float(), torch.tensor([2.0, 5.0]))
    before = popart(x, normalized=False)
    popart.update(torch.tensor([[50.0, -20.0]]), torch.ones(1, dtype=torch.bool))
    torch.testing.assert_close(popart(x, normalized=False), before, rtol=1e-5, atol=1e-4)
    raw = torch.tensor([[3.0, 4.0]])
    torch.testing.assert_close(popart.denormalize(popart.normalize(raw)), raw)
    masked = PopArt(1, beta=0.5)
    masked.update(torch.tensor([[1.0], [1e6]]), torch.tensor([True, False]))
    assert float(masked.mu) == 1.0 and float(masked.sigma) == 1.0  # padded steps ignored; sigma floored at 1


def test_popart_per_task_keeps_each_scale_and_matches_separate_popart() -> None:
    """Two tasks whose returns differ 1000-fold: per-task statistics equal those of a separate PopArt per task,
    raw outputs are preserved per task, and a task absent from a batch keeps its statistics."""
    torch.manual_seed(0)
    joint, alone = PopArt(2, n_tasks=2, beta=0.1), [PopArt(2, beta=0.1), PopArt(2, beta=0.1)]
    assert joint.mu.shape == (2, 2) and PopArt(2).mu.shape == (2,)  # one task keeps the old shapes
    scales = torch.tensor([1.0, 1000.0])
    for step in range(4):
        task = torch.tensor([0, 1, 1]) if step != 2 else torch.tensor([1, 1, 1])  # step 2: no task-0 windows
        targets = torch.randn(3, 5, 2) * scales[task][:, None, None] + scales[task][:, None, None]  # (B, L, G)
        mask = torch.rand(3, 5) > 0.2
        x = torch.randn(4, 3, 5, 2)
        before = joint(x, normalized=False, task=task)
        mu0 = joint.mu[0].clone()
        joint.update(targets, mask, task)
        if step > 0:
            torch.testing.assert_close(joint(x, normalized=False, task=task), before, rtol=1e-4, atol=1e-3)
        if step == 2:
            assert torch.equal(joint.mu[0], mu0)
        for i in range(2):
            rows = task == i
            if rows.any():
                alone[i].update(targets[rows], mask[rows])
    for i in range(2):
        torch.testing.assert_close(joint.mu[i], alone[i].mu)
        torch.testing.assert_close(joint.sigma[i], alone[i].sigma)
    assert float(joint.sigma[1, 0]) > 100 * float(joint.sigma[0, 0])
    values = torch.randn(2, 5, 2)  # (B, L, G)
    task = torch.tensor([1, 0])
    expected = torch.stack([alone[1].normalize(values[0]), alone[0].normalize(values[1])])
    torch.testing.assert_close(joint.normalize(values, task=task), expected)
    assert joint.sigma_of(task).shape == (2, 1, 2)
    with pytest.raises(ValueError, match="task ids"):
        joint.normalize(values)


def test_popart_axis_for_per_action_values() -> None:
    popart = PopArt(3)
    popart.update(torch.tensor([[1.0, 2.0, 3.0], [3.0, 4.0, 5.0]]), torch.ones(2, dtype=torch.bool))
    q = torch.randn(2, 3, 4)  # (..., G, A)
    per_action = popart(q, axis=-2)
    moved = popart(q.transpose(-1, -2)).transpose(-1, -2)
    torch.testing.assert_close(per_action, moved)


def test_bc_filters() -> None:
    adv = torch.tensor([-1.0, 0.0, 2.0])
    assert bc_filter(adv, "binary", beta=1, max_weight=20, leak=0.1).tolist() == [0.0, 0.0, 1.0]
    assert bc_filter(adv, "leaky", beta=1, max_weight=20, leak=0.1).tolist() == pytest.approx([0.1, 0.1, 1.0])
    exp = bc_filter(adv, "exp", beta=2.0, max_weight=20, leak=0.1)
    assert exp.tolist() == pytest.approx([torch.exp(torch.tensor(-2.0)).item(), 1.0, 20.0])
    with pytest.raises(ValueError, match="unknown bc filter 'soft'"):
        bc_filter(adv, "soft", beta=1, max_weight=20, leak=0.1)


def test_advantage_scale_is_the_masked_std_per_gamma() -> None:
    adv = torch.tensor([[[1.0, 10.0], [3.0, 30.0], [1000.0, 1000.0]]])  # (B=1, L=3, G=2); the last step is padding
    mask = torch.tensor([[True, True, False]])
    torch.testing.assert_close(advantage_scale(adv, mask), torch.tensor([1.0, 10.0]))


def test_scale_for_filter_caps_the_value_scale_the_filter_divides_by() -> None:
    adv = torch.tensor([[[1.0, -2.0], [3.0, 30.0], [0.5, 0.5]]])  # (B=1, L=3, G=2), PopArt-normalised
    mask = torch.tensor([[True, True, True]])
    sigma = torch.tensor([40.0, 5.0], dtype=torch.float64)  # G=0 outgrew the cap of 10, G=1 did not
    capped = scale_for_filter(adv, mask, sigma, normalize=False, scale_max=10.0)
    torch.testing.assert_close(capped, torch.tensor([[[4.0, -2.0], [12.0, 30.0], [2.0, 0.5]]]))  # raw / min(s, 10)
    torch.testing.assert_close(scale_for_filter(adv, mask, sigma, normalize=False, scale_max=None), adv)
    normalized = scale_for_filter(adv, mask, sigma, normalize=True, scale_max=None)
    torch.testing.assert_close(normalized, adv / advantage_scale(adv, mask))


def test_losses_ignore_padding() -> None:
    mask = torch.tensor([[True, False]])
    q = torch.zeros(1, 2, 2, 1)  # (B, L, K, G)
    target = torch.tensor([[[1.0], [100.0]]])  # (B, L, G); the padded step has a huge error
    assert critic_loss(q, target, mask, kind="mse").item() == pytest.approx(1.0)
    logits = torch.zeros(1, 2, 2, 1, 4)
    labels = torch.tensor([1.0, 0, 0, 0]).expand(1, 2, 1, 4)
    assert critic_loss_bins(logits, labels, mask).item() == pytest.approx(torch.log(torch.tensor(4.0)).item())
    q_pi = torch.tensor([[[2.0], [-50.0]]])
    logp = torch.tensor([[[-1.0], [-100.0]]])
    loss = actor_loss(q_pi, logp, torch.ones_like(logp), mask, online_coeff=1.0, offline_coeff=0.5)
    assert loss.item() == pytest.approx(-2.0 + 0.5)
    assert masked_mean(torch.tensor([[1.0, 3.0]]), torch.tensor([[True, True]])).item() == 2.0


def test_polyak_update_moves_targets_by_tau() -> None:
    target, online = [torch.zeros(3)], [torch.ones(3)]
    polyak_update(target, online, 0.25)
    torch.testing.assert_close(target[0], torch.full((3,), 0.25))
