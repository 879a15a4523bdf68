"""Actor heads (one distribution per gamma), distributions, the fused critic ensemble, symlog bins."""

from __future__ import annotations

import pytest
import torch
from torch.distributions import Normal, TanhTransform, TransformedDistribution

from amago_pipe.config.nets import ActorHeadConfig, CriticHeadConfig
from amago_pipe.nets import SymlogBins, build_actor_head, build_critic_head, hl_gauss, symexp, symlog, two_hot
from amago_pipe.nets.distributions import TanhNormal
from amago_pipe.spec import ActionSpec

B, L, D, G = 2, 3, 8, 4
DISCRETE = ActionSpec("discrete", (), n=5)
CONTINUOUS = ActionSpec("continuous", (2,), low=(-1.0, -1.0), high=(1.0, 1.0))
BINARY = ActionSpec("multibinary", (3,), n=3)
SMALL_ACTOR = ActorHeadConfig(d_hidden=16)
SMALL_CRITIC = CriticHeadConfig(num_critics=3, d_hidden=16, n_layers=3, num_bins=11, symlog_low=-5, symlog_high=5)


@pytest.mark.parametrize(
    ("action", "dist", "sample_shape"),
    [
        (DISCRETE, "tanh_gaussian", (B, L, G)),
        (CONTINUOUS, "tanh_gaussian", (B, L, G, 2)),
        (CONTINUOUS, "beta", (B, L, G, 2)),
        (BINARY, "tanh_gaussian", (B, L, G, 3)),
    ],
)
def test_actor_head_one_distribution_per_gamma(action: ActionSpec, dist: str, sample_shape: tuple[int, ...]) -> None:
    head = build_actor_head(ActorHeadConfig(d_hidden=16, continuous_dist=dist), D, action, G)  # type: ignore[arg-type]
    pi = head(torch.randn(B, L, D))
    assert pi.batch_shape == (B, L, G)
    a = pi.sample()
    assert a.shape == sample_shape
    logp = pi.log_prob(a)
    assert logp.shape == (B, L, G) and torch.isfinite(logp).all()
    assert pi.entropy().shape == (B, L, G)
    if action.kind == "continuous":
        assert a.abs().max() <= 1.0
        pi.rsample().sum().backward()
        assert all(p.grad is not None for p in head.parameters())


def test_tanh_normal_log_prob_matches_torch_and_its_own_samples() -> None:
    mean, std = torch.randn(4, 3), torch.rand(4, 3) + 0.1
    ours = TanhNormal(mean, std)
    ref = TransformedDistribution(Normal(mean, std), [TanhTransform()])
    a = torch.tanh(torch.randn(4, 3)) * 0.99
    torch.testing.assert_close(ours.log_prob(a), ref.log_prob(a).sum(-1), atol=1e-4, rtol=1e-4)
    sample, logp = ours.rsample_with_log_prob()
    torch.testing.assert_close(ours.log_prob(sample), logp, atol=1e-3, rtol=1e-3)
    assert torch.isfinite(ours.log_prob(torch.ones(4, 3))).all()


