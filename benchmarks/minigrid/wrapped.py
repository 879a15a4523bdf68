"""MiniGrid as users often feed it (`env: {factory: "wrapped:make"}` with this folder on PYTHONPATH).

`make`: `OneHotPartialObsWrapper` turns the (7, 7, 3) id image into (7, 7, 20) uint8 0/1 channels. `make_rgb`:
`RGBImgPartialObsWrapper` renders the agent's view as (56, 56, 3) uint8 pixels. Both drop the `mission` text.
benchmarks/RESULTS_ARCHIVE.md ("MiniGrid-MemoryS7, a memory task nothing was tuned on (2026-11-26, 11th session)")
compares them with the in-network `one_hot` of the raw ids.
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


def make_rgb(env_id: str = "MiniGrid-MemoryS7-v0", tile_size: int = 8, **kwargs: Any) -> gym.Env:
    """`env_id` with the agent's view as RGB pixels (7 tiles of `tile_size` a side) and the `direction` key."""
    import minigrid  # noqa: F401  (registers the envs)
    from gymnasium.wrappers import FilterObservation
    from minigrid.wrappers import RGBImgPartialObsWrapper

    env = RGBImgPartialObsWrapper(gym.make(env_id, **kwargs), tile_size=tile_size)
    return FilterObservation(env, ["image", "direction"])
