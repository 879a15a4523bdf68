"""n-step TD targets: hand-computed cases, a slow reference loop, and n=1 against `td_targets`."""

from __future__ import annotations

import pytest
import torch

from amago_pipe.agents.losses import nstep_td_targets, td_targets


def _reference(
    rewards: torch.Tensor,
    terminated: torch.Tensor,
    mask: torch.Tensor,
    next_values: torch.Tensor,
    gammas: torch.Tensor,
    idx: torch.Tensor,
    *,
    n: int,
    reduce: str,
) -> torch.Tensor:
    """The same targets one (b, t) at a time, with the critic draw `idx (B, L, num_td, G)` given."""
    bsz, length, _, g = next_values.shape
    out = torch.zeros(bsz, length, g, dtype=torch.float64)
    for b in range(bsz):
        for t in range(length):
            ret, m = torch.zeros(g, dtype=torch.float64), 0
            for i in range(n):
                s = t + i
                if s >= length or (i > 0 and (not mask[b, s] or terminated[b, s - 1])):
                    break
                ret = ret + gammas.double() ** i * rewards[b, s].double()
                m = i + 1
            last = t + m - 1
            cont = 0.0 if terminated[b, last] else 1.0
            ensemble = ret + gammas.double() ** m * cont * next_values[b, last].double()  # (K, G)
            drawn = ensemble.gather(0, idx[b, t])  # (num_td, G)
            out[b, t] = drawn.min(0).values if reduce == "min" else drawn.mean(0)
    return out


def test_nstep_stops_at_terminal_and_bootstraps_at_padding_and_window_end() -> None:
    ones = torch.ones(1, 4)
    values = torch.full((1, 4, 1, 1), 10.0)  # (B, L, K=1, G=1)
    gammas = torch.tensor([0.5])
    terminal_at_2 = torch.tensor([[False, False, True, False]])
    y = nstep_td_targets(ones, terminal_at_2, ones.bool(), values, gammas, n=3, num_td=1, reduce="min")
    torch.testing.assert_close(y[0, :, 0], torch.tensor([1.75, 1.5, 1.0, 6.0]))  # t=3: window end bootstraps
    padded = torch.tensor([[True, True, False, False]])
    y = nstep_td_targets(ones, ~ones.bool(), padded, values, gammas, n=3, num_td=1, reduce="min")
    assert y[0, 0, 0] == 1.0 + 0.5 + 0.25 * 10.0  # two valid steps, then V(s_2) = next_values[1]
    assert y[0, 1, 0] == 1.0 + 0.5 * 10.0


