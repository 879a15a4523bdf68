"""Checks made before a run starts any stage: env ids against gymnasium's registry, env spaces against the data the
pipeline trains on, optional packages. Nothing here writes a file or creates a store.

`Preflight` is what each stage's `preflight()` uses: it builds each env at most once (one copy, in this process) and
reads the store's DataSpec. gymnasium is imported here; torch only by the flash-attn check.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, cast

from amago_pipe.config.base import to_dict
from amago_pipe.config.build import Problems, join
from amago_pipe.config.collect import CollectStageConfig
from amago_pipe.config.convert import ConvertStageConfig
from amago_pipe.config.envs import EnvConfig
from amago_pipe.config.pipeline import PipelineConfig
from amago_pipe.config.train import TrainStageConfig
from amago_pipe.envs.namespaces import BUILTIN_NAMESPACE, ENV_NAMESPACES, register_namespace
from amago_pipe.errors import AmagoPipeError, ConfigError, DataError, MissingDependencyError, did_you_mean
from amago_pipe.spec import DataSpec, describe_transforms, transforms_differ

OPTIONAL_NAMESPACES = tuple(f"{n}/" for n in ENV_NAMESPACES.names() if n != BUILTIN_NAMESPACE)
"""Env id namespaces registered by optional packages: `validate` leaves them (and `module:Id` ids) to `plan`."""
SAME_SPACES = "use an env with the data's observation and action spaces (the one the data came from), or other data"


def env_configs(node: Any, where: str) -> Iterator[tuple[str, EnvConfig]]:
    """Every EnvConfig inside a config (through dataclasses, lists and dicts), with its key path."""
    if isinstance(node, EnvConfig):
        yield where, node
    elif dataclasses.is_dataclass(node) and not isinstance(node, type):
        for f in dataclasses.fields(node):
            yield from env_configs(getattr(node, f.name), join(where, f.name))
    elif isinstance(node, list | tuple):
        for i, item in enumerate(node):
            yield from env_configs(item, join(where, i))
    elif isinstance(node, dict):
        for key, item in node.items():
            yield from env_configs(item, join(where, str(key)))


def env_ids(cfg: EnvConfig, where: str) -> list[tuple[str, str]]:
    """`(key path, id)` of every registered id an env config names (a task set's and held-out tasks' too)."""
    out = [(f"{where}.id", cfg.id)] if cfg.id else []
    for field in ("tasks", "held_out"):
        out += [(f"{where}.{field}.{i}.id", t.id) for i, t in enumerate(getattr(cfg, field) or []) if t.id]
    return out


def env_id_problem(env_id: str, *, imports: bool) -> str:
    """Why gymnasium cannot make `env_id` ('' when it can, or when telling needs a package import and not
    `imports`); the project's namespaces are registered first, as when an env is made."""
    import gymnasium as gym
    from gymnasium.envs.registration import find_highest_version, parse_env_id

    module, _, name = env_id.rpartition(":")
    if not imports and (module or name.startswith(OPTIONAL_NAMESPACES)):
        return ""
    if module:
        try:
            importlib.import_module(module)
        except ImportError as e:
            return f"cannot import '{module}', the module that registers '{name}' ({e}); install it or fix the id"
    register_namespace(name)  # MissingDependencyError (with the install) when its package is missing
    if name in gym.registry:
        return ""
    try:
        namespace, base, version = parse_env_id(name)
    except gym.error.Error as e:
        return f"'{env_id}' is not a gymnasium env id ({e}); expected e.g. CartPole-v1 or namespace/Name-v0"
    if version is None and find_highest_version(namespace, base) is not None:
        return ""  # gymnasium makes its latest version
    hint = did_you_mean(name, list(gym.registry))
    fix = (
        "import the package that registers it (`id: package.module:Name-v0`) or use `factory: package.module:function`"
    )
    return (
        f"unknown gymnasium env '{env_id}'{hint} Otherwise {fix}"
        if hint
        else f"unknown gymnasium env '{env_id}'; {fix}"
    )


def check_env_ids(cfg: PipelineConfig, problems: Problems) -> None:
    """Load-time check (`validate`): every env id the stages name is registered; ids of optional packages and
    `module:Id` ids are left to `plan` (telling needs their import)."""
    for name, stage in cfg.stages.items():
        for where, env in env_configs(stage, f"stages.{name}"):
            for path, env_id in env_ids(env, where):
                if problem := env_id_problem(env_id, imports=False):
                    problems.add(path, problem)


def probe_config(cfg: EnvConfig) -> EnvConfig:
    """`cfg` as made to read its spaces: one copy (a task set's slots, whose tasks are made lazily), in this process,
    whatever its seed and error handling."""
    n_envs = cfg.n_envs if cfg.tasks is not None and cfg.tasks_per == "slot" else 1
    mode = "sync" if cfg.mode == "async" else cfg.mode
    probe: EnvConfig = dataclasses.replace(cast(Any, cfg), n_envs=n_envs, mode=mode, seed=None, on_error="stop")
    return probe


def env_spec(cfg: EnvConfig, where: str, *, held_out: bool) -> DataSpec:
    """The DataSpec of the envs `cfg` makes, from `probe_config(cfg)` (a task set's tasks made once each;
    `held_out`: with its held-out tasks, as evaluation runs them)."""
    from amago_pipe.envs.vector import make_batched_env

    try:
        with make_batched_env(probe_config(cfg), where=where, held_out=held_out) as env:
            return env.spec
    except AmagoPipeError:
        raise
    except Exception as e:  # the env's own code failed: the stage would fail the same way
        raise ConfigError(
            f"{where}: making env '{cfg.env_name}' failed ({type(e).__name__}: {e}); fix the env or its kwargs "
            "(--debug shows the traceback)",
            path=where,
        ) from e