def _reference_critic(critic: torch.nn.Module, state: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
    """The same ensemble computed one critic and one gamma at a time (the slow way)."""
    K, _H = critic.num_critics, critic.d_hidden
    w_s, b_s, w_a = critic.in_state_w, critic.in_b, critic.in_action_w
    out = torch.zeros(K, B, L, G)
    for k in range(K):
        for g in range(G):
            h = critic.act(state @ w_s[k] + b_s[k] + action[:, :, g] @ w_a[k])
            for w, b in zip(critic.hidden_w, critic.hidden_b, strict=True):
                h = critic.act(h @ w[k] + b[k])
            out[k, :, :, g] = (h @ critic.out_w[k, g] + critic.out_b[k, g])[..., 0]
    return out


def test_critic_ensemble_fused_equals_per_critic_loop() -> None:
    critic = build_critic_head(SMALL_CRITIC, D, CONTINUOUS, G)
    state, actions = torch.randn(B, L, D), torch.rand(B, L, G, 2) * 2 - 1
    fused = critic(state, actions)
    assert fused.shape == (3, B, L, G)
    torch.testing.assert_close(fused, _reference_critic(critic, state, actions), atol=1e-5, rtol=1e-5)
    shared = actions[:, :, 0]
    torch.testing.assert_close(critic(state, shared), critic(state, shared[:, :, None].expand(B, L, G, 2)))


@pytest.mark.parametrize("output", ["scalar", "bins"])
def test_critic_output_shapes(output: str) -> None:
    cfg = CriticHeadConfig(num_critics=3, d_hidden=16, output=output, num_bins=11)  # type: ignore[arg-type]
    bins = (11,) if output == "bins" else ()
    cont = build_critic_head(cfg, D, CONTINUOUS, G)
    assert cont(torch.randn(B, L, D), torch.randn(B, L, 2)).shape == (3, B, L, G, *bins)
    disc = build_critic_head(cfg, D, DISCRETE, G)
    q = disc(torch.randn(B, L, D))
    assert q.shape == (3, B, L, G, 5, *bins)
    assert disc.values(q).shape == (3, B, L, G, 5)
    binary = build_critic_head(cfg, D, BINARY, G)
    assert binary(torch.randn(B, L, D), torch.randint(0, 2, (B, L, G, 3)).float()).shape == (3, B, L, G, *bins)
    if output == "bins":  # zero-initialised logits decode to 0
        torch.testing.assert_close(disc.values(q), torch.zeros(3, B, L, G, 5), atol=1e-5, rtol=0)


def test_critic_gradients_and_input_errors() -> None:
    critic = build_critic_head(SMALL_CRITIC, D, CONTINUOUS, G)
    critic(torch.randn(B, L, D), torch.randn(B, L, G, 2)).square().sum().backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in critic.parameters())
    with pytest.raises(ValueError, match=r"action must be \(B, L, A\) or \(B, L, G, A\) with A=2"):
        critic(torch.randn(B, L, D), torch.randn(B, L, 3))
    with pytest.raises(ValueError, match="need an action input"):
        critic(torch.randn(B, L, D))


def test_symlog_symexp_inverse() -> None:
    x = torch.tensor([-1e4, -3.0, -0.5, 0.0, 0.5, 3.0, 1e4])
    torch.testing.assert_close(symexp(symlog(x)), x, rtol=1e-5, atol=1e-6)


def test_two_hot_round_trip_and_clipping() -> None:
    bins = SymlogBins(num_bins=41, low=-8, high=8)
    values = torch.tensor([[-100.0, -1.3, 0.0], [0.7, 12.0, 2500.0]])
    target = bins.two_hot(values)
    assert target.shape == (2, 3, 41)
    torch.testing.assert_close(target.sum(-1), torch.ones(2, 3))
    assert ((target > 0).sum(-1) <= 2).all()
    torch.testing.assert_close(bins.decode(target.log()), values, rtol=1e-4, atol=1e-4)
    clipped = two_hot(torch.tensor([100.0]), torch.linspace(-1, 1, 5))
    torch.testing.assert_close(clipped, torch.tensor([[0.0, 0.0, 0.0, 0.0, 1.0]]))


def test_hl_gauss_is_a_distribution_centred_on_the_value() -> None:
    centers = torch.linspace(-5, 5, 51)
    x = torch.tensor([-2.0, 0.3, 1.7])
    target = hl_gauss(x, centers, sigma=0.15)
    torch.testing.assert_close(target.sum(-1), torch.ones(3))
    torch.testing.assert_close((target * centers).sum(-1), x, atol=1e-3, rtol=0)
    bins = SymlogBins(num_bins=51, low=-5, high=5)
    torch.testing.assert_close(
        bins.decode(bins.hl_gauss(torch.tensor([4.0])).log()), torch.tensor([4.0]), rtol=2e-2, atol=0
    )
