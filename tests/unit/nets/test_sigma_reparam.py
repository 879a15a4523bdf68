"""sigma-reparam linear layers: acting reuses the effective weight, and never a stale one."""

from __future__ import annotations

import copy

import torch

from amago_pipe.nets.layers import SigmaReparamLinear


def _fresh(layer: SigmaReparamLinear, x: torch.Tensor) -> torch.Tensor:
    """The layer's output recomputed from its weights (no cache: a copy with gradients on)."""
    return copy.deepcopy(layer).eval()(x).detach()


def test_acting_reuses_the_weight_until_an_update_load_or_average_changes_it() -> None:
    torch.manual_seed(0)
    layer = SigmaReparamLinear(5, 3).eval()
    x = torch.randn(4, 5)
    with torch.no_grad():
        first = layer.effective_weight()
        assert layer.effective_weight() is first  # reused while nothing changed
    layer.train()
    opt = torch.optim.AdamW(layer.parameters(), lr=0.1)
    layer(x).square().sum().backward()
    opt.step()  # weights, gamma and the power-iteration vectors all moved
    layer.eval()
    changes = {
        "optimizer step": lambda: None,
        "load_state_dict": lambda: layer.load_state_dict({k: v * 1.5 for k, v in layer.state_dict().items()}),
        "foreach copy (policy average)": lambda: torch._foreach_copy_(
            list(layer.parameters()), [p * 0.5 for p in layer.parameters()]
        ),
    }
    for what, change in changes.items():
        with torch.no_grad():
            change()
            acted = layer(x)
        torch.testing.assert_close(acted, _fresh(layer, x), msg=what)
        with torch.no_grad():
            assert layer.effective_weight() is layer.effective_weight()
    with torch.no_grad():  # training mode never reuses: its power iteration moves u, v at each forward
        layer.train()
        assert layer.effective_weight() is not layer.effective_weight()
