"""Loading policy files into agents (`agents.loading`): files older than a network option still act as saved."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from unit.config.test_agent_moved import OLD_AGENT

from amago_pipe.agents.loading import agent_from_weights
from amago_pipe.config.base import to_dict
from amago_pipe.config.build import build_strict
from amago_pipe.config.nets import ModelConfig
from amago_pipe.config.train import AgentConfig
from amago_pipe.spec import ActionSpec, ArraySpec, DataSpec
from amago_pipe.train.checkpoint import save_weights
from amago_pipe.train.runtime import build_agent

GRID = DataSpec({"grid": ArraySpec((5, 6, 3), "uint8", 0, 255)}, ActionSpec("discrete", (), n=3))
CNN = {
    "type": "cnn",
    "cnn": "impala",
    "impala_channels": (4,),
    "img_features": 16,
    "vector_features": 8,
    "d_output": 16,
}


def test_policy_files_without_image_statistics_act_as_before(tmp_path: Path) -> None:
    """A cnn policy file saved before `normalize_images` (no statistics, no such config key) loads with that norm
    as the identity: the same outputs as the network it was saved from."""
    model = {"tstep_encoder": {**CNN, "normalize_images": False},
             "traj_encoder": {"type": "gru", "d_model": 16}}  # fmt: skip
    agent_cfg = build_strict(AgentConfig, {"type": "agent"})
    old = build_agent(agent_cfg, build_strict(ModelConfig, model), GRID, max_seq_len=4)
    grid, rl2 = torch.randint(0, 11, (2, 3, 5, 6, 3), dtype=torch.uint8), torch.randn(2, 3, GRID.rl2_dim)
    time = torch.arange(3).expand(2, 3)
    del model["tstep_encoder"]["normalize_images"]
    meta = {"spec": GRID.to_json(), "model": model, "agent": to_dict(agent_cfg), "max_seq_len": 4}
    save_weights(tmp_path / "old.safetensors", old.policy_state_dict(), {k: json.dumps(v) for k, v in meta.items()})
    loaded = agent_from_weights(tmp_path / "old.safetensors", meta)
    assert float(loaded.state_dict()["model.tstep_encoder.img_norms.grid.count"]) == 0.0
    expected, _ = old.model.eval()({"grid": grid}, rl2, time)
    torch.testing.assert_close(loaded.model({"grid": grid}, rl2, time)[0], expected)


def test_policy_files_with_the_pre_0_3_flat_agent_keys_load(tmp_path: Path) -> None:
    """A policy file whose `agent` metadata has the flat keys of before the blocks (`fbc_filter`, `n_step`, ...) loads, its settings
    moved into their blocks."""
    model = {"tstep_encoder": CNN, "traj_encoder": {"type": "gru", "d_model": 16}}
    agent = build_agent(
        build_strict(AgentConfig, {"type": "agent"}), build_strict(ModelConfig, model), GRID, max_seq_len=4
    )
    meta = {"spec": GRID.to_json(), "model": model, "agent": {**OLD_AGENT, "n_step": 2, "critic_loss": "huber"},
            "max_seq_len": 4}  # fmt: skip
    save_weights(tmp_path / "old.safetensors", agent.policy_state_dict(), {k: json.dumps(v) for k, v in meta.items()})
    loaded = agent_from_weights(tmp_path / "old.safetensors", meta)
    assert loaded.cfg.targets.n_step == 2 and loaded.cfg.critic.loss == "huber"
