"""Config of the `collect` stage: roll out behaviour policies in an env into a store partition or a Minari dataset.

Config only: no torch, no click, no gymnasium; policies are `amago_pipe.config.policies` components.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar, Literal

from amago_pipe.config.base import config
from amago_pipe.config.build import FieldError
from amago_pipe.config.envs import EnvConfig
from amago_pipe.config.policies import PolicyConfig, policy_from_text
from amago_pipe.config.stages import StageConfig
from amago_pipe.errors import ConfigError

MINARI_ID = re.compile(r"^(?:[-\w][-\w/]*[-\w]+/)?[-\w]+-v\d+$")
"""What minari accepts as a dataset id (its namespace has 2+ characters), with the version suffix required."""


@config
class CollectPolicyConfig:
    """One behaviour policy of a collect stage and how many episodes it runs."""

    policy: PolicyConfig
    """`{type: random|scripted|cartpole-pd|pendulum-energy|tmaze-walker|key-door-explorer|alchemy-player|reach-searcher|babyai-bot|checkpoint|package.module:Factory, ..., exploration: {...}}`."""
    episodes: int
    """Number of episodes to collect with this policy (spread evenly over the parallel envs)."""

    @classmethod
    def old_form(cls, data: dict[str, Any]) -> str | None:
        """The fix for a pre-0.2 `policy: "name[:arg]"` / `noise:` entry."""
        policy, noise = data.get("policy"), data.get("noise")
        if not isinstance(policy, str) and noise is None:
            return None
        try:
            new = policy_from_text(policy) if isinstance(policy, str) else dict(policy or {})
        except ConfigError:
            new = {"type": "..."}
        if noise:
            new["exploration"] = (
                f"{{type: egreedy, epsilon: {noise}}} (discrete) or {{type: gaussian, std: {noise}}} (continuous)"
            )
        shown = ", ".join(f"{k}: {v}" for k, v in new.items())
        return (
            "the string form of `policy:` and the `noise:` key were replaced by typed components: write "
            f"`policy: {{{shown}}}` (see README, 'Behaviour policies and exploration')"
        )

    def __post_init__(self) -> None:
        if self.episodes < 1:
            raise FieldError("episodes", f"must be at least 1, got {self.episodes}")


@config
class CollectStageConfig(StageConfig):
    """Roll out one or more behaviour policies in parallel envs and save the episodes (a mixed dataset)."""

    impl: ClassVar[str] = "amago_pipe.pipeline.stages.collect:CollectStage"

    env: EnvConfig
    """The environment to collect in (id or factory, n_envs, sync/async mode, time limit)."""
    policies: list[CollectPolicyConfig]
    """Behaviour policies run one after another, e.g. half `random` and half `cartpole-pd` with epsilon-greedy."""
    output: Literal["store", "minari"] = "store"
    """`store`: append to a partition of the pipeline's store; `minari`: write a new local Minari dataset."""
    partition: str = "protected"
    """Store partition to write (output: store)."""
    dataset_id: str | None = None
    """Id of the local Minari dataset to create, e.g. `cartpole/mixed-v0` (output: minari)."""
    replace: bool = True
    """A re-run replaces what this stage wrote before (its store segments, or a Minari dataset made by amago-pipe collect)."""
    seed: int | None = None
    """Seed of env resets and policies; null derives it from the pipeline seed."""

    def __post_init__(self) -> None:
        if not self.policies:
            raise FieldError("policies", "give at least one policy, e.g. [{policy: {type: random}, episodes: 100}]")
        if self.output == "minari":
            if not self.dataset_id:
                raise FieldError("dataset_id", "output: minari needs a dataset_id such as 'cartpole/mixed-v0'")
            if not MINARI_ID.match(self.dataset_id):
                raise FieldError(
                    "dataset_id",
                    f"'{self.dataset_id}' is not a Minari id; expected 'namespace/name-v0' (a namespace of 2 or more "
                    "letters, digits, - or _; the version suffix required)",
                )
        elif self.dataset_id is not None:
            raise FieldError("dataset_id", "dataset_id is only used with output: minari (output is 'store')")

    @property
    def total_episodes(self) -> int:
        return sum(p.episodes for p in self.policies)