@pytest.mark.parametrize(("n", "reduce"), [(2, "min"), (3, "mean"), (5, "min"), (12, "mean")])
def test_nstep_matches_slow_reference(n: int, reduce: str) -> None:
    gen = torch.Generator().manual_seed(n)
    bsz, length, k, g = 4, 9, 3, 2
    rewards = torch.randn(bsz, length, generator=gen)
    lengths = torch.tensor([9, 6, 3, 1])  # padded tails
    mask = torch.arange(length)[None] < lengths[:, None]  # (B, L)
    terminated = (torch.rand(bsz, length, generator=gen) < 0.2) & mask
    next_values = torch.randn(bsz, length, k, g, generator=gen)
    gammas = torch.tensor([0.7, 0.99])
    y = nstep_td_targets(
        rewards, terminated, mask, next_values, gammas, n=n, num_td=2, reduce=reduce, generator=gen.manual_seed(7)
    )
    idx = torch.randint(0, k, (bsz, length, 2, g), generator=gen.manual_seed(7))  # the same draw
    ref = _reference(rewards, terminated, mask, next_values, gammas, idx, n=n, reduce=reduce)
    assert y.shape == (bsz, length, g)
    torch.testing.assert_close(y.double(), ref, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("reduce", ["min", "mean"])
def test_nstep_with_n_1_equals_td_targets_exactly(reduce: str) -> None:
    gen = torch.Generator().manual_seed(0)
    rewards, next_values = torch.randn(3, 5, generator=gen), torch.randn(3, 5, 4, 3, generator=gen)
    terminated, mask = torch.rand(3, 5, generator=gen) < 0.3, torch.rand(3, 5, generator=gen) < 0.7
    gammas = torch.tensor([0.1, 0.9, 0.997])
    one = td_targets(rewards, terminated, next_values, gammas, num_td=2, reduce=reduce, generator=gen.manual_seed(1))
    nstep = nstep_td_targets(
        rewards, terminated, mask, next_values, gammas, n=1, num_td=2, reduce=reduce, generator=gen.manual_seed(1)
    )
    assert torch.equal(one, nstep)


def test_nstep_rejects_n_below_one() -> None:
    z = torch.zeros(1, 2)
    with pytest.raises(ValueError, match="n must be at least 1, got 0"):
        nstep_td_targets(z, z.bool(), z.bool(), torch.zeros(1, 2, 1, 1), torch.ones(1), n=0, num_td=1, reduce="min")


def _tree_backup_reference(
    rewards: torch.Tensor,
    terminated: torch.Tensor,
    mask: torch.Tensor,
    next_values: torch.Tensor,
    next_q_data: torch.Tensor,
    traces: torch.Tensor,
    gammas: torch.Tensor,
    idx: torch.Tensor,
    *,
    n: int,
) -> torch.Tensor:
    """Tree backup by its recursion, one (b, t) at a time: G_s = r_s + g (V_{s+1} + c_{s+1} (G_{s+1} - Q_{s+1}))
    while the data continues within n steps, else r_s + g V_{s+1} (0 after a terminal)."""
    bsz, length, _, g = next_values.shape
    out = torch.zeros(bsz, length, g, dtype=torch.float64)
    gam = gammas.double()
    for b in range(bsz):
        for t in range(length):

            def ret(s: int, left: int, b: int = b) -> torch.Tensor:  # (K, G)
                if terminated[b, s]:
                    return rewards[b, s].double().expand(next_values.shape[2], g)
                base = rewards[b, s].double() + gam * next_values[b, s].double()
                if left == 1 or s + 1 >= length or not mask[b, s + 1]:
                    return base
                later = ret(s + 1, left - 1) - next_q_data[b, s].double()
                return base + gam * traces[b, s].double() * later

            drawn = ret(t, n).gather(0, idx[b, t])  # (num_td, G)
            out[b, t] = drawn.min(0).values
    return out


@pytest.mark.parametrize("n", [2, 4, 9])
def test_tree_backup_matches_its_recursion(n: int) -> None:
    gen = torch.Generator().manual_seed(n)
    bsz, length, k, g = 4, 9, 3, 2
    rewards = torch.randn(bsz, length, generator=gen)
    mask = torch.arange(length)[None] < torch.tensor([9, 6, 3, 1])[:, None]
    terminated = (torch.rand(bsz, length, generator=gen) < 0.2) & mask
    next_values, next_q = torch.randn(2, bsz, length, k, g, generator=gen)
    traces = torch.rand(bsz, length, g, generator=gen)
    gammas = torch.tensor([0.7, 0.99])
    y = nstep_td_targets(rewards, terminated, mask, next_values, gammas, n=n, num_td=2, reduce="min",
                         next_q_data=next_q, traces=traces, generator=gen.manual_seed(3))  # fmt: skip
    idx = torch.randint(0, k, (bsz, length, 2, g), generator=gen.manual_seed(3))
    ref = _tree_backup_reference(rewards, terminated, mask, next_values, next_q, traces, gammas, idx, n=n)
    torch.testing.assert_close(y.double(), ref, atol=1e-5, rtol=1e-5)


def test_tree_backup_drops_rewards_of_actions_the_policy_would_not_take() -> None:
    """A random data action at t+1 that the policy never takes: its reward does not reach step t's target."""
    rewards = torch.tensor([[0.0, 10.0]])  # the data's (off-policy) action at t=1 happened to pay 10
    terminated = torch.tensor([[False, True]])
    values = torch.full((1, 2, 1, 1), 2.0)  # V(s_1) = E_pi Q(s_1, .) = 2
    q_data = torch.full((1, 2, 1, 1), 10.0)  # Q(s_1, a_1) = 10
    gammas = torch.tensor([0.5])
    args = (rewards, terminated, torch.ones(1, 2, dtype=torch.bool), values, gammas)
    plain = nstep_td_targets(*args, n=2, num_td=1, reduce="min")
    never = nstep_td_targets(*args, n=2, num_td=1, reduce="min", next_q_data=q_data, traces=torch.zeros(1, 2, 1))
    always = nstep_td_targets(*args, n=2, num_td=1, reduce="min", next_q_data=values, traces=torch.ones(1, 2, 1))
    assert plain[0, 0, 0] == 5.0  # 0 + 0.5 * 10: the random action's reward
    assert never[0, 0, 0] == 1.0  # 0 + 0.5 * V(s_1): the policy's expected value instead
    assert always[0, 0, 0] == 5.0  # the policy's own action (pi = 1, Q = V): the reward counts in full
