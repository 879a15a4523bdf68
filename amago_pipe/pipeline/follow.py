"""Decoupled actors: `amago-pipe collect --follow RUN_DIR` acts with a running online train stage's newest policy
and appends to its FIFO partition until the learner finishes.

The follower reads the stage's config from the run's lock file, builds the same envs and exploration, and
reloads `policy/latest.safetensors` into its agent whenever the learner writes a newer epoch (memory kept).
Each writer session is tagged with the follower, the followed run's id (its data is that run's: the learner's
ownership check counts it as its own, and its resume keeps it) and the policy version (epoch) that collected it,
so the learner can log how stale its data is. Several followers (on this machine or others sharing the store) may
run at once: the store takes concurrent writers. A follower ends with the stage: it returns when the stage finished
and raises StageFailed when it failed or its learner died (the lock file says running but its process is gone; a
learner on another host is seen dead only once its lock record changes).
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
from amago_pipe.errors import ConfigError, DataError, StageFailed
from amago_pipe.pipeline.lockfile import LockFile, StageRecord, effective_status, is_run_dir, tagged
from amago_pipe.store import TrajectoryStore
from amago_pipe.train.online import OnlineCollector
from amago_pipe.train.policy_loading import load_agent, policy_path, read_meta

log = logging.getLogger("amago_pipe.follow")

FOLLOW_CHUNK = 1000
"""Env timesteps per writer session of a follower when the stage's `timesteps_per_epoch` is 0."""


def followed_stage(run_dir: Path, stage: str | None) -> tuple[str, TrainStageConfig, str]:
    """The online train stage to follow in `run_dir`: its name, config and store path (ConfigError otherwise)."""
    if not run_dir.is_dir():
        raise ConfigError(
            f"--follow {run_dir}: no such run directory; give the run directory of a running `amago-pipe run` "
            "(default runs/<pipeline name>)"
        )
    if not is_run_dir(run_dir):
        raise ConfigError(
            f"--follow {run_dir}: not a run directory (no pipeline.lock.json); has `amago-pipe run` started?"
        )
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
    on_start: Callable[[], None] = lambda: None,
    on_chunk: Callable[[dict[str, Any]], None] | None = None,
    check_stop: Callable[[], None] = lambda: None,
) -> dict[str, Any]:
    """Collect with the followed stage's newest policy until that stage stops running; returns totals.
    `on_start` is called once the follower is about to collect.

    `already_finished` in the totals: the stage had finished before the follower started (nothing collected).
    StageFailed when the stage failed, was interrupted or its learner died (before or while following)."""
    name, cfg, lock_store = followed_stage(run_dir, stage)
    assert cfg.online is not None
    state, record = stage_state(run_dir, name)
    if state == "done":
        return {"stage": name, "chunks": 0, "env_steps": 0, "episodes": 0, "already_finished": True}
    if state in ENDED:
        raise StageFailed(f"--follow {run_dir}: {describe_end(name, state, record)}; nothing to follow")
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
    on_start()
    chunks, (state, record) = 0, stage_state(run_dir, name)
    try:
        while state == "running":
            check_stop()
            version = _reload(agent, policy_file, version)
            row = collector.collect(version, check_stop)
            chunks += 1
            if on_chunk is not None:
                on_chunk({"policy_version": version, **row})
            state, record = stage_state(run_dir, name)
    finally:
        collector.close()
    totals = {"stage": name, "chunks": chunks, "env_steps": collector.env_steps, "episodes": collector.episodes}
    if state != "done":
        raise StageFailed(
            f"--follow {run_dir}: {describe_end(name, state, record)}; the follower stopped after "
            f"{totals['env_steps']} env steps, {totals['episodes']} episodes"
        )
    return totals


ENDED = ("failed", "interrupted", "died", "gone")
"""States of a followed stage that end it without finishing (see `stage_state`)."""


def stage_state(run_dir: Path, stage: str) -> tuple[str, StageRecord | None]:
    """`(state, record)` of `stage` in `run_dir`'s lock file: running, done, failed, interrupted, never run, `died`
    (its record says running but its process on this host is gone: killed) or `gone` (its record was removed)."""
    record = LockFile.load(run_dir).stages.get(stage)
    if record is None:
        return "gone", None
    status = effective_status(record)
    return ("died" if status == "interrupted" and record.status == "running" else status), record


def describe_end(stage: str, state: str, record: StageRecord | None) -> str:
    """One clause saying why `stage` is not running, e.g. `stage 'train' failed: ...`."""
    if state == "died" and record is not None:
        return (
            f"stage '{stage}' died: its learner (pid {record.pid} on {record.host}) is gone while the lock file still "
            "says running (killed: SIGKILL, out of memory?); `amago-pipe run` resumes it"
        )
    if state == "failed" and record is not None:
        return f"stage '{stage}' failed: {(record.error or 'no error recorded').splitlines()[0]}"
    if state == "interrupted":
        return f"stage '{stage}' was interrupted; `amago-pipe run` resumes it"
    if state == "gone":
        return f"stage '{stage}' is no longer in the lock file (the run directory was reset?)"
    return f"stage '{stage}' is not running ({state})"


def _wait_for_policy(run_dir: Path, stage: str, poll_s: float, check_stop: Callable[[], None]) -> Path:
    """The stage's `policy/latest.safetensors`, once the learner has written it (its first epoch)."""
    while True:
        try:
            return policy_path(run_dir / "stages" / stage, "latest", where=f"--follow {run_dir}")
        except DataError:
            state, record = stage_state(run_dir, stage)
            if state in ENDED:
                raise StageFailed(
                    f"--follow {run_dir}: {describe_end(stage, state, record)}; nothing to follow"
                ) from None
            if state != "running":
                raise DataError(
                    f"--follow {run_dir}: stage '{stage}' is not running ({state}) and has no policy to act with; "
                    "start `amago-pipe run` first (followers join a running online train stage)"
                ) from None
        check_stop()
        time.sleep(poll_s)


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
