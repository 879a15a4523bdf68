"""Network configs from YAML-shaped data, factories, plugins by import path, optional dependencies, layering."""

from __future__ import annotations

import ast
import dataclasses
import importlib.util
import subprocess
import sys
from pathlib import Path
from typing import Any, ClassVar

import pytest
import torch

import amago_pipe.config.nets as nets_config
import amago_pipe.nets
from amago_pipe.config.base import config, field_docs
from amago_pipe.config.build import build_strict
from amago_pipe.config.nets import (
    GruConfig,
    MambaConfig,
    ModelConfig,
    TransformerConfig,
    TstepEncoderConfig,
)
from amago_pipe.errors import ConfigError, MissingDependencyError
from amago_pipe.nets import SequenceModel, TstepEncoder, build_sequence_model, build_traj_encoder
from amago_pipe.spec import DataSpec


def model_from(data: dict[str, Any]) -> ModelConfig:
    return build_strict(ModelConfig, data)  # type: ignore[no-any-return]


class ConstantTstepEncoder(TstepEncoder):
    """A plugin encoder: ignores the observation, embeds rl2 only."""

    def __init__(self, *, spec: DataSpec, cfg: ConstantTstepConfig):
        super().__init__()
        self.out_dim = cfg.width
        self.proj = torch.nn.Linear(spec.rl2_dim, cfg.width)

    def forward(self, obs: dict[str, torch.Tensor], rl2: torch.Tensor) -> torch.Tensor:
        return self.proj(rl2)


@config
class ConstantTstepConfig(TstepEncoderConfig):
    """Test plugin config."""

    impl: ClassVar[str] = f"{__name__}:ConstantTstepEncoder"
    width: int = 6
    """Output width."""


def test_model_config_from_yaml_data_builds_the_sequence_model(vector_spec: DataSpec) -> None:
    cfg = model_from({"tstep_encoder": {"type": "ff"}, "traj_encoder": {"type": "transformer", "d_model": 32}})
    assert isinstance(cfg.traj_encoder, TransformerConfig) and cfg.traj_encoder.d_model == 32
    model = build_sequence_model(cfg, vector_spec, max_seq_len=8)
    assert isinstance(model, SequenceModel) and model.out_dim == 32
    obs = {"observation": torch.randn(2, 5, 4), "mode": torch.randint(0, 4, (2, 5))}
    out, _state = model(obs, torch.randn(2, 5, 4), torch.arange(5).repeat(2, 1))
    assert out.shape == (2, 5, 32)
    step, _ = model(
        {k: v[:, :1] for k, v in obs.items()}, torch.randn(2, 1, 4), torch.zeros(2, 1).long(), model.init_state(2)
    )
    assert step.shape == (2, 1, 32)


def test_defaults_are_ff_then_transformer() -> None:
    cfg = ModelConfig()
    assert (cfg.tstep_encoder.type, cfg.traj_encoder.type) == ("ff", "transformer")
    assert isinstance(cfg.traj_encoder, TransformerConfig) and cfg.traj_encoder.d_model == 128


def test_every_config_field_has_a_docstring() -> None:
    classes = [c for c in vars(nets_config).values() if isinstance(c, type) and dataclasses.is_dataclass(c)]
    missing = [
        f"{c.__name__}.{f.name}"
        for c in classes
        if c.__module__ == nets_config.__name__
        for f in dataclasses.fields(c)
        if f.name not in field_docs(c)
    ]
    assert not missing


def test_config_errors_name_the_path() -> None:
    with pytest.raises(
        ConfigError, match=r"traj_encoder.type: unknown traj_encoder 'transfomer' .*did you mean 'transformer'"
    ):
        model_from({"traj_encoder": {"type": "transfomer"}})
    with pytest.raises(ConfigError, match=r"traj_encoder.n_head: unknown key 'n_head'.*did you mean 'n_heads'"):
        model_from({"traj_encoder": {"type": "transformer", "n_head": 4}})
    with pytest.raises(ConfigError, match=r"traj_encoder.n_heads: d_model 102 is not divisible by n_heads 4"):
        model_from({"traj_encoder": {"type": "transformer", "d_model": 102}})
    with pytest.raises(ConfigError, match=r"traj_encoder.pos_emb: rope needs an even head size"):
        model_from({"traj_encoder": {"type": "transformer", "d_model": 24, "n_heads": 8, "pos_emb": "rope"}})
    with pytest.raises(ConfigError, match=r"traj_encoder.attention: expected one of 'sdpa', 'flash', 'vanilla'"):
        model_from({"traj_encoder": {"type": "transformer", "attention": "flex"}})


