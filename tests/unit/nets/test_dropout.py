"""`Dropout`: the CPU mask drops with probability p, keeps the mean, is seeded, and its gradient is the mask."""

from __future__ import annotations

import pytest
import torch

from amago_pipe.nets.layers import Dropout, dropout_mask


@pytest.mark.parametrize("p", [0.05, 0.3, 0.9])
def test_mask_drops_with_probability_p_and_keeps_the_mean(p: float) -> None:
    torch.manual_seed(0)
    mask = dropout_mask(torch.Size([200, 1001]), p, torch.float32)  # an odd count: the last 64-bit draw is split
    dropped = float((mask == 0).float().mean())
    assert abs(dropped - p) < 4 * (p * (1 - p) / mask.numel()) ** 0.5 + 2**-16
    assert mask.unique().tolist() == [0.0, pytest.approx(1 / (1 - p))]
    assert abs(float(mask.mean()) - 1) < 0.01


def test_masks_of_neighbouring_elements_are_independent() -> None:
    torch.manual_seed(0)
    keep = dropout_mask(torch.Size([400_000]), 0.5, torch.float32) > 0
    both = float((keep[0::4] & keep[1::4]).float().mean())  # two lanes of one 64-bit draw
    assert abs(both - 0.25) < 0.005


def test_dropout_is_seeded_and_its_gradient_is_the_mask() -> None:
    layer = Dropout(0.2).train()
    x = torch.randn(3, 7, 11, requires_grad=True)
    torch.manual_seed(5)
    y = layer(x)
    torch.manual_seed(5)
    torch.testing.assert_close(layer(x), y)
    y.backward(torch.ones_like(y))
    torch.testing.assert_close(x.grad, torch.where(y == 0, 0.0, 1 / 0.8) * torch.ones_like(x))
    assert torch.equal(layer.eval()(x), x)


def test_bf16_input_gets_a_bf16_mask() -> None:
    x = torch.randn(4, 9).bfloat16()
    assert Dropout(0.1).train()(x).dtype == torch.bfloat16
