"""`babyai-bot`: minigrid's BabyAI planning bot as a collect policy, for expert demonstrations of BabyAI levels.

The bot (`minigrid.utils.baby_ai_bot.BabyAIBot`) reads the level's grid, the agent's position and the parsed
instruction from the env object itself, so this player needs the env (`PolicyContext.env`, mode: sync) and makes
one bot per episode in each slot; every slot's task is checked when the policy is built, before anything is
collected (a task drawn at a later reset, when it starts). With `epsilon`, a random action replaces the bot's now and then and the bot
replans from where it lands (it is told the action taken), so the data show recoveries as well as straight runs.
A random action that opens a box can leave the bot lost (it raises): that slot then acts at random until its
episode ends.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from amago_pipe.actions import ActionCodec
from amago_pipe.config.policies import BabyAIBotConfig
from amago_pipe.envs.policies import PolicyContext
from amago_pipe.errors import ConfigError, DataError, import_optional

INSTALL_HINT = "pip install -e '.[envs]'"


class BabyAIBotPlayer:
    """One BabyAI bot per env slot, rebuilt at each episode start."""

    def __init__(self, ctx: PolicyContext, *, epsilon: float):
        if ctx.env is None:
            raise ConfigError(f"{ctx.where}: 'babyai-bot' reads the env's state; it can only collect (a collect stage)")
        bot = import_optional(
            "minigrid.utils.baby_ai_bot",
            needs=f"{ctx.where}: 'babyai-bot' needs",
            package="minigrid",
            install=INSTALL_HINT,
        )
        from minigrid.envs.babyai.core.roomgrid_level import RoomGridLevel

        self.bot_class, self.lost_error, self.level_class = bot.BabyAIBot, bot.DisappearedBoxError, RoomGridLevel
        self.env, self.where = ctx.env, ctx.where
        self.codec = ActionCodec(ctx.spec.action)
        self.rng = np.random.default_rng(ctx.seed)
        self.epsilon = epsilon
        self.n_actions = ctx.spec.action.n
        for i in range(ctx.n_envs):
            self._level(i)
        self.reset(ctx.n_envs)

    def reset(self, n_envs: int) -> None:
        self.bots: list[Any] = [None] * n_envs
        self.taken: list[int | None] = [None] * n_envs
        self.lost = np.zeros(n_envs, dtype=bool)
        """Slots whose bot gave up this episode (they act at random)."""

    def reset_envs(self, done_mask: np.ndarray) -> None:
        for i in np.flatnonzero(done_mask):
            self.bots[i], self.taken[i], self.lost[i] = None, None, False

    def act(self, obs: dict[str, np.ndarray], rl2: np.ndarray, time: np.ndarray) -> np.ndarray:
        n = rl2.shape[0]
        ending = self.env.awaiting_reset  # the step that resets these envs ignores their action
        actions = np.zeros(n, dtype=np.int64)
        for i in range(n):
            if ending[i]:
                continue
            if self.bots[i] is None:
                self.bots[i] = self._bot(i)
            action = self._plan(i)
            if self.lost[i] or self.rng.random() < self.epsilon:
                action = int(self.rng.integers(self.n_actions))
            actions[i] = self.taken[i] = action
        return self.codec.to_unit(actions)

    def _plan(self, i: int) -> int:
        if self.lost[i]:
            return 0
        try:
            return int(self.bots[i].replan(self.taken[i]))
        except self.lost_error:
            self.lost[i] = True
            return 0

    def _bot(self, i: int) -> Any:
        return self.bot_class(self._level(i))

    def _level(self, i: int) -> Any:
        """The BabyAI level slot `i` runs now; DataError naming the slot and its task when it is another env."""
        env = self.env.slot_env(i)
        if not isinstance(env, self.level_class):
            raise DataError(
                f"{self.where}: 'babyai-bot' plays BabyAI levels; slot {i} runs {type(env).__name__} "
                f"({self.env.task_name(i)}): use another policy for it"
            )
        return env


def babyai_bot_policy(config: BabyAIBotConfig, ctx: PolicyContext) -> BabyAIBotPlayer:
    """Policy factory for `policy: {type: babyai-bot}`."""
    if ctx.spec.action.kind != "discrete":
        raise DataError(f"{ctx.where}: 'babyai-bot' needs BabyAI's discrete actions; env '{ctx.env_name}' has others")
    return BabyAIBotPlayer(ctx, epsilon=config.epsilon)
