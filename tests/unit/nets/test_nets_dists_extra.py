"""Tanh-Gaussian mixture, multidiscrete distribution, action features and action-input critics for discrete kinds."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch.distributions import Categorical

from amago_pipe.actions import ActionCodec
from amago_pipe.config.build import FieldError
from amago_pipe.config.nets import ActorHeadConfig, CriticHeadConfig
from amago_pipe.nets import build_actor_head, build_critic_head
from amago_pipe.nets.distributions import MultiCategorical, TanhGMM, TanhNormal, tanh_gaussian, tanh_gmm
from amago_pipe.nets.heads import action_features, enumerate_actions
from amago_pipe.spec import ActionSpec

B, L, D, G = 2, 3, 8, 4
CONTINUOUS = ActionSpec("continuous", (2,), low=(-1.0, -1.0), high=(1.0, 1.0))
DISCRETE = ActionSpec("discrete", (), n=5)
MULTI = ActionSpec("multidiscrete", (3,), nvec=(2, 4, 3))
BINARY = ActionSpec("multibinary", (3,), n=3)
GMM_ACTOR = ActorHeadConfig(d_hidden=16, continuous_dist="gmm", gmm_components=3)
SMALL_CRITIC = CriticHeadConfig(num_critics=3, d_hidden=16)


def _gmm(batch: tuple[int, ...], c: int, a: int) -> TanhGMM:
    logits = torch.randn(*batch, c, requires_grad=True)
    mean = (torch.rand(*batch, c, a) * 2 - 1).requires_grad_()
    std = (torch.rand(*batch, c, a) * 0.5 + 0.2).requires_grad_()
    return TanhGMM(logits, mean, std)


def test_gmm_actor_head_shapes_and_parameter_count() -> None:
    head = build_actor_head(GMM_ACTOR, D, CONTINUOUS, G)
    assert head.params_per_gamma == 3 * (2 * 2 + 1)
    assert head.net(torch.randn(1, D)).shape == (1, G * 3 * 5)
    pi = head(torch.randn(B, L, D))
    assert isinstance(pi, TanhGMM) and pi.batch_shape == (B, L, G) and pi.event_shape == (2,)
    a = pi.sample()
    assert a.shape == (B, L, G, 2) and a.abs().max() <= 1.0
    assert torch.isfinite(pi.log_prob(a)).all() and pi.log_prob(a).shape == (B, L, G)
    assert pi.entropy().shape == (B, L, G) and pi.mode.shape == (B, L, G, 2)
    assert pi.rsample((5,)).shape == (5, B, L, G, 2)
    assert torch.isfinite(pi.log_prob(torch.ones(B, L, G, 2))).all()  # the clamp at the edges


def test_gmm_rsample_gives_no_gradient_to_the_mixture_weights() -> None:
    logits, mean, std = (torch.randn(4, 3, *s, requires_grad=True) for s in ((), (2,), (2,)))
    pi = TanhGMM(logits, mean, std.exp())
    pi.rsample().sum().backward()
    assert mean.grad is not None and mean.grad.abs().sum() > 0 and std.grad is not None
    assert logits.grad is None  # the component draw is not differentiated
    pi = TanhGMM(logits, mean, std.exp())
    pi.log_prob(pi.sample()).sum().backward()
    assert logits.grad is not None and logits.grad.abs().sum() > 0  # the weights learn through log_prob


def test_gmm_log_prob_integrates_to_one_in_one_dimension() -> None:
    pi = _gmm((2,), 4, 1)
    grid = torch.linspace(-1 + 1e-6, 1 - 1e-6, 20_001, dtype=torch.float64)[:, None, None]  # (N, 1, A=1)
    with torch.no_grad():
        density = TanhGMM(pi.logits.double(), pi.loc.double(), pi.scale.double()).log_prob(grid).exp()  # (N, 2)
    integral = torch.trapezoid(density, grid[:, 0, 0], dim=0)
    torch.testing.assert_close(integral, torch.ones(2, dtype=torch.float64), atol=2e-3, rtol=0)


def test_gmm_with_one_component_equals_tanh_normal() -> None:
    mean, raw = torch.randn(B, L, 2), torch.randn(B, L, 2)
    normal = tanh_gaussian(torch.cat([mean, raw], -1), -5.0, 2.0)
    mixture = tanh_gmm(torch.cat([torch.randn(B, L, 1), mean, raw], -1), 1, -5.0, 2.0)
    a = torch.rand(B, L, 2) * 1.98 - 0.99
    torch.testing.assert_close(mixture.log_prob(a), normal.log_prob(a), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(mixture.mode, normal.mode)
    assert isinstance(normal, TanhNormal)
    sample, logp = mixture.rsample_with_log_prob()
    torch.testing.assert_close(mixture.log_prob(sample), logp, atol=1e-3, rtol=1e-3)


def test_gmm_mode_is_the_squashed_mean_of_the_heaviest_component() -> None:
    logits = torch.tensor([[0.0, 3.0, 1.0]])
    mean = torch.tensor([[[0.1], [0.5], [-0.7]]])
    pi = TanhGMM(logits, mean, torch.full_like(mean, 0.3))
    torch.testing.assert_close(pi.mode, torch.tanh(torch.tensor([[0.5]])))


def test_gmm_rejects_mismatched_parameters() -> None:
    with pytest.raises(ValueError, match=r"logits must be \(\.\.\., C\)"):
        TanhGMM(torch.zeros(2, 3), torch.zeros(2, 4, 1), torch.ones(2, 4, 1))
    with pytest.raises(ValueError, match="do not split into 2 components"):
        tanh_gmm(torch.zeros(2, 7), 2, -5.0, 2.0)
    with pytest.raises(FieldError, match="must be at least 1, got 0"):
        ActorHeadConfig(gmm_components=0)


def test_multidiscrete_actor_log_prob_is_the_sum_over_sub_actions() -> None:
    head = build_actor_head(ActorHeadConfig(d_hidden=16), D, MULTI, G)
    state = torch.randn(B, L, D)
    pi = head(state)
    assert isinstance(pi, MultiCategorical) and pi.batch_shape == (B, L, G) and pi.event_shape == (3,)
    a = pi.sample()
    assert a.shape == (B, L, G, 3) and a.dtype == torch.int64
    assert (a >= 0).all() and (a < torch.tensor(MULTI.nvec)).all()
    logits = head.net(state).unflatten(-1, (G, -1)).split(list(MULTI.nvec), dim=-1)  # per sub-action
    parts = [Categorical(logits=lg) for lg in logits]
    expected = sum(p.log_prob(a[..., j]) for j, p in enumerate(parts))
    torch.testing.assert_close(pi.log_prob(a), expected)
    torch.testing.assert_close(pi.entropy(), sum(p.entropy() for p in parts))
    torch.testing.assert_close(pi.mode, torch.stack([p.probs.argmax(-1) for p in parts], -1))
    assert torch.isfinite(pi.log_prob(a)).all()
    joint = pi.log_prob(enumerate_actions(MULTI)[:, None, None, None]).exp()  # (M, B, L, G): exact expectations
    torch.testing.assert_close(joint.sum(0), torch.ones(B, L, G))


def test_action_features_match_the_rl2_features() -> None:
    ids = torch.tensor([[0, 3, 2], [1, 0, 1]])  # (2, k=3)
    feats = action_features(MULTI, ids)
    assert feats.shape == (2, 9) and feats.dtype == torch.float32
    np.testing.assert_array_equal(feats.numpy(), ActionCodec(MULTI).rl2_features(ids.numpy()))
    disc = torch.tensor([[4, 0]])
    np.testing.assert_array_equal(action_features(DISCRETE, disc).numpy(), ActionCodec(DISCRETE).rl2_features(disc))
    bits = torch.tensor([[1, 0, 1]])
    torch.testing.assert_close(action_features(BINARY, bits), torch.tensor([[1.0, 0.0, 1.0]]))
    cont = torch.rand(B, L, G, 2)
    assert torch.equal(action_features(CONTINUOUS, cont), cont)
    grid = ActionSpec("multibinary", (2, 3), n=6)
    bits = torch.randint(0, 2, (B, L, 2, 3))  # data actions keep the space's shape; actor samples are flat
    torch.testing.assert_close(action_features(grid, bits), action_features(grid, bits.flatten(2)))
    assert action_features(grid, bits).shape == (B, L, 6)
    with pytest.raises(ValueError, match=r"multidiscrete\[2, 4, 3\] actions must end in shape \(3,\)"):
        action_features(MULTI, torch.zeros(2, 2, dtype=torch.int64))


def test_enumerate_actions_lists_every_joint_action() -> None:
    assert torch.equal(enumerate_actions(DISCRETE), torch.arange(5))
    table = enumerate_actions(MULTI)
    assert table.shape == (2 * 4 * 3, 3) and len({tuple(r) for r in table.tolist()}) == 24
    assert enumerate_actions(BINARY).shape == (8, 3)
    assert enumerate_actions(ActionSpec("multibinary", (2, 2), n=4)).shape == (16, 2, 2)
    with pytest.raises(ValueError, match=r"continuous\(2,\) actions cannot be enumerated"):
        enumerate_actions(CONTINUOUS)
    with pytest.raises(ValueError, match="65536 joint actions"):
        enumerate_actions(ActionSpec("multibinary", (16,), n=16))


@pytest.mark.parametrize("output", ["scalar", "bins"])
@pytest.mark.parametrize(
    ("action", "cfg"),
    [(MULTI, {}), (BINARY, {}), (DISCRETE, {"discrete_as_continuous": True})],
)
def test_action_input_critics_for_discrete_kinds(action: ActionSpec, cfg: dict[str, bool], output: str) -> None:
    critic_cfg = CriticHeadConfig(num_critics=3, d_hidden=16, output=output, num_bins=11, **cfg)  # type: ignore[arg-type]
    critic = build_critic_head(critic_cfg, D, action, G)
    assert not critic.discrete and critic.action_dim == action.dim
    bins = (11,) if output == "bins" else ()
    state = torch.randn(B, L, D)
    table = enumerate_actions(action)  # (M, ...)
    feats = action_features(action, table)  # (M, A)
    every = critic.forward_candidates(state, feats)
    assert every.shape == (3, B, L, G, len(table), *bins)
    for m in range(len(table)):  # one candidate at a time through forward, shared by every (b, l)
        one = critic(state, feats[m].expand(B, L, -1))  # (K, B, L, G[, N])
        torch.testing.assert_close(every[:, :, :, :, m], one, atol=1e-5, rtol=1e-5)
    data = action_features(action, table[torch.randint(0, len(table), (B, L, G))])  # (B, L, G, A)
    assert critic(state, data).shape == (3, B, L, G, *bins)
    with pytest.raises(ValueError, match="need an action input"):
        critic(state)


def test_forward_candidates_rejects_q_of_every_action_critics_and_bad_widths() -> None:
    with pytest.raises(ValueError, match="needs an action-input critic"):
        build_critic_head(SMALL_CRITIC, D, DISCRETE, G).forward_candidates(torch.randn(B, L, D), torch.eye(5))
    critic = build_critic_head(SMALL_CRITIC, D, MULTI, G)
    with pytest.raises(ValueError, match=r"candidates must be \(M, A\) with A=9"):
        critic.forward_candidates(torch.randn(B, L, D), torch.eye(5))
    assert math.prod(MULTI.nvec) == len(enumerate_actions(MULTI))