def test_plugin_tstep_encoder_by_import_path(vector_spec: DataSpec) -> None:
    cfg = model_from(
        {
            "tstep_encoder": {"type": f"{__name__}:ConstantTstepConfig", "width": 5},
            "traj_encoder": {"type": "gru", "d_model": 8},
        }
    )
    model = build_sequence_model(cfg, vector_spec, max_seq_len=4)
    assert isinstance(model.tstep_encoder, ConstantTstepEncoder) and model.tstep_encoder.out_dim == 5
    with pytest.raises(ConfigError, match=r"tstep_encoder.type: .* not a tstep_encoder config"):
        model_from({"tstep_encoder": {"type": f"{__name__}:model_from"}})


def test_optional_dependencies_are_checked_at_the_point_of_use() -> None:
    seq, time = torch.randn(1, 3, 4), torch.zeros(1, 3, dtype=torch.long)
    flash = build_traj_encoder(TransformerConfig(d_model=16, n_heads=2, attention="flash"), 4, 8)
    mamba = build_traj_encoder(MambaConfig(d_model=16, backend="cuda"), 4, 8)
    for enc in (flash, mamba):  # building and stepwise rollouts never need the optional packages
        out, _ = enc(seq[:, :1], time[:, :1], enc.init_state(1))
        assert out.shape == (1, 1, 16)
    if importlib.util.find_spec("flash_attn") is None:
        with pytest.raises(
            MissingDependencyError, match=r"'flash' needs the flash-attn package.*pip install flash-attn"
        ):
            flash(seq, time)
    else:
        with pytest.raises(ConfigError, match=r"'flash' runs on CUDA tensors in float16/bfloat16, got cpu float32"):
            flash(seq, time)
    if importlib.util.find_spec("mamba_ssm") is None:
        with pytest.raises(MissingDependencyError, match=r"'cuda' needs the mamba-ssm package.*pip install mamba-ssm"):
            mamba(seq, time)
    else:
        with pytest.raises(ConfigError, match=r"'cuda' needs CUDA tensors .* set backend: auto or torch"):
            mamba(seq, time)


def test_traj_encoder_input_checks() -> None:
    enc = build_traj_encoder(GruConfig(d_model=8), 4, 8)
    with pytest.raises(ValueError, match=r"seq must have shape \(B, L, 4\), got \(2, 3, 5\)"):
        enc(torch.randn(2, 3, 5), torch.zeros(2, 3, dtype=torch.long))
    with pytest.raises(ValueError, match=r"time must hold integer timesteps"):
        enc(torch.randn(2, 3, 4), torch.zeros(2, 3))


def test_config_does_not_import_torch_and_nets_import_is_lazy() -> None:
    code = (
        "import sys, amago_pipe.config.nets, amago_pipe.config.registries as r\n"
        "r.TRAJ_ENCODERS.get('mamba'); r.TSTEP_ENCODERS.get('cnn')\n"
        "assert 'torch' not in sys.modules, 'config imported torch'\n"
        "import amago_pipe.nets\n"
        "assert 'torch' not in sys.modules, 'importing amago_pipe.nets imported torch'\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr


def test_nets_do_not_import_stores_yaml_or_pipelines() -> None:
    forbidden = (
        "yaml",
        "zarr",
        "amago_pipe.store",
        "amago_pipe.data",
        "amago_pipe.pipeline",
        "amago_pipe.config.loader",
    )
    nets_dir = Path(amago_pipe.nets.__file__).parent
    for path in sorted(nets_dir.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            bad = [n for n in names if n.startswith(forbidden)]
            assert not bad, f"{path.name} imports {bad}"
