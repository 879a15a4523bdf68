"""Networks: timestep and trajectory encoders (ff, gru, transformer, mamba), actor/critic heads, distributions.
Public names are imported lazily (torch loads on first attribute access). Must not import stores, YAML or pipelines.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS: dict[str, str] = {
    # factories and interfaces
    "build_tstep_encoder": "build",
    "build_traj_encoder": "build",
    "build_actor_head": "build",
    "build_critic_head": "build",
    "build_sequence_model": "build",
    "SequenceModel": "build",
    "TstepEncoder": "base",
    "TrajEncoder": "base",
    "TrajState": "base",
    # encoders
    "FFTstepEncoder": "tstep_encoders",
    "CnnTstepEncoder": "tstep_encoders",
    "FFTrajEncoder": "traj_ff_gru",
    "GruTrajEncoder": "traj_ff_gru",
    "TransformerTrajEncoder": "transformer",
    "MambaTrajEncoder": "mamba",
    "MambaMixer": "mamba",
    # heads, distributions, value bins
    "ActorHead": "heads",
    "CriticEnsemble": "heads",
    "TanhNormal": "distributions",
    "ScaledBeta": "distributions",
    "SymlogBins": "bins",
    "symlog": "bins",
    "symexp": "bins",
    "two_hot": "bins",
    "hl_gauss": "bins",
}

__all__ = [
    "ActorHead",
    "CnnTstepEncoder",
    "CriticEnsemble",
    "FFTrajEncoder",
    "FFTstepEncoder",
    "GruTrajEncoder",
    "MambaMixer",
    "MambaTrajEncoder",
    "ScaledBeta",
    "SequenceModel",
    "SymlogBins",
    "TanhNormal",
    "TrajEncoder",
    "TrajState",
    "TransformerTrajEncoder",
    "TstepEncoder",
    "build_actor_head",
    "build_critic_head",
    "build_sequence_model",
    "build_traj_encoder",
    "build_tstep_encoder",
    "hl_gauss",
    "symexp",
    "symlog",
    "two_hot",
]

if TYPE_CHECKING:
    from amago_pipe.nets.base import TrajEncoder, TrajState, TstepEncoder
    from amago_pipe.nets.bins import SymlogBins, hl_gauss, symexp, symlog, two_hot
    from amago_pipe.nets.build import (
        SequenceModel,
        build_actor_head,
        build_critic_head,
        build_sequence_model,
        build_traj_encoder,
        build_tstep_encoder,
    )
    from amago_pipe.nets.distributions import ScaledBeta, TanhNormal
    from amago_pipe.nets.heads import ActorHead, CriticEnsemble
    from amago_pipe.nets.mamba import MambaMixer, MambaTrajEncoder
    from amago_pipe.nets.traj_ff_gru import FFTrajEncoder, GruTrajEncoder
    from amago_pipe.nets.transformer import TransformerTrajEncoder
    from amago_pipe.nets.tstep_encoders import CnnTstepEncoder, FFTstepEncoder


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'amago_pipe.nets' has no attribute '{name}'")
    value = getattr(importlib.import_module(f"amago_pipe.nets.{_EXPORTS[name]}"), name)
    globals()[name] = value
    return value
