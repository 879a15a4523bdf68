"""Action distributions with batch shape `(B, L, G)`: categorical, tanh-Gaussian, scaled Beta, multi-binary.
Continuous actions live in [-1, 1] (rescaling to env bounds is the env wrapper's job). Pure torch.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch.distributions import Bernoulli, Beta, Categorical, Distribution, Independent, Normal, constraints

EPS = 1e-6


def _log_tanh_jacobian(u: torch.Tensor) -> torch.Tensor:
    """log(1 - tanh(u)^2), computed stably from the pre-squash value."""
    return 2.0 * (math.log(2.0) - u - F.softplus(-2.0 * u))


class TanhNormal(Distribution):
    """tanh(Normal(mean, std)) per action dimension; event shape `(A,)`."""

    arg_constraints: dict[str, constraints.Constraint] = {}
    has_rsample = True

    def __init__(self, mean: torch.Tensor, std: torch.Tensor):
        self.base = Normal(mean, std, validate_args=False)
        super().__init__(batch_shape=mean.shape[:-1], event_shape=mean.shape[-1:], validate_args=False)

    def rsample(self, sample_shape: torch.Size | list[int] | tuple[int, ...] = ()) -> torch.Tensor:
        return torch.tanh(self.base.rsample(torch.Size(sample_shape)))

    def sample(self, sample_shape: torch.Size | list[int] | tuple[int, ...] = ()) -> torch.Tensor:
        with torch.no_grad():
            return self.rsample(sample_shape)

    def rsample_with_log_prob(self) -> tuple[torch.Tensor, torch.Tensor]:
        """A reparametrised sample `(..., A)` and its log-probability `(...)`, without an atanh round trip."""
        u = self.base.rsample()
        return torch.tanh(u), (self.base.log_prob(u) - _log_tanh_jacobian(u)).sum(-1)

    def log_prob(self, value: torch.Tensor) -> torch.Tensor:
        value = value.clamp(-1.0 + EPS, 1.0 - EPS)
        u = torch.atanh(value)
        return (self.base.log_prob(u) - _log_tanh_jacobian(u)).sum(-1)

    def entropy(self) -> torch.Tensor:
        """Single-sample (differentiable) estimate; there is no closed form."""
        return -self.rsample_with_log_prob()[1]

    @property
    def mode(self) -> torch.Tensor:
        return torch.tanh(self.base.mean)

    @property
    def mean(self) -> torch.Tensor:
        return self.mode


class ScaledBeta(Distribution):
    """Beta(alpha, beta) mapped from [0, 1] to [-1, 1] per action dimension; event shape `(A,)`."""

    arg_constraints: dict[str, constraints.Constraint] = {}
    has_rsample = True

    def __init__(self, alpha: torch.Tensor, beta: torch.Tensor):
        self.base = Beta(alpha, beta, validate_args=False)
        super().__init__(batch_shape=alpha.shape[:-1], event_shape=alpha.shape[-1:], validate_args=False)

    def rsample(self, sample_shape: torch.Size | list[int] | tuple[int, ...] = ()) -> torch.Tensor:
        return 2.0 * self.base.rsample(torch.Size(sample_shape)) - 1.0

    def sample(self, sample_shape: torch.Size | list[int] | tuple[int, ...] = ()) -> torch.Tensor:
        with torch.no_grad():
            return self.rsample(sample_shape)

    def log_prob(self, value: torch.Tensor) -> torch.Tensor:
        unit = ((value + 1.0) / 2.0).clamp(EPS, 1.0 - EPS)
        return (self.base.log_prob(unit) - math.log(2.0)).sum(-1)

    def entropy(self) -> torch.Tensor:
        return (self.base.entropy() + math.log(2.0)).sum(-1)

    @property
    def mode(self) -> torch.Tensor:
        a, b = self.base.concentration1, self.base.concentration0
        return 2.0 * ((a - 1.0) / (a + b - 2.0).clamp_min(EPS)).clamp(0.0, 1.0) - 1.0

    @property
    def mean(self) -> torch.Tensor:
        return 2.0 * self.base.mean - 1.0


def categorical(logits: torch.Tensor) -> Categorical:
    """Discrete actions from logits `(B, L, G, n)`; `log_prob` takes integer ids `(B, L, G)`."""
    return Categorical(logits=logits, validate_args=False)


def multi_binary(logits: torch.Tensor) -> Independent:
    """Independent Bernoulli actions from logits `(B, L, G, A)`; samples are float 0/1 `(B, L, G, A)`."""
    return Independent(Bernoulli(logits=logits, validate_args=False), 1, validate_args=False)


def tanh_gaussian(params: torch.Tensor, log_std_min: float, log_std_max: float) -> TanhNormal:
    """From `(..., 2A)` raw outputs: mean and a log-std squashed into [log_std_min, log_std_max]."""
    mean, raw = params.chunk(2, dim=-1)
    log_std = log_std_min + 0.5 * (log_std_max - log_std_min) * (torch.tanh(raw) + 1.0)
    return TanhNormal(mean, log_std.exp())


def scaled_beta(params: torch.Tensor) -> ScaledBeta:
    """From `(..., 2A)` raw outputs: concentrations 1 + softplus(.) (unimodal Beta)."""
    a, b = params.chunk(2, dim=-1)
    return ScaledBeta(1.0 + F.softplus(a), 1.0 + F.softplus(b))
