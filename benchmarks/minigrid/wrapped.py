"""MiniGrid with its own one-hot image (`env: {factory: "wrapped:make"}` with this folder on PYTHONPATH).

`OneHotPartialObsWrapper` turns the (7, 7, 3) id image into (7, 7, 20) uint8 0/1 channels; the `mission` text is
dropped. The way users often feed MiniGrid; benchmarks/RESULTS.md ("MiniGrid-MemoryS7", the input normalisation's
eps) compares it with the in-network `one_hot`.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym


def make(env_id: str = "MiniGrid-MemoryS7-v0", **kwargs: Any) -> gym.Env:
    """`env_id` with a one-hot image and the `image` and `direction` keys only."""
    import minigrid  # noqa: F401  (registers the envs)
    from gymnasium.wrappers import FilterObservation
    from minigrid.wrappers import OneHotPartialObsWrapper

    return FilterObservation(OneHotPartialObsWrapper(gym.make(env_id, **kwargs)), ["image", "direction"])
