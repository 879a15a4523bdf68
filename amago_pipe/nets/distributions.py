"""Action distributions with batch shape `(B, L, G)`: categorical, multi-categorical (multidiscrete),
multi-binary, tanh-Gaussian, tanh-Gaussian mixture and scaled Beta. Continuous actions live in [-1, 1]
(rescaling to env bounds is the env wrapper's job). Pure torch.
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


class TanhGMM(Distribution):
    """tanh of a mixture of C diagonal Gaussians over the whole action vector; event shape `(A,)`.

    `logits (..., C)` mixture weights, `mean`/`std (..., C, A)` in pre-squash space. `log_prob` is the exact
    mixture density with the tanh Jacobian. `rsample` draws a component without gradient, then reparameterises
    within it: gradients reach the drawn component's mean and std, never the mixture weights (which still learn
    through `log_prob`, e.g. from behaviour cloning or `entropy`).
    """

    arg_constraints: dict[str, constraints.Constraint] = {}
    has_rsample = True

    def __init__(self, logits: torch.Tensor, mean: torch.Tensor, std: torch.Tensor):
        if logits.shape != mean.shape[:-1] or mean.shape != std.shape:
            raise ValueError(
                f"TanhGMM: logits must be (..., C) and mean/std (..., C, A); got {tuple(logits.shape)}, "
                f"{tuple(mean.shape)}, {tuple(std.shape)}"
            )
        self.logits = logits - logits.logsumexp(-1, keepdim=True)  # (..., C) normalised log-weights
        self.loc, self.scale = mean, std  # (..., C, A)
        super().__init__(batch_shape=logits.shape[:-1], event_shape=mean.shape[-1:], validate_args=False)

    def _pre_squash(self, sample_shape: torch.Size | list[int] | tuple[int, ...]) -> torch.Tensor:
        """`(*sample_shape, ..., A)` draws of the Gaussian mixture, reparameterised within the drawn component."""
        shape = torch.Size(sample_shape)
        comp = Categorical(logits=self.logits.detach(), validate_args=False).sample(shape)  # (*S, ...)
        idx = comp[..., None, None].expand(*comp.shape, 1, self.loc.shape[-1])  # (*S, ..., 1, A)
        loc = torch.gather(self.loc.expand(*shape, *self.loc.shape), -2, idx).squeeze(-2)  # (*S, ..., A)
        scale = torch.gather(self.scale.expand(*shape, *self.scale.shape), -2, idx).squeeze(-2)
        return loc + scale * torch.randn_like(loc)

    def _log_prob_pre_squash(self, u: torch.Tensor) -> torch.Tensor:
        """log density of the pre-squash value `u (..., A)` (tanh Jacobian included), `(...)`."""
        comp = Normal(self.loc, self.scale, validate_args=False).log_prob(u[..., None, :]).sum(-1)  # (..., C)
        return (self.logits + comp).logsumexp(-1) - _log_tanh_jacobian(u).sum(-1)

    def rsample(self, sample_shape: torch.Size | list[int] | tuple[int, ...] = ()) -> torch.Tensor:
        return torch.tanh(self._pre_squash(sample_shape))

    def sample(self, sample_shape: torch.Size | list[int] | tuple[int, ...] = ()) -> torch.Tensor:
        with torch.no_grad():
            return self.rsample(sample_shape)

    def rsample_with_log_prob(self) -> tuple[torch.Tensor, torch.Tensor]:
        """A sample `(..., A)` (reparameterised within its component) and its log-probability `(...)`."""
        u = self._pre_squash(())
        return torch.tanh(u), self._log_prob_pre_squash(u)

    def log_prob(self, value: torch.Tensor) -> torch.Tensor:
        u = torch.atanh(value.clamp(-1.0 + EPS, 1.0 - EPS))  # (..., A)
        return self._log_prob_pre_squash(u)

    def entropy(self) -> torch.Tensor:
        """Single-sample (differentiable) estimate, as for TanhNormal; there is no closed form."""
        return -self.rsample_with_log_prob()[1]

    @property
    def mode(self) -> torch.Tensor:
        """The squashed mean of the most likely component (not the exact mode of the mixture)."""
        best = self.logits.argmax(-1)[..., None, None].expand(*self.batch_shape, 1, self.loc.shape[-1])
        return torch.tanh(torch.gather(self.loc, -2, best).squeeze(-2))  # (..., A)

    @property
    def mean(self) -> torch.Tensor:
        return self.mode


class MultiCategorical(Distribution):
    """Independent categoricals over the `nvec` sub-actions of a multidiscrete action; event shape `(k,)`.

    Built from concatenated logits `(..., sum(nvec))`; values are integer ids `(..., k)`. `log_prob` and
    `entropy` sum over the sub-actions. No `rsample` (ids are not differentiable).
    """

    arg_constraints: dict[str, constraints.Constraint] = {}

    def __init__(self, logits: torch.Tensor, nvec: tuple[int, ...]):
        if not nvec or min(nvec) < 1 or logits.shape[-1] != sum(nvec):
            raise ValueError(
                f"MultiCategorical: logits must be (..., sum(nvec)={sum(nvec)}) for nvec {list(nvec)}, "
                f"got {tuple(logits.shape)}"
            )
        self.nvec = tuple(nvec)
        k, width = len(nvec), max(nvec)
        cols = [j * width + i for j, n in enumerate(nvec) for i in range(n)]
        cols_t = torch.tensor(cols, device=logits.device)
        padded = logits.new_full((*logits.shape[:-1], k * width), float("-inf")).index_copy(-1, cols_t, logits)
        self.base = Categorical(logits=padded.unflatten(-1, (k, width)), validate_args=False)  # batch (..., k)
        super().__init__(batch_shape=logits.shape[:-1], event_shape=torch.Size((k,)), validate_args=False)

    def log_prob(self, value: torch.Tensor) -> torch.Tensor:
        return self.base.log_prob(value.long()).sum(-1)  # (...)

    def sample(self, sample_shape: torch.Size | list[int] | tuple[int, ...] = ()) -> torch.Tensor:
        return self.base.sample(torch.Size(sample_shape))  # (*S, ..., k) int64

    def entropy(self) -> torch.Tensor:
        return self.base.entropy().sum(-1)

    @property
    def mode(self) -> torch.Tensor:
        return self.base.logits.argmax(-1)  # (..., k)

    @property
    def probs(self) -> torch.Tensor:
        """(..., k, max(nvec)) per sub-action probabilities (zero past each sub-action's `n`)."""
        return self.base.probs


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


def multi_categorical(logits: torch.Tensor, nvec: tuple[int, ...]) -> MultiCategorical:
    """Multidiscrete actions from concatenated logits `(B, L, G, sum(nvec))`; ids `(B, L, G, k)`."""
    return MultiCategorical(logits, nvec)


def _squashed_log_std(raw: torch.Tensor, log_std_min: float, log_std_max: float) -> torch.Tensor:
    return log_std_min + 0.5 * (log_std_max - log_std_min) * (torch.tanh(raw) + 1.0)


def tanh_gaussian(params: torch.Tensor, log_std_min: float, log_std_max: float) -> TanhNormal:
    """From `(..., 2A)` raw outputs: mean and a log-std squashed into [log_std_min, log_std_max]."""
    mean, raw = params.chunk(2, dim=-1)
    return TanhNormal(mean, _squashed_log_std(raw, log_std_min, log_std_max).exp())


def gmm_params_per_action(action_dim: int, components: int) -> int:
    """Raw outputs of `tanh_gmm` per distribution: C logits + C means and C log-stds per action dimension."""
    return components * (2 * action_dim + 1)


def tanh_gmm(params: torch.Tensor, components: int, log_std_min: float, log_std_max: float) -> TanhGMM:
    """From `(..., C (2A + 1))` raw outputs: C mixture logits, then (C, A) means, then (C, A) raw log-stds."""
    width = params.shape[-1] - components
    if width <= 0 or width % (2 * components):
        raise ValueError(f"tanh_gmm: {params.shape[-1]} outputs do not split into {components} components")
    logits, mean, raw = params.split([components, width // 2, width // 2], dim=-1)
    mean = mean.unflatten(-1, (components, -1))  # (..., C, A)
    std = _squashed_log_std(raw.unflatten(-1, (components, -1)), log_std_min, log_std_max).exp()
    return TanhGMM(logits, mean, std)


def scaled_beta(params: torch.Tensor) -> ScaledBeta:
    """From `(..., 2A)` raw outputs: concentrations 1 + softplus(.) (unimodal Beta)."""
    a, b = params.chunk(2, dim=-1)
    return ScaledBeta(1.0 + F.softplus(a), 1.0 + F.softplus(b))