@dataclasses.dataclass(frozen=True)
class DataSource:
    """The data a pipeline trains on, as far as it is known before the run."""

    spec: DataSpec
    label: str
    """How messages name it, e.g. `the store at runs/x/store.zarr`."""
    where: str = ""
    """Key path of the env it is collected in ('' for an existing store)."""


class Preflight:
    """What the stages' `preflight()` share: each env's spec (made once) and the spec of the data."""

    def __init__(self, pipeline: PipelineConfig, order: list[str]):
        self.pipeline = pipeline
        self.order = order
        """Stage names in run order: the first that writes the store decides its spec."""
        self._specs: dict[str, DataSpec] = {}
        self._data: DataSource | None = None
        self._data_found = False
        self.errors: list[AmagoPipeError] = []
        """What `collecting()` caught: every problem is reported at once (`raise_all`)."""

    @contextmanager
    def collecting(self) -> Iterator[None]:
        """Record an AmagoPipeError raised inside instead of stopping at it."""
        try:
            yield
        except AmagoPipeError as e:
            self.errors.append(e)

    def check_ids(self, node: Any, where: str) -> None:
        """ConfigError listing every env id under config `node` that gymnasium cannot make (package imports done)."""
        problems = [
            f"{path}: {problem}"
            for at, env in env_configs(node, where)
            for path, env_id in env_ids(env, at)
            if (problem := env_id_problem(env_id, imports=True))
        ]
        if problems:
            raise ConfigError(problems[0], path=where, problems=problems)

    def env_spec(self, cfg: EnvConfig, where: str, *, held_out: bool) -> DataSpec:
        """`env_spec` of `cfg`, made once per distinct env config."""
        key = json.dumps([to_dict(probe_config(cfg)), held_out], sort_keys=True, default=str)
        if key not in self._specs:
            self.check_ids(cfg, where)
            self._specs[key] = env_spec(cfg, where, held_out=held_out)
        return self._specs[key]

    def data(self) -> DataSource | None:
        """The existing store's spec, else that of the env the first store-writing stage collects in; None when
        unknown (no store yet and a convert stage creates it, or the store cannot be read: its stage says why)."""
        if not self._data_found:
            self._data_found = True  # a failure is reported once, by the first check that asked
            self._data = self._find_data()
        return self._data

    def _find_data(self) -> DataSource | None:
        from amago_pipe.store import TrajectoryStore

        store = self.pipeline.store_path
        try:
            if store and TrajectoryStore.exists(store):
                return DataSource(TrajectoryStore.open(store).spec, f"the store at {store}")
        except AmagoPipeError:
            return None
        for name in self.order:
            stage = self.pipeline.stages[name]
            if isinstance(stage, ConvertStageConfig):
                return None  # its dataset decides the spec, read when it runs
            env, where = None, f"stages.{name}.env"
            if isinstance(stage, CollectStageConfig) and stage.output == "store":
                env = stage.env
            elif isinstance(stage, TrainStageConfig) and stage.online is not None:
                env, where = stage.online.env, f"stages.{name}.online.env"
            if env is not None:
                label = f"what stage '{name}' collects ({where}: '{env.env_name}')"
                return DataSource(self.env_spec(env, where, held_out=False), label, where)
        return None

    def match_data(self, cfg: EnvConfig, where: str, *, held_out: bool) -> None:
        """ConfigError when env `cfg` (at `where`) has other spaces than the data; only ids are checked when the
        data's spec is not known yet."""
        self.check_ids(cfg, where)
        data = self.data()
        if data is None or data.where == where:
            return
        spec = self.env_spec(cfg, where, held_out=held_out)
        if transforms_differ(data.spec.transforms, spec.transforms):
            raise ConfigError(
                f"{where}.wrappers: {describe_transforms(spec.transforms)}, but the training data ({data.label}) came "
                f"through {describe_transforms(data.spec.transforms)}; give this env the same `wrappers:` as the data's",
                path=f"{where}.wrappers",
            )
        try:
            data.spec.check_compatible(spec, what=f"env '{cfg.env_name}'", against="training data")
        except DataError as e:
            raise ConfigError(f"{where}: {e}; the training data is {data.label}; {SAME_SPACES}", path=where) from e


def require_flash_attn(where: str) -> None:
    """MissingDependencyError (with the install) when `attention: flash` cannot import flash-attn here."""
    from amago_pipe.nets.attention import FLASH_HINT, flash_attn_missing

    missing = flash_attn_missing()
    if missing:
        raise MissingDependencyError(
            f"{where}: 'flash' needs the flash-attn package, which cannot be imported here ({missing}); {FLASH_HINT}"
        )


def raise_all(errors: list[AmagoPipeError]) -> None:
    """Raise the preflight errors as one error listing every line: a ConfigError, or of the kind of the first other
    error (a missing package: its exit code wins)."""
    if not errors:
        return
    found = [line for e in errors for line in (e.problems if isinstance(e, ConfigError) else [str(e)])]
    lines = list(dict.fromkeys(found))  # an env several stages share is reported once
    other = next((e for e in errors if not isinstance(e, ConfigError)), None)
    if other is not None:
        raise type(other)("\n".join(lines)) from other
    first = errors[0]
    raise ConfigError(lines[0], path=getattr(first, "path", None), problems=lines) from first
