"""A behaviour policy plugin for MiniGrid-Memory (`policy: {type: "looker:Looker"}` with this folder on PYTHONPATH).

It turns around to look at the cue in the start room (with probability `p_look` per episode: 4 left turns, the
cue is in view after the second), walks the hallway, and turns to a random end: every episode that looks carries
the cue to a 50/50 choice, as `tmaze-walker` does for the T-Maze. Needs no memory of the task. Reads the
`image` key: raw ids (7, 7, 3), MiniGrid's one-hot form (7, 7, 20) or the RGB view (7 t, 7 t, 3) of tiles t pixels
a side.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from amago_pipe.actions import ActionCodec
from amago_pipe.config.base import config
from amago_pipe.config.build import FieldError
from amago_pipe.config.policies import PolicyConfig
from amago_pipe.envs.policies import PolicyContext

LEFT, RIGHT, FORWARD = 0, 1, 2
WALL = 2
"""MiniGrid's object id of a wall (channel 0 of a raw image; channel 2 of the one-hot image)."""
LOOK_STEPS = 4
"""Left turns that start a looking episode: the cue is in view after the second, the hallway ahead after the fourth."""


@config
class LookerConfig(PolicyConfig):
    """MiniGrid-Memory: look at the cue (per episode with probability `p_look`), walk on, pick an end at random."""

    impl: ClassVar[str] = "looker:Looker"
    type: str = "looker:Looker"
    """Registered name or `package.module:Class` of a plugin."""
    p_look: float = 0.8
    """Probability that an episode starts by turning around to see the cue."""

    def __post_init__(self) -> None:
        if not 0.0 <= self.p_look <= 1.0:
            raise FieldError("p_look", f"a probability must be in [0, 1], got {self.p_look:g}")


class Looker:
    """The RolloutPolicy of `LookerConfig`."""

    Config = LookerConfig

    def __init__(self, config: LookerConfig, ctx: PolicyContext) -> None:
        self.codec = ActionCodec(ctx.spec.action)
        self.rng = np.random.default_rng(ctx.seed)
        self.p_look = config.p_look
        self.look = np.zeros(0, dtype=bool)

    def reset(self, n_envs: int) -> None:
        self.look = self.rng.random(n_envs) < self.p_look

    def reset_envs(self, done_mask: np.ndarray) -> None:
        self.look[done_mask] = self.rng.random(int(done_mask.sum())) < self.p_look

    def act(self, obs: dict[str, np.ndarray], rl2: np.ndarray, time: np.ndarray) -> np.ndarray:
        step = np.asarray(time).reshape(len(rl2), -1)[:, -1]  # (N,) step within the episode
        turn = self.rng.choice((LEFT, RIGHT), size=len(step))
        actions = np.where(_wall_ahead(np.asarray(obs["image"])), turn, FORWARD)
        actions = np.where(self.look & (step < LOOK_STEPS), LEFT, actions)
        return self.codec.to_unit(actions.astype(np.int64))


def _wall_ahead(img: np.ndarray) -> np.ndarray:
    """(N,) whether the cell ahead of the agent is a wall: it sits at view cell (3, 6), facing (3, 5)."""
    if img.shape[1] > 7:  # RGB pixels (tiles of 2 or more), rows first: a wall is grey (100, highlighted 146),
        tile = img.shape[1] // 7  # the floor black or 76
        centre = img[:, 5 * tile + tile // 2, 3 * tile + tile // 2].astype(np.int64)
        return (centre[:, 0] == centre[:, 1]) & (centre[:, 1] == centre[:, 2]) & (centre[:, 0] > 90)
    return img[:, 3, 5, 0] == WALL if img.shape[-1] == 3 else img[:, 3, 5, WALL] > 0
