"""Decoupled actors: `amago-pipe collect --follow RUN_DIR` acts with a running online train stage's newest policy
and appends to its FIFO partition until the learner finishes.

The follower reads the stage's config from the run's lock file, builds the same envs and exploration, and
reloads `policy/latest.safetensors` into its agent whenever the learner writes a newer epoch (memory kept).
Each writer session is tagged with the follower, the followed run's id (its data is that run's: the learner's
ownership check counts it as its own, and its resume keeps it) and the policy version (epoch) that collected it,
so the learner can log how stale its data is. Several followers (on this machine or others sharing the store) may
run at once: the store takes concurrent writers.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from amago_pipe.config.build import Problems, build
from amago_pipe.config.stages import StageConfig
from amago_pipe.config.train import TrainStageConfig
from amago_pipe.errors import ConfigError, DataError
from amago_pipe.pipeline.lockfile import LockFile, effective_status, tagged
from amago_pipe.store import TrajectoryStore
from amago_pipe.train.online import OnlineCollector
from amago_pipe.train.policy_loading import load_agent, policy_path, read_meta

log = logging.getLogger("amago_pipe.follow")

FOLLOW_CHUNK = 1000
"""Env timesteps per writer session of a follower when the stage's `timesteps_per_epoch` is 0."""


def followed_stage(run_dir: Path, stage: str | None) -> tuple[str, TrainStageConfig, str]:
    """The online train stage to follow in `run_dir`: its name, config and store path (ConfigError otherwise)."""
    lock = LockFile.load(run_dir)
    online = {}
    for name, record in lock.stages.items():
        problems = Problems()
        cfg = build(StageConfig, record.config.get("stage", {}), problems, name)
        if isinstance(cfg, TrainStageConfig) and cfg.online is not None:
            online[name] = (cfg, str(record.config.get("store") or ""))
    if stage is None:
        if len(online) != 1:
            raise ConfigError(
                f"--follow {run_dir}: expected one online train stage in its lock file, found "
                f"{', '.join(online) or 'none'}; name it with --stage"
                + ("" if online else " (is it a run directory of a pipeline with a train stage with `online:`?)")
            )
        stage = next(iter(online))
    if stage not in online:
        raise ConfigError(
            f"--stage {stage}: not an online train stage of {run_dir} (online stages: {', '.join(online) or 'none'})"
        )
    cfg, store = online[stage]
    if not store:
        raise ConfigError(f"--follow {run_dir}: its lock file names no store for stage '{stage}'; pass --store")
    return stage, cfg, store


def follow(
    run_dir: Path,
    *,
    stage: str | None = None,
    store_url: str | None = None,
    n_envs: int | None = None,
    seed: int = 0,
    poll_s: float = 2.0,
    on_chunk: Callable[[dict[str, Any]], None] | None = None,
    check_stop: Callable[[], None] = lambda: None,
) -> dict[str, Any]:
    """Collect with the followed stage's newest policy until that stage stops running; returns totals."""
    name, cfg, lock_store = followed_stage(run_dir, stage)
    assert cfg.online is not None
    online: Any = cfg.online
    if n_envs is not None:
        online = replace(online, env=replace(online.env, n_envs=n_envs))
    if online.timesteps_per_epoch == 0:  # the learner does not act: the follower's chunk size is its own
        online = replace(online, timesteps_per_epoch=FOLLOW_CHUNK)
    policy_file = _wait_for_policy(run_dir, name, poll_s, check_stop)
    agent, meta = load_agent(policy_file)
    version = int(meta.get("epoch", 0))
    store = TrajectoryStore.open(store_url or lock_store)
    tag = tagged(f"follower:{socket.gethostname()}:{os.getpid()}", LockFile.load(run_dir).run_id)
    collector = OnlineCollector(online, agent, store, seed=seed, tag=tag, where=f"--follow {run_dir}", device="cpu")
    chunks = 0
    try:
        while _running(run_dir, name):
            check_stop()
            version = _reload(agent, policy_file, version)
            row = collector.collect(version, check_stop)
            chunks += 1
            if on_chunk is not None:
                on_chunk({"policy_version": version, **row})
    finally:
        collector.close()
    return {"stage": name, "chunks": chunks, "env_steps": collector.env_steps, "episodes": collector.episodes}


def _wait_for_policy(run_dir: Path, stage: str, poll_s: float, check_stop: Callable[[], None]) -> Path:
    """The stage's `policy/latest.safetensors`, once the learner has written it (its first epoch)."""
    while True:
        try:
            return policy_path(run_dir / "stages" / stage, "latest", where=f"--follow {run_dir}")
        except DataError:
            if not _running(run_dir, stage):
                raise DataError(
                    f"--follow {run_dir}: stage '{stage}' is not running and has no policy to act with; start "
                    "`amago-pipe run` first (followers join a running online train stage)"
                ) from None
        check_stop()
        time.sleep(poll_s)


def _running(run_dir: Path, stage: str) -> bool:
    record = LockFile.load(run_dir).stages.get(stage)
    return record is not None and effective_status(record) == "running"


def _reload(agent: Any, policy_file: Path, version: int) -> int:
    """Load the learner's newest policy weights into `agent` in place (memory kept) when its epoch advanced."""
    try:
        epoch = int(read_meta(policy_file).get("epoch", version))
    except DataError:
        return version  # being replaced right now: keep acting with the current weights
    if epoch <= version:
        return version
    from amago_pipe.train import checkpoint as ckpt

    agent.load_state_dict(ckpt.load_weights(policy_file), strict=False)
    log.info("follower: policy version %d", epoch)
    return epoch
