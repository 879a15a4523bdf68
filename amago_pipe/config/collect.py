"""Config of the `collect` stage: roll out behaviour policies in an env into a store partition or a Minari dataset.

Config only: no torch, no click, no gymnasium; policy names are checked against the POLICIES registry lazily.
"""

from __future__ import annotations

import re
from typing import ClassVar, Literal

from amago_pipe.config.base import config
from amago_pipe.config.build import FieldError
from amago_pipe.config.envs import EnvConfig
from amago_pipe.config.registries import POLICIES
from amago_pipe.config.stages import StageConfig
from amago_pipe.errors import did_you_mean

MINARI_ID = re.compile(r"^[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)*-v\d+$")


def parse_policy(policy: str) -> tuple[str, str | None]:
    """Split `name[:arg]`: `'scripted:pkg.mod:fn'` -> `('scripted', 'pkg.mod:fn')`, `'random'` -> `('random', None)`.

    A plugin factory path (`pkg.mod:factory`, a dot before the first ':') is returned whole as the name.
    """
    name, sep, arg = policy.partition(":")
    if sep and "." in name:
        return policy, None
    return name, (arg if sep else None)


def policy_problem(policy: str) -> str | None:
    """Why `policy` cannot name a behaviour policy, or None when it can (imports nothing)."""
    name, arg = parse_policy(policy)
    if ":" in name:
        return None  # plugin factory path, imported when the stage runs
    if name not in POLICIES:
        known = ", ".join(POLICIES.names())
        return (
            f"unknown policy '{name}' (known: {known}, or package.module:factory){did_you_mean(name, POLICIES.names())}"
        )
    if name == "scripted" and (not arg or ":" not in arg):
        return f"'scripted' needs a controller path, e.g. 'scripted:my_pkg.controllers:balance'; got '{policy}'"
    return None


@config
class CollectPolicyConfig:
    """One behaviour policy of a collect stage and how many episodes it runs."""

    policy: str
    """`random`, a builtin controller (`cartpole-pd`, `pendulum-energy`), `scripted:package.module:function`, `checkpoint:TRAIN_STAGE[:latest|best|EPOCH]` (a stage in `needs`), or a registered policy `name[:arg]`."""
    episodes: int
    """Number of episodes to collect with this policy (spread evenly over the parallel envs)."""
    noise: float = 0.0
    """Exploration noise: epsilon of uniform-random actions (discrete kinds) or Gaussian std in [-1, 1] units (continuous)."""

    def __post_init__(self) -> None:
        problem = policy_problem(self.policy)
        if problem:
            raise FieldError("policy", problem)
        if self.episodes < 1:
            raise FieldError("episodes", f"must be at least 1, got {self.episodes}")
        if self.noise < 0.0:
            raise FieldError("noise", f"must be >= 0, got {self.noise}")


@config
class CollectStageConfig(StageConfig):
    """Roll out one or more behaviour policies in parallel envs and save the episodes (a mixed dataset)."""

    impl: ClassVar[str] = "amago_pipe.pipeline.stages.collect:CollectStage"

    env: EnvConfig
    """The environment to collect in (id or factory, n_envs, sync/async mode, time limit)."""
    policies: list[CollectPolicyConfig]
    """Behaviour policies run one after another, e.g. half `random` and half `cartpole-pd` with noise."""
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
            raise FieldError("policies", "give at least one policy, e.g. [{policy: random, episodes: 100}]")
        if self.output == "minari":
            if not self.dataset_id:
                raise FieldError("dataset_id", "output: minari needs a dataset_id such as 'cartpole/mixed-v0'")
            if not MINARI_ID.match(self.dataset_id):
                raise FieldError(
                    "dataset_id",
                    f"'{self.dataset_id}' is not a Minari id; expected 'namespace/name-v0' (version suffix required)",
                )
        elif self.dataset_id is not None:
            raise FieldError("dataset_id", "dataset_id is only used with output: minari (output is 'store')")

    @property
    def total_episodes(self) -> int:
        return sum(p.episodes for p in self.policies)
