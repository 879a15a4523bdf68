"""EnvConfig: which gymnasium environment (or task set) to run and how many copies, wherever an env is configured.

Config only: no torch, no click, no gymnasium (the env is built by `amago_pipe.envs`).
"""

from __future__ import annotations

import math
from typing import Any, Literal

from amago_pipe.config.base import config
from amago_pipe.config.build import FieldError
from amago_pipe.config.transforms import WrapperConfig
from amago_pipe.tokens import TextSpec, resolve_vocabulary, vocabulary_problem


@config
class TextConfig:
    """Text observations (gymnasium `Text`, MiniGrid's `mission`) read as fixed-length word ids: each text is
    lowercased and split into words on whitespace and punctuation, each word looked up in `vocabulary` (id 0 pads,
    1 is a word outside it, counted and logged; 2.. the words in order); a text longer than `max_tokens` words is
    cut to them (logged)."""

    vocabulary: str | list[str]
    """`minigrid` (every word of the MiniGrid and BabyAI missions) or a list of words; stored with the data."""
    max_tokens: int = 32
    """Ids per text: shorter ones are padded with 0, longer ones cut (BabyAI's longest missions, GoToSeq and
    BossLevel, run to about 30 words)."""
    keys: list[str] | None = None
    """Flattened keys to read as text (e.g. `[mission]`); null: every text observation of the env."""

    def __post_init__(self) -> None:
        problem = vocabulary_problem(self.vocabulary)
        if problem:
            raise FieldError("vocabulary", problem)
        if self.max_tokens < 1:
            raise FieldError("max_tokens", f"must be at least 1, got {self.max_tokens}")
        if self.keys is not None and not self.keys:
            raise FieldError("keys", "give at least one text key (or null for every text observation)")

    def text_spec(self) -> TextSpec:
        """The TextSpec stored with the data: the resolved vocabulary and `max_tokens`."""
        return TextSpec(resolve_vocabulary(self.vocabulary), self.max_tokens)


@config
class TaskConfig:
    """One task of a task set: an env by registered id or factory, with kwargs, a name and a sampling weight."""

    id: str | None = None
    """Registered gymnasium id (give either `id` or `factory`)."""
    factory: str | None = None
    """`package.module:function` returning a gymnasium.Env when called with `kwargs`."""
    kwargs: dict[str, Any] | None = None
    """Keyword arguments for `gymnasium.make(id, ...)` or the factory."""
    name: str | None = None
    """The task's name in episodes, metrics and reports (default: the id or factory plus its kwargs)."""
    weight: float = 1.0
    """Relative share of env slots (`tasks_per: slot`) or of resets (`tasks_per: reset`); > 0."""

    def __post_init__(self) -> None:
        _one_source(self.id, self.factory)
        if not (self.weight > 0 and math.isfinite(self.weight)):
            raise FieldError("weight", f"must be > 0, got {self.weight}; drop the task instead of weighting it 0")

    @property
    def task_name(self) -> str:
        """`name`, else the id (or factory) with its kwargs, e.g. `Meta-World/ML1(task=3)`."""
        if self.name:
            return self.name
        base = self.id or self.factory or "task"
        args = ",".join(f"{k}={v}" for k, v in sorted((self.kwargs or {}).items()))
        return f"{base}({args})" if args else base


