"""The registries of every pluggable component, keyed by the name users write in `type:`.

Entries are lazy `module:attr` paths to torch-free config classes; each config class names its
implementation in `impl`. Plugins use `type: package.module:Class` or the entry-point group
`amago_pipe.<kind>`. Each block below is owned by the subsystem that builds those components.
"""

from __future__ import annotations

from typing import Any

from amago_pipe.registry import Registry

STAGES: Registry[Any] = Registry("stage")
"""Pipeline stage types: convert, collect, relabel, train, evaluate, export."""
CONVERTERS: Registry[Any] = Registry("converter")
"""Dataset sources for the convert stage: minari, d4rl, amago-buffer."""
TSTEP_ENCODERS: Registry[Any] = Registry("tstep_encoder")
"""Per-timestep encoders: ff, cnn."""
TRAJ_ENCODERS: Registry[Any] = Registry("traj_encoder")
"""Sequence models over timesteps: ff, gru, transformer, mamba."""
AGENTS: Registry[Any] = Registry("agent")
"""Learning updates: agent (AMAGO), multitask (AMAGO-2)."""
POLICIES: Registry[Any] = Registry("policy")
"""Behaviour policies for collect: random, scripted, checkpoint."""

_BUILTIN: dict[Registry[Any], dict[str, str]] = {
    # --- stages (pipeline engine) ---
    STAGES: {
        "convert": "amago_pipe.config.convert:ConvertStageConfig",
        "collect": "amago_pipe.config.collect:CollectStageConfig",
        "train": "amago_pipe.config.train:TrainStageConfig",
        "evaluate": "amago_pipe.config.evaluate:EvaluateStageConfig",
    },
    # --- converters (converters/) ---
    CONVERTERS: {
        "minari": "amago_pipe.converters.minari_source:MinariConverter",
        "d4rl": "amago_pipe.converters.d4rl_hdf5:D4rlHdf5Converter",
        "amago-buffer": "amago_pipe.converters.amago_buffer:AmagoBufferConverter",
    },
    # --- networks (nets/) ---
    TSTEP_ENCODERS: {
        "ff": "amago_pipe.config.nets:FFTstepConfig",
        "cnn": "amago_pipe.config.nets:CnnTstepConfig",
    },
    TRAJ_ENCODERS: {
        "ff": "amago_pipe.config.nets:FFTrajConfig",
        "gru": "amago_pipe.config.nets:GruConfig",
        "transformer": "amago_pipe.config.nets:TransformerConfig",
        "mamba": "amago_pipe.config.nets:MambaConfig",
    },
    # --- agents (agents/) ---
    AGENTS: {"agent": "amago_pipe.config.train:AgentConfig", "multitask": "amago_pipe.config.train:MultiTaskConfig"},
    # --- collect policies (envs/) ---
    POLICIES: {
        "random": "amago_pipe.envs.policies:random_policy",
        "scripted": "amago_pipe.envs.policies:scripted_policy",
        "cartpole-pd": "amago_pipe.envs.scripted:cartpole_pd_policy",
        "pendulum-energy": "amago_pipe.envs.scripted:pendulum_energy_policy",
        "tmaze-walker": "amago_pipe.envs.builtin.behaviour:tmaze_walker_policy",
        "key-door-explorer": "amago_pipe.envs.builtin.behaviour:key_door_explorer_policy",
        "checkpoint": "amago_pipe.train.policy_loading:checkpoint_policy",
    },
}

for _registry, _entries in _BUILTIN.items():
    for _name, _target in _entries.items():
        _registry.register(_name, _target)
