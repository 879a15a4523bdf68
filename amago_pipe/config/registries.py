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
"""Dataset sources of the convert stage (`source: {type: ...}`): minari, d4rl, amago-buffer."""
TSTEP_ENCODERS: Registry[Any] = Registry("tstep_encoder")
"""Per-timestep encoders: ff, cnn."""
TRAJ_ENCODERS: Registry[Any] = Registry("traj_encoder")
"""Sequence models over timesteps: ff, gru, transformer, mamba."""
AGENTS: Registry[Any] = Registry("agent")
"""Learning updates: agent (AMAGO), multitask (AMAGO-2)."""
BC_FILTERS: Registry[Any] = Registry("bc_filter")
"""Behaviour-cloning filters of the agents' advantage-filtered BC (`filter: {type: ...}`): exp, binary, leaky."""
POLICIES: Registry[Any] = Registry("policy")
"""Behaviour policies for collect: random, scripted, checkpoint, builtin controllers."""
EXPLORATION: Registry[Any] = Registry("exploration")
"""How behaviour policies explore: none, egreedy, bilevel, gaussian."""
RELABELERS: Registry[Any] = Registry("relabel_strategy")
"""Hindsight relabeling strategies: final, future, episode, random (single goals); none, some, all (sequences)."""
GOAL_REWARDS: Registry[Any] = Registry("goal_reward")
"""How relabeled rewards are recomputed: threshold, env (the env's compute_reward), function."""

_BUILTIN: dict[Registry[Any], dict[str, str]] = {
    # --- stages (pipeline engine) ---
    STAGES: {
        "convert": "amago_pipe.config.convert:ConvertStageConfig",
        "collect": "amago_pipe.config.collect:CollectStageConfig",
        "train": "amago_pipe.config.train:TrainStageConfig",
        "evaluate": "amago_pipe.config.evaluate:EvaluateStageConfig",
        "relabel": "amago_pipe.config.relabel:RelabelStageConfig",
        "export": "amago_pipe.config.export:ExportStageConfig",
    },
    # --- converters (converters/) ---
    CONVERTERS: {
        "minari": "amago_pipe.config.convert:MinariSourceConfig",
        "d4rl": "amago_pipe.config.convert:D4rlSourceConfig",
        "amago-buffer": "amago_pipe.config.convert:AmagoBufferSourceConfig",
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
    AGENTS: {"agent": "amago_pipe.config.agent:AgentConfig", "multitask": "amago_pipe.config.agent:MultiTaskConfig"},
    BC_FILTERS: {
        "exp": "amago_pipe.config.agent:ExpFilterConfig",
        "binary": "amago_pipe.config.agent:BinaryFilterConfig",
        "leaky": "amago_pipe.config.agent:LeakyFilterConfig",
    },
    # --- behaviour policies and exploration (envs/) ---
    POLICIES: {
        "random": "amago_pipe.config.policies:RandomPolicyConfig",
        "scripted": "amago_pipe.config.policies:ScriptedPolicyConfig",
        "cartpole-pd": "amago_pipe.config.policies:CartpolePdConfig",
        "pendulum-energy": "amago_pipe.config.policies:PendulumEnergyConfig",
        "tmaze-walker": "amago_pipe.config.policies:TmazeWalkerConfig",
        "key-door-explorer": "amago_pipe.config.policies:KeyDoorExplorerConfig",
        "alchemy-player": "amago_pipe.config.policies:AlchemyPlayerConfig",
        "reach-searcher": "amago_pipe.config.policies:ReachSearcherConfig",
        "babyai-bot": "amago_pipe.config.policies:BabyAIBotConfig",
        "checkpoint": "amago_pipe.config.policies:CheckpointPolicyConfig",
    },
    EXPLORATION: {
        "none": "amago_pipe.config.policies:NoExplorationConfig",
        "egreedy": "amago_pipe.config.policies:EpsilonGreedyConfig",
        "bilevel": "amago_pipe.config.policies:BilevelEpsilonGreedyConfig",
        "gaussian": "amago_pipe.config.policies:GaussianConfig",
    },
    # --- hindsight relabeling (relabel/) ---
    RELABELERS: {
        name: f"amago_pipe.config.relabel:{cls}"
        for name, cls in (
            ("final", "FinalConfig"),
            ("future", "FutureConfig"),
            ("episode", "EpisodeGoalsConfig"),
            ("random", "RandomGoalsConfig"),
            ("none", "NoRelabelConfig"),
            ("some", "SomeGoalsConfig"),
            ("all", "AllGoalsConfig"),
        )
    },
    GOAL_REWARDS: {
        "threshold": "amago_pipe.config.relabel:ThresholdRewardConfig",
        "env": "amago_pipe.config.relabel:EnvRewardConfig",
        "function": "amago_pipe.config.relabel:FunctionRewardConfig",
    },
}

for _registry, _entries in _BUILTIN.items():
    for _name, _target in _entries.items():
        _registry.register(_name, _target)
