"""`PolicyAverage`: a Polyak-averaged copy of an agent's sequence model and actor (`policy_average`).

The average is what policy files hold and what validation acts with; the updates use the live weights. Its
state-dict keys are `model.*` and `actor.*`, as the live modules'. Pure torch.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterator

import torch
from torch import nn

from amago_pipe.agents.losses import polyak_update


class PolicyAverage(nn.ModuleDict):
    """Frozen copies of `model` and `actor` that follow the live ones at a Polyak rate."""

    def __init__(self, model: nn.Module, actor: nn.Module):
        super().__init__({"model": copy.deepcopy(model), "actor": copy.deepcopy(actor)})
        self.requires_grad_(False)

    @staticmethod
    def _live(model: nn.Module, actor: nn.Module, *, buffers: bool = False) -> list[torch.Tensor]:
        """The live modules' parameters (or buffers), in the average's order."""
        if buffers:
            return [*model.buffers(), *actor.buffers()]
        return [*model.parameters(), *actor.parameters()]

    @torch.no_grad()
    def follow(self, model: nn.Module, actor: nn.Module, rate: float | None) -> None:
        """Parameters move `rate` of the way to the live ones (None: all of it, exactly); buffers are copied."""
        averaged: list[torch.Tensor] = list(self.parameters())
        live = self._live(model, actor)
        if rate is None:
            torch._foreach_copy_(averaged, live)
        else:
            polyak_update(averaged, live, rate)
        torch._foreach_copy_(list(self.buffers()), self._live(model, actor, buffers=True))

    @contextlib.contextmanager
    def swapped_in(self, model: nn.Module, actor: nn.Module) -> Iterator[None]:
        """Within it, the live `model` and `actor` hold the averaged weights; restored on exit."""
        live = self._live(model, actor)
        kept = [t.detach().clone() for t in live]
        with torch.no_grad():
            torch._foreach_copy_(live, list(self.parameters()))
        try:
            yield
        finally:
            with torch.no_grad():
                torch._foreach_copy_(live, kept)

    def policy_state_dict(self) -> dict[str, torch.Tensor]:
        """The averaged weights under the live modules' names (`model.*`, `actor.*`)."""
        return {f"{part}.{k}": v for part, module in self.items() for k, v in module.state_dict().items()}
