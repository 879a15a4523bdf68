"""Task sets: many gymnasium envs behind one env slot, with one observation and action space for all of them.

A `TaskSet` is built once from an EnvConfig's `tasks` (and `held_out` for evaluation): it makes each task's env
once to read its spaces and unifies them as AMAGO-2 does for multi-domain training — observation vectors of
different lengths are zero-padded to the longest, discrete action sets become the largest one with an action
mask in the observation (`amago_pipe.spec.ACTION_MASK_KEY`: the agent, random and exploring policies choose among
the task's own actions; an id a task lacks that still arrives is taken modulo its count) — or raises a ConfigError naming the two tasks whose spaces cannot be
joined. `TaskSetEnv` is what each slot of the vector env runs: a fixed task (`tasks_per: slot`) or one drawn by
weight at every reset (`tasks_per: reset`); `info[TASK_INFO]` reports the task index at every step.
gymnasium + numpy only, no torch.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import gymnasium as gym
import numpy as np

from amago_pipe.config.envs import EnvConfig, TaskConfig
from amago_pipe.envs.factory import EnvFactory
from amago_pipe.errors import ConfigError
from amago_pipe.spec import ACTION_MASK_KEY, DEFAULT_OBS_KEY

TASK_INFO = "amago_pipe/task"
"""`info` key holding the index of the task an env slot is running (in `TaskSet.names`)."""


@dataclass(frozen=True)
class TaskSet:
    """The tasks one vector env runs: their factories, names, weights and the unified spaces (picklable)."""

    factories: tuple[EnvFactory, ...]
    names: tuple[str, ...]
    weights: tuple[float, ...]
    held_out: frozenset[str]
    """Names of the held-out tasks among `names` (evaluation only)."""
    observation_space: gym.Space[Any]
    action_space: gym.Space[Any]
    notes: tuple[str, ...]
    """How the spaces were unified, one line per change (for reports)."""
    action_counts: tuple[int, ...] | None = None
    """Each task's own number of discrete actions, when they differ (the observation then carries the mask)."""

    @classmethod
    def from_config(cls, cfg: EnvConfig, *, where: str, held_out: bool) -> TaskSet:
        """The task set of `cfg` (its held-out tasks appended when `held_out`); ConfigError on spaces that differ
        beyond padding."""
        tasks = list(cfg.tasks or []) + (list(cfg.held_out or []) if held_out else [])
        factories = []
        for i, task in enumerate(tasks):
            field = f"tasks[{i}]" if i < len(cfg.tasks or []) else f"held_out[{i - len(cfg.tasks or [])}]"
            factories.append(_task_factory(cfg, task, where=f"{where}.{field}"))
        names = tuple(t.task_name for t in tasks)
        spaces = []
        for factory in factories:
            env = factory()
            spaces.append((env.observation_space, env.action_space))
            env.close()
        obs_space, obs_notes = unify_observations(names, [s[0] for s in spaces], where=where)
        act_space, act_notes = unify_actions(names, [s[1] for s in spaces], where=where)
        counts = None
        if act_notes:  # Discrete sets of different sizes: each task's valid ids ride in the observation
            counts = tuple(int(s[1].n) for s in spaces)  # type: ignore[attr-defined]
            obs_space = with_action_mask(obs_space, int(act_space.n), where=where)  # type: ignore[attr-defined]
        return cls(
            factories=tuple(factories),
            names=names,
            weights=tuple(t.weight for t in tasks),
            held_out=frozenset(t.task_name for t in (cfg.held_out or []) if held_out),
            observation_space=obs_space,
            action_space=act_space,
            notes=tuple(obs_notes + act_notes),
            action_counts=counts,
        )

    def slot_tasks(self, n_envs: int, *, where: str) -> list[int]:
        """`tasks_per: slot`: the task of each of `n_envs` slots, shared out by weight (every task at least one)."""
        k = len(self.names)
        if n_envs < k:
            raise ConfigError(
                f"{where}.n_envs: {n_envs} env slots cannot each hold one of {k} tasks with `tasks_per: slot`; set "
                f"n_envs >= {k}, or `tasks_per: reset` to draw a task at each reset",
                path=f"{where}.n_envs",
            )
        share = np.asarray(self.weights) / sum(self.weights) * (n_envs - k)  # slots beyond the one each task gets
        counts = 1 + np.floor(share).astype(int)
        for i in np.argsort(-(share - np.floor(share)), kind="stable")[: n_envs - int(counts.sum())]:
            counts[i] += 1
        return [i for i, c in enumerate(counts) for _ in range(int(c))]


