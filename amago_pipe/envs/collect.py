"""Collect: roll out behaviour policies in parallel envs into a store partition or a new local Minari dataset.

`run_collect` is the library call behind the `collect` stage and the `amago-pipe collect` command; everything
is checked before anything is written, and a failure leaves nothing behind. No torch is imported here.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from amago_pipe.config.base import to_dict
from amago_pipe.config.collect import CollectPolicyConfig, CollectStageConfig
from amago_pipe.config.policies import CheckpointPolicyConfig, ScriptedPolicyConfig
from amago_pipe.config.stages import seed_from
from amago_pipe.converters.minari_writer import (
    check_dataset_target,
    dataset_fingerprint,
    dataset_lock,
    write_minari_dataset,
)
from amago_pipe.envs.policies import PolicyContext, make_policy
from amago_pipe.envs.protocol import RolloutPolicy
from amago_pipe.envs.rollout import rollout
from amago_pipe.envs.stats import EpisodeStats, summarize
from amago_pipe.envs.vector import make_batched_env
from amago_pipe.envs.wrapper import BatchedEnv
from amago_pipe.errors import ConfigError
from amago_pipe.hashing import source_hash
from amago_pipe.registry import import_path
from amago_pipe.spec import DataSpec
from amago_pipe.store import Episode, TrajectoryStore
from amago_pipe.store.leftovers import discard_if_unused
from amago_pipe.store.tools import written_by

REPORT_VERSION = 1
STAGE_ATTR = "collect_stage"
"""Segment attribute naming the pipeline/stage that wrote a segment (so a re-run can replace it)."""


def run_collect(
    cfg: CollectStageConfig,
    *,
    store_url: str | None,
    seed: int,
    tag: str = "cli",
    where: str = "collect",
    on_episode: Callable[[Episode, EpisodeStats], None] | None = None,
    check_stop: Callable[[], None] | None = None,
    upstream: Mapping[str, Path] | None = None,
) -> dict[str, Any]:
    """Collect every policy's episodes and write them; returns the JSON report.

    The output, the env and every policy are checked before anything is written; a failure leaves nothing
    behind (a store this call created is removed unless another writer put something in it meanwhile).
    """
    started = time.perf_counter()
    if cfg.output == "store" and store_url is None:
        raise ConfigError(f"{where}: output 'store' needs a store path", path=f"{where}.output")
    if cfg.output == "minari":
        check_dataset_target(dataset_id_of(cfg), replace=cfg.replace, where=f"{where}.dataset_id")
    env = make_batched_env(cfg.env, where=f"{where}.env")
    with env:
        policies = _make_policies(cfg, env, seed=seed, where=where, upstream=upstream or {})
        timesteps = 0

        def run(sink: Callable[[Episode], None]) -> list[dict[str, Any]]:
            def add(ep: Episode, st: EpisodeStats) -> None:
                nonlocal timesteps
                sink(ep)
                timesteps += ep.length
                if on_episode is not None:
                    on_episode(ep, st)

            return _run_policies(cfg, env, policies, seed=seed, on_episode=add, check_stop=check_stop)

        if store_url is not None and cfg.output == "store":
            output, per_policy = _collect_to_store(cfg, env.spec, store_url, run, tag=tag)
        else:
            output, per_policy = _collect_to_minari(cfg, env, run, where=where)
    all_stats = [s for p in per_policy for s in p.pop("_stats")]
    return {
        "format_version": REPORT_VERSION,
        "env": to_dict(cfg.env),
        "seed": seed,
        "output": output,
        "timesteps": timesteps,
        "seconds": round(time.perf_counter() - started, 3),
        "total": summarize(all_stats),
        "policies": per_policy,
    }


Collector = Callable[[Callable[[Episode], None]], list[dict[str, Any]]]
"""Runs every policy, handing each finished episode to the given sink; returns the per-policy summaries."""


def _make_policies(
    cfg: CollectStageConfig, env: BatchedEnv, *, seed: int, where: str, upstream: Mapping[str, Path]
) -> list[RolloutPolicy]:
    """Build every configured policy (checking it against the env) before anything is written."""
    policies = []
    for i, p in enumerate(cfg.policies):
        pctx = PolicyContext(
            spec=env.spec, n_envs=env.n_envs, seed=seed + 7_919 * (i + 1), env_name=env.env_name,
            upstream=dict(upstream), where=f"{where}.policies.{i}.policy", env=env,
        )  # fmt: skip
        policies.append(make_policy(p.policy, pctx))
    return policies


def _run_policies(
    cfg: CollectStageConfig,
    env: BatchedEnv,
    policies: list[RolloutPolicy],
    *,
    seed: int,
    on_episode: Callable[[Episode, EpisodeStats], None],
    check_stop: Callable[[], None] | None,
) -> list[dict[str, Any]]:
    """Roll out each built policy in turn; episodes go to `on_episode` as they finish."""
    results = []
    base_env_seed = seed_from(cfg.env.seed, seed)
    for i, (p, policy) in enumerate(zip(cfg.policies, policies, strict=True)):
        result = rollout(
            env,
            policy,
            p.episodes,
            seed=base_env_seed + 100_003 * i,
            source=policy_source(p),
            meta={"policy": p.policy.to_dict()},
            keep_episodes=False,
            on_episode=on_episode,
            check_stop=check_stop,
        )
        results.append(
            {"policy": p.policy.label(), "config": p.policy.to_dict(), **result.summary(), "_stats": result.stats}
        )
    return results


def _collect_to_store(
    cfg: CollectStageConfig, spec: DataSpec, store_url: str, run: Collector, *, tag: str
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Write all episodes in one atomic writer; then drop the segments this stage wrote on an earlier run."""
    existed = TrajectoryStore.exists(store_url)
    store = TrajectoryStore.create(store_url, spec, exist_ok=True)
    try:
        old = []
        if cfg.replace and cfg.partition in store.partitions():
            old = [s.id for s in store.segments(cfg.partition) if s.attrs.get(STAGE_ATTR) == tag]
        attrs = {STAGE_ATTR: tag, "source": f"collect:{cfg.env.env_name}"}
        with store.writer(cfg.partition, atomic=True, attrs=attrs) as writer:
            per_policy = run(writer.add)
        if old:
            store.drop_segments(cfg.partition, old)
    except BaseException:
        if not existed:
            discard_if_unused(store.files)
        raise
    output = {
        "kind": "store",
        "store": str(store_url),
        "partition": cfg.partition,
        "replaced_segments": len(old),
        "fingerprint": written_fingerprint(store, cfg.partition, tag),
    }
    return output, per_policy


