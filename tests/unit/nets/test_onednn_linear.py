"""`onednn_linear`: the oneDNN product equals `F.linear` (values and gradients) and is taken only where it should."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from amago_pipe.nets import onednn_linear
from amago_pipe.nets.onednn_linear import Linear, linear, plain_kernels, use_onednn

needs_onednn = pytest.mark.skipif(not onednn_linear.AVAILABLE, reason="torch built without oneDNN")


def _inputs(rows: int = 96, d_in: int = 24, d_out: int = 40) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, rows // 2, d_in, generator=g)  # (B, L, I): leading axes are flattened
    return [t.requires_grad_() for t in (x, torch.randn(d_out, d_in, generator=g), torch.randn(d_out, generator=g))]


@needs_onednn
@pytest.mark.parametrize("bias", [True, False])
def test_linear_equals_f_linear_in_values_and_gradients(monkeypatch: pytest.MonkeyPatch, bias: bool) -> None:
    monkeypatch.setattr(onednn_linear, "ONEDNN_MIN_MACS", 0)
    monkeypatch.setattr(onednn_linear, "_enabled", [True])  # also on an Intel CPU, where it is off by default
    x, w, b = _inputs()
    assert use_onednn(x, w)
    out = linear(x, w, b if bias else None)
    ref = F.linear(x, w, b if bias else None)
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)
    grad = torch.randn_like(out)
    got = torch.autograd.grad(out, (x, w, b) if bias else (x, w), grad)
    want = torch.autograd.grad(ref, (x, w, b) if bias else (x, w), grad)
    for g_got, g_want in zip(got, want, strict=True):
        torch.testing.assert_close(g_got, g_want, rtol=1e-5, atol=1e-5)
    with torch.no_grad():
        torch.testing.assert_close(linear(x, w, b), F.linear(x, w, b), rtol=1e-5, atol=1e-5)


def test_small_traced_compiled_or_disabled_products_keep_f_linear(monkeypatch: pytest.MonkeyPatch) -> None:
    x, w, _ = _inputs()
    assert not use_onednn(x, w)  # 96 x 24 x 40 multiply-adds: below ONEDNN_MIN_MACS
    monkeypatch.setattr(onednn_linear, "ONEDNN_MIN_MACS", 0)
    monkeypatch.setattr(onednn_linear, "_enabled", [onednn_linear.AVAILABLE])
    assert not use_onednn(x.double(), w.double())
    with plain_kernels():
        assert not use_onednn(x, w)
    layer = Linear(24, 40)
    traced = torch.jit.trace(layer, x.detach())  # tracing records aten::linear, not oneDNN's op
    assert "mkldnn" not in str(traced.graph)
    torch.testing.assert_close(traced(x.detach()), F.linear(x.detach(), layer.weight, layer.bias))


def test_linear_keeps_nn_linear_state_dict_keys() -> None:
    plain = torch.nn.Linear(8, 4)
    layer = Linear(8, 4)
    layer.load_state_dict(plain.state_dict())
    assert isinstance(layer, torch.nn.Linear) and set(layer.state_dict()) == {"weight", "bias"}