def _task_factory(cfg: EnvConfig, task: TaskConfig, *, where: str) -> EnvFactory:
    """The EnvFactory of one task, with the set's time limit, observation keys and error handling."""
    return replace(
        EnvFactory.from_config(cfg, where=where), id=task.id, factory=task.factory, kwargs=dict(task.kwargs or {})
    )


class TaskSetEnv(gym.Env):  # type: ignore[type-arg]
    """One env slot of a task set: runs a fixed task, or draws one by weight at every reset; padded spaces."""

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(self, tasks: TaskSet, *, fixed: int | None):
        self.tasks, self.fixed = tasks, fixed
        self.observation_space = tasks.observation_space
        self.action_space = tasks.action_space
        self.envs: dict[int, gym.Env] = {}  # type: ignore[type-arg]
        self.task = fixed if fixed is not None else 0
        self._rng = np.random.default_rng()
        self._seeds: np.random.SeedSequence | None = None
        self._seeded: set[int] = set()
        """Tasks whose env has been reset with its seed since the last seeded reset."""
        self._p = np.asarray(tasks.weights, dtype=np.float64) / sum(tasks.weights)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        """Reset (a newly drawn task when not fixed); each task's env is seeded on its first reset after `seed`."""
        sub_seed = None
        if seed is not None:
            self._seeds = np.random.SeedSequence(seed)
            self._rng = np.random.default_rng(self._seeds.spawn(1)[0])
            self._seeded.clear()
        if self.fixed is None:
            self.task = int(self._rng.choice(len(self._p), p=self._p))
        if self._seeds is not None and self.task not in self._seeded:
            sub_seed = int(np.random.SeedSequence([seed_entropy(self._seeds), self.task]).generate_state(1)[0])
            self._seeded.add(self.task)
        obs, info = self._env().reset(seed=sub_seed, options=options)
        return self._observation(obs), {**info, TASK_INFO: self.task}

    def step(self, action: Any) -> tuple[Any, Any, bool, bool, dict[str, Any]]:
        env = self._env()
        obs, reward, terminated, truncated, info = env.step(task_action(action, env.action_space))
        return (
            self._observation(obs),
            reward,
            terminated,
            truncated,
            {**info, TASK_INFO: self.task},
        )

    def close(self) -> None:
        for env in self.envs.values():
            env.close()
        self.envs.clear()

    def _observation(self, obs: Any) -> Any:
        """The task's observation in the set's space: padded, with the task's action mask when actions differ."""
        counts = self.tasks.action_counts
        if counts is None:
            return pad_observation(obs, self.observation_space)
        space: gym.spaces.Dict = self.observation_space  # type: ignore[assignment]
        mask = np.zeros(int(space[ACTION_MASK_KEY].shape[0]), np.float32)  # type: ignore[index]
        mask[: counts[self.task]] = 1.0
        base = obs if isinstance(obs, dict) else {DEFAULT_OBS_KEY: obs}
        inner = gym.spaces.Dict({k: v for k, v in space.spaces.items() if k != ACTION_MASK_KEY})
        return {**pad_observation(base, inner), ACTION_MASK_KEY: mask}

    @property
    def current(self) -> gym.Env:  # type: ignore[type-arg]
        """The env of the task this slot runs now."""
        return self._env()

    def _env(self) -> gym.Env:  # type: ignore[type-arg]
        if self.task not in self.envs:
            self.envs[self.task] = self.tasks.factories[self.task]()
        return self.envs[self.task]


def seed_entropy(seeds: np.random.SeedSequence) -> int:
    """The integer entropy of a SeedSequence made from an int seed."""
    return int(seeds.entropy)  # type: ignore[arg-type]


