"""The GRU's gate initialisations: chrono units keep their state across the window; uniform ones forget it."""

from __future__ import annotations

import math

import pytest
import torch

from amago_pipe.config.nets import GruConfig
from amago_pipe.nets.traj_ff_gru import GruTrajEncoder

D_IN, HIDDEN, T = 5, 32, 40


def _encoder(gate_init: str, seed: int = 0) -> GruTrajEncoder:
    torch.manual_seed(seed)
    cfg = GruConfig(d_model=HIDDEN, n_layers=2, gate_init=gate_init)  # type: ignore[call-arg]
    return GruTrajEncoder(d_in=D_IN, max_seq_len=T, cfg=cfg)


@pytest.mark.parametrize(("gate_init", "chrono_units"), [("chrono", HIDDEN), ("mixed", HIDDEN // 2), ("uniform", 0)])
def test_chrono_units_have_update_biases_spanning_one_step_to_the_window(gate_init: str, chrono_units: int) -> None:
    gru = _encoder(gate_init).gru
    pytorch_bound = HIDDEN**-0.5
    for layer in range(2):
        update_ih = getattr(gru, f"bias_ih_l{layer}")[HIDDEN : 2 * HIDDEN]
        update_hh = getattr(gru, f"bias_hh_l{layer}")[HIDDEN : 2 * HIDDEN]
        fast, slow = slice(0, HIDDEN - chrono_units), slice(HIDDEN - chrono_units, HIDDEN)
        assert torch.all(update_hh[fast].abs() <= pytorch_bound)  # PyTorch's init, untouched
        if chrono_units:
            assert torch.all(update_ih[slow] == 0)
            assert update_hh[slow].min() >= 0 and update_hh[slow].max() <= math.log(T - 1)
            assert update_hh[slow].max() > math.log(T / 2)  # some units keep their state for most of the window
        reset_hh = getattr(gru, f"bias_hh_l{layer}")[:HIDDEN]  # the other gates keep PyTorch's init
        assert reset_hh.abs().max() <= pytorch_bound


@pytest.mark.parametrize("gate_init", ["chrono", "mixed"])
@pytest.mark.parametrize("seed", [0, 1])
def test_chrono_units_remember_a_first_step_input_that_uniform_forgets(gate_init: str, seed: int) -> None:
    """An input at t=0 only, then zeros: how far apart the final outputs of two different first inputs are."""

    def spread(encoder: GruTrajEncoder) -> float:
        seq = torch.zeros(2, T, D_IN)
        seq[0, 0], seq[1, 0] = 3.0, -3.0
        with torch.no_grad():
            out, _ = encoder(seq, torch.arange(T).expand(2, T))
        return float((out[0, -1] - out[1, -1]).norm())

    assert spread(_encoder(gate_init, seed)) > 20 * spread(_encoder("uniform", seed))
