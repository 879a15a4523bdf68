"""Built-in memory and meta-RL envs, registered as gymnasium ids `amago_pipe/...` when this package is imported.

Envs are imported lazily by gymnasium (string entry points). gymnasium + numpy only, no torch.
"""

from __future__ import annotations

import gymnasium as gym

from amago_pipe.envs.builtin.kshot import KShot, kshot
from amago_pipe.envs.namespaces import BUILTIN_NAMESPACE as NAMESPACE

BUILTIN_ENVS: dict[str, str] = {
    f"{NAMESPACE}/TMaze-v0": "amago_pipe.envs.builtin.tmaze:TMaze",
    f"{NAMESPACE}/DarkKeyDoor-v0": "amago_pipe.envs.builtin.key_door:make_dark_key_door",
    f"{NAMESPACE}/DelayedRecall-v0": "amago_pipe.envs.builtin.recall:DelayedRecall",
    f"{NAMESPACE}/GoalMaze-v0": "amago_pipe.envs.builtin.goal_maze:GoalMaze",
    f"{NAMESPACE}/SymbolicAlchemy-v0": "amago_pipe.envs.builtin.alchemy:make_symbolic_alchemy",
}
"""gymnasium id -> entry point. Each env ends its own episodes (no registered TimeLimit: limits depend on
kwargs); `max_episode_steps` in an EnvConfig still adds one."""


def register_builtin_envs() -> None:
    """Register every id of BUILTIN_ENVS with gymnasium; ids already registered are left alone."""
    for env_id, entry_point in BUILTIN_ENVS.items():
        if env_id not in gym.registry:
            gym.register(id=env_id, entry_point=entry_point)


register_builtin_envs()

__all__ = ["BUILTIN_ENVS", "NAMESPACE", "KShot", "kshot", "register_builtin_envs"]