def unify_observations(
    names: tuple[str, ...], spaces: list[gym.Space[Any]], *, where: str
) -> tuple[gym.Space[Any], list[str]]:
    """One observation space for all tasks: equal spaces as they are; 1-D Box vectors (also per Dict key) padded
    with zeros to the longest."""
    first = spaces[0]
    if all(s == first for s in spaces):
        return first, []
    if isinstance(first, gym.spaces.Dict):
        keys = list(first.spaces)
        for name, space in zip(names, spaces, strict=True):
            if not isinstance(space, gym.spaces.Dict) or list(space.spaces) != keys:
                raise _mismatch(where, "observation", names[0], first, name, space)
        joined, notes = {}, []
        for key in keys:
            joined[key], key_notes = unify_observations(names, [s[key] for s in spaces], where=where)  # type: ignore[index]
            notes += [f"observation['{key}']: {n}" for n in key_notes]
        return gym.spaces.Dict(joined), notes
    for name, space in zip(names, spaces, strict=True):
        if not (isinstance(space, gym.spaces.Box) and len(space.shape) == 1 and isinstance(first, gym.spaces.Box)) or (
            space.dtype != first.dtype
        ):
            raise _mismatch(where, "observation", names[0], first, name, space)
    size = max(s.shape[0] for s in spaces)  # type: ignore[index]
    low = np.full(size, np.inf)
    high = np.full(size, -np.inf)
    for space in spaces:
        n = space.shape[0]  # type: ignore[index]
        low[:n] = np.minimum(low[:n], space.low)  # type: ignore[attr-defined]
        high[:n] = np.maximum(high[:n], space.high)  # type: ignore[attr-defined]
        low[n:], high[n:] = np.minimum(low[n:], 0), np.maximum(high[n:], 0)  # where this task is padded
    short = [f"{n} ({s.shape[0]})" for n, s in zip(names, spaces, strict=True) if s.shape[0] < size]  # type: ignore[index]
    box = gym.spaces.Box(low.astype(first.dtype), high.astype(first.dtype), dtype=first.dtype)  # type: ignore[arg-type]
    return box, [f"zero-padded to {size} features: {', '.join(short)}"]


def unify_actions(
    names: tuple[str, ...], spaces: list[gym.Space[Any]], *, where: str
) -> tuple[gym.Space[Any], list[str]]:
    """One action space for all tasks: equal spaces as they are; Discrete sets of different sizes joined into
    the largest (`with_action_mask` then marks each task's own ids in the observation)."""
    first = spaces[0]
    if all(s == first for s in spaces):
        return first, []
    for name, space in zip(names, spaces, strict=True):
        if not isinstance(space, gym.spaces.Discrete) or space.start != 0 or not isinstance(first, gym.spaces.Discrete):
            raise _mismatch(where, "action", names[0], first, name, space)
    size = max(int(s.n) for s in spaces)  # type: ignore[attr-defined]
    small = [f"{n} ({int(s.n)})" for n, s in zip(names, spaces, strict=True) if int(s.n) < size]  # type: ignore[attr-defined]
    return gym.spaces.Discrete(size), [
        f"actions joined into Discrete({size}); a task's missing actions are masked (observation "
        f"'{ACTION_MASK_KEY}') for {', '.join(small)}"
    ]


def with_action_mask(space: gym.Space[Any], n: int, *, where: str) -> gym.spaces.Dict:
    """`space` as a Dict (a plain space under `DEFAULT_OBS_KEY`) with a 0/1 action mask of `n` entries added."""
    keys = dict(space.spaces) if isinstance(space, gym.spaces.Dict) else {DEFAULT_OBS_KEY: space}
    if ACTION_MASK_KEY in keys:
        raise ConfigError(
            f"{where}.tasks: the tasks' observations already have a key '{ACTION_MASK_KEY}', where a task set with "
            "action sets of different sizes puts its action mask; rename that key in the tasks' envs, or give "
            "every task the same action space",
            path=f"{where}.tasks",
        )
    return gym.spaces.Dict({**keys, ACTION_MASK_KEY: gym.spaces.Box(0.0, 1.0, (n,), np.float32)})


def pad_observation(obs: Any, space: gym.Space[Any]) -> Any:
    """`obs` zero-padded to the unified `space` (Box vectors and Dicts of them; anything else unchanged)."""
    if isinstance(space, gym.spaces.Dict):
        return {k: pad_observation(obs[k], s) for k, s in space.spaces.items()}
    if isinstance(space, gym.spaces.Box) and len(space.shape) == 1:
        obs = np.asarray(obs, dtype=space.dtype)
        if obs.shape[0] < space.shape[0]:
            return np.concatenate([obs, np.zeros(space.shape[0] - obs.shape[0], dtype=space.dtype)])
    return obs


def task_action(action: Any, space: gym.Space[Any]) -> Any:
    """An action of the unified space in the task's own `space` (Discrete: modulo its count, for ids of policies
    that ignore the action mask)."""
    if isinstance(space, gym.spaces.Discrete):
        return int(action) % int(space.n)
    return action


def _mismatch(
    where: str, what: str, first: str, first_space: gym.Space[Any], name: str, space: gym.Space[Any]
) -> ConfigError:
    return ConfigError(
        f"{where}.tasks: tasks '{first}' and '{name}' have {what} spaces that cannot be joined ({first_space} vs "
        f"{space}); a task set pads 1-D Box observations and joins Discrete actions of different sizes, nothing "
        "else: run such tasks in separate stages, or wrap them to a common space",
        path=f"{where}.tasks",
    )
