"""The GRU's chrono initialisation: update-gate biases spread over the window, so state survives the window."""

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


def test_chrono_biases_span_one_step_to_the_window() -> None:
    gru = _encoder("chrono").gru
    for layer in range(2):
        update_hh = getattr(gru, f"bias_hh_l{layer}")[HIDDEN : 2 * HIDDEN]
        assert torch.all(getattr(gru, f"bias_ih_l{layer}")[HIDDEN : 2 * HIDDEN] == 0)
        assert update_hh.min() >= 0 and update_hh.max() <= math.log(T - 1)
        assert update_hh.max() > math.log(T / 2)  # some units keep their state for most of the window
        reset_hh = getattr(gru, f"bias_hh_l{layer}")[:HIDDEN]  # the other gates keep PyTorch's init
        assert reset_hh.abs().max() <= HIDDEN**-0.5


@pytest.mark.parametrize("seed", [0, 1])
def test_chrono_state_remembers_a_first_step_input_that_uniform_forgets(seed: int) -> None:
    """An input at t=0 only, then zeros: how far apart the final outputs of two different first inputs are."""

    def spread(encoder: GruTrajEncoder) -> float:
        seq = torch.zeros(2, T, D_IN)
        seq[0, 0], seq[1, 0] = 3.0, -3.0
        with torch.no_grad():
            out, _ = encoder(seq, torch.arange(T).expand(2, T))
        return float((out[0, -1] - out[1, -1]).norm())

    assert spread(_encoder("chrono", seed)) > 20 * spread(_encoder("uniform", seed))