def written_fingerprint(store: TrajectoryStore, partition: str, tag: str) -> str:
    """Hash of the sealed segments the collect `tag` wrote in `partition` ('missing' when none)."""
    return written_by(store, partition, STAGE_ATTR, tag)


def _collect_to_minari(
    cfg: CollectStageConfig, env: BatchedEnv, run: Collector, *, where: str
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Collect under the dataset id's lock, then write the dataset all at once."""
    dataset_id = dataset_id_of(cfg)
    with dataset_lock(dataset_id, where=f"{where}.dataset_id"):
        check_dataset_target(dataset_id, replace=cfg.replace, where=f"{where}.dataset_id")  # made meanwhile?
        episodes: list[Episode] = []
        per_policy = run(episodes.append)
        mix = ", ".join(f"{p.episodes} x {policy_source(p)}" for p in cfg.policies)
        path = write_minari_dataset(
            dataset_id,
            episodes,
            observation_space=env.single_observation_space,
            action_space=env.single_action_space,
            env_spec=_registered_spec(cfg),
            description=f"amago-pipe collect in {cfg.env.env_name}: {mix}",
        )
    output = {"kind": "minari", "dataset_id": dataset_id, "path": str(path), "fingerprint": dataset_fingerprint(path)}
    return output, per_policy


def dataset_id_of(cfg: CollectStageConfig) -> str:
    """The Minari dataset id of an `output: minari` collect (ConfigError when missing)."""
    if not cfg.dataset_id:
        raise ConfigError("collect: output 'minari' needs a dataset_id such as 'cartpole/mixed-v0'", path="dataset_id")
    return cfg.dataset_id


def _registered_spec(cfg: CollectStageConfig) -> Any:
    """gymnasium EnvSpec (with kwargs and time limit) so Minari can recover the env; None for factories."""
    if cfg.env.id is None:
        return None
    import gymnasium as gym

    kwargs = dict(cfg.env.kwargs or {})
    if cfg.env.max_episode_steps is not None:
        kwargs["max_episode_steps"] = cfg.env.max_episode_steps
    env = gym.make(cfg.env.id, **kwargs)
    try:
        return env.spec
    finally:
        env.close()


def policy_source(p: CollectPolicyConfig) -> str:
    """Episode `source` label, e.g. `collect:cartpole-pd` or `collect:random+egreedy`."""
    return f"collect:{p.policy.label()}"


def policy_code_hashes(cfg: CollectStageConfig, *, where: str) -> dict[str, str]:
    """sha256 of the source file of each scripted controller, plugin factory or policy file, so editing one
    re-runs the stage; builtins have none."""
    out = {}
    for i, p in enumerate(cfg.policies):
        policy = p.policy
        if isinstance(policy, CheckpointPolicyConfig):
            continue  # a stage's weights are an upstream output, already fingerprinted
        target = policy.function if isinstance(policy, ScriptedPolicyConfig) else policy.type
        if ":" not in target:
            continue
        obj = import_path(target, what="policy", where=f"{where}.policies.{i}.policy")
        digest = source_hash(obj)
        if digest is not None:
            out[f"policy:{target}"] = digest
    return out