@config
class EnvConfig:
    """A gymnasium 1.x environment, by registered id (with kwargs), by a `module:factory` function, or a task set.

    A task set (`tasks: [...]`) runs one agent over many envs: each env slot keeps one task (`tasks_per: slot`)
    or draws a task at each reset (`tasks_per: reset`); every episode carries its task's name. Tasks whose
    observation vectors or discrete action counts differ are padded to one space (see `amago_pipe.envs.tasks`).
    """

    id: str | None = None
    """Registered gymnasium id such as `CartPole-v1` (give either `id` or `factory`)."""
    factory: str | None = None
    """`package.module:function` returning a gymnasium.Env when called with `kwargs` (instead of `id`)."""
    kwargs: dict[str, Any] | None = None
    """Keyword arguments passed to `gymnasium.make(id, ...)` or to the factory."""
    name: str | None = None
    """Name recorded with every episode and used to group results (default: the id or factory; a task set's
    episodes carry their task's name)."""
    tasks: list[TaskConfig] | None = None
    """A task set instead of `id`/`factory`: e.g. `[{id: popgym/RepeatFirstEasy-v0}, {id: popgym/CountRecallEasy-v0}]`."""
    tasks_per: Literal["slot", "reset"] = "slot"
    """Task sets: `slot` gives each parallel env a fixed task (slots shared out by weight); `reset` draws a task
    by weight at every reset of every env."""
    held_out: list[TaskConfig] | None = None
    """Tasks kept out of training (evaluate and validate only): run after the training tasks and reported
    separately; their names and configs must differ from every task in `tasks`."""
    n_envs: int = 8
    """Number of environments stepped in parallel."""
    mode: Literal["sync", "async", "already_vectorized"] = "sync"
    """`sync`: all envs in this process (best for cheap envs); `async`: one subprocess per env;
    `already_vectorized`: the env steps all `n_envs` as one batch itself — `id` through gymnasium's
    `make_vec(..., vectorization_mode="vector_entry_point")` (e.g. CartPole-v1's numpy batch env), or a `factory`
    called as `factory(num_envs=n_envs, **kwargs)` that returns a gymnasium VectorEnv (NEXT_STEP autoreset)."""
    max_episode_steps: int | None = None
    """Time limit per episode (truncation); null keeps the env's registered limit."""
    obs_keys: list[str] | None = None
    """Keep only these keys of a Dict observation, e.g. `[image, direction]` to drop MiniGrid's `mission` text
    (or keep it and read it with `text:`); null keeps them all."""
    text: TextConfig | None = None
    """Read text observations as word ids, e.g. `{vocabulary: minigrid, max_tokens: 32}`; null: an env with a text
    observation is refused (leave it out with `obs_keys`)."""
    wrappers: list[WrapperConfig] | None = None
    """Transforms applied in order to each env (each task of a task set), in every stage and in `play`, and recorded
    with the data, e.g. `[{type: atari}, {type: resize, size: [84, 84]}, {type: grayscale}, {type: frame_stack, k: 4}]`;
    what they return is what is stored and what the agent sees. With wrappers, `max_episode_steps` counts the
    agent's steps (after frame skipping)."""
    seed: int | None = None
    """Seed of the first reset (each env gets its own stream spawned from it); null derives it from the stage seed."""
    on_error: Literal["stop", "skip"] = "stop"
    """An env that raises in step/reset or returns a NaN/inf reward or observation: `stop` the run naming it, or
    `skip`: its episode ends there and is discarded (pieces already saved stay), the env restarts and the run
    goes on (up to 10 errors per env)."""

    def __post_init__(self) -> None:
        if self.tasks is not None:
            self._check_tasks()
        else:
            _one_source(self.id, self.factory)
            if self.held_out is not None:
                raise FieldError("held_out", "held-out tasks need a task set: give `tasks: [...]` for training")
        if self.n_envs < 1:
            raise FieldError("n_envs", f"must be at least 1, got {self.n_envs}")
        if self.mode == "already_vectorized" and self.on_error == "skip":
            raise FieldError(
                "on_error", "`skip` restarts one failing env; an already_vectorized env steps as one batch: use `stop`"
            )
        if self.wrappers and self.mode == "already_vectorized":
            raise FieldError(
                "wrappers",
                "wrappers wrap each env; an already_vectorized env steps its batch as one object: use mode sync or "
                "async (or apply the transforms inside your vector env)",
            )
        if self.obs_keys is not None and not self.obs_keys:
            raise FieldError("obs_keys", "give at least one observation key to keep (or null to keep all)")
        if self.max_episode_steps is not None and self.max_episode_steps < 1:
            raise FieldError("max_episode_steps", f"must be at least 1 (or null), got {self.max_episode_steps}")

    @property
    def env_name(self) -> str:
        """The name recorded with episodes (a task set's name): `name`, else the id, the factory path or the
        task names joined by `+`."""
        if self.tasks is not None and not self.name:
            return "+".join(t.task_name for t in self.tasks)
        return self.name or self.id or self.factory or "env"

    @property
    def task_names(self) -> tuple[str, ...]:
        """The env names its training episodes carry: each task's name, or `env_name` without a task set."""
        return (self.env_name,) if self.tasks is None else tuple(t.task_name for t in self.tasks)

    def _check_tasks(self) -> None:
        """Task-set rules: no top-level id/factory, at least one task, unique names, held-out tasks disjoint."""
        if self.id is not None or self.factory is not None:
            raise FieldError("tasks", "give either `tasks: [...]` or a single `id`/`factory`, not both")
        if not self.tasks:
            raise FieldError("tasks", "give at least one task, e.g. [{id: CartPole-v1}]")
        if self.mode == "already_vectorized":
            raise FieldError("mode", "a task set steps its tasks as separate envs: use mode sync or async")
        seen: dict[str, str] = {}
        for field_name, tasks in (("tasks", self.tasks), ("held_out", self.held_out or [])):
            if field_name == "held_out" and self.held_out is not None and not tasks:
                raise FieldError("held_out", "give at least one held-out task (or null)")
            for i, task in enumerate(tasks):
                name = task.task_name
                if name in seen:
                    raise FieldError(
                        f"{field_name}[{i}].name",
                        f"task name '{name}' is also {seen[name]}; every task (training and held-out) needs its "
                        "own `name`",
                    )
                seen[name] = f"{field_name}[{i}]"
        train = {_task_key(t): f"tasks[{i}]" for i, t in enumerate(self.tasks)}
        for i, task in enumerate(self.held_out or []):
            if _task_key(task) in train:
                raise FieldError(
                    f"held_out[{i}]",
                    f"held-out task '{task.task_name}' is the same env and kwargs as {train[_task_key(task)]}: a "
                    "held-out task must differ from every training task",
                )


def _one_source(env_id: str | None, factory: str | None) -> None:
    """FieldError unless exactly one of `id` and `factory` is given, the factory as `module:function`."""
    if (env_id is None) == (factory is None):
        found = "both" if env_id is not None else "neither"
        raise FieldError(
            "id", f"give exactly one of `id` (e.g. CartPole-v1) or `factory` (module:function); found {found}"
        )
    if factory is not None and ":" not in factory:
        raise FieldError("factory", f"'{factory}' is not an import path; expected 'package.module:function'")


def _task_key(task: TaskConfig) -> str:
    """What makes two tasks the same env: source and kwargs (not name or weight)."""
    return repr((task.id, task.factory, sorted((task.kwargs or {}).items(), key=lambda kv: kv[0])))
