"""Export a train stage of a run directory: the policy file, episodes to verify with, scores and provenance.

Shared by the `export` stage and `amago-pipe export RUN_DIR`. What a run holds is read from its lock file
(stage configs, hashes) and stage folders (policy files, evaluation reports).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from amago_pipe.config.build import Problems, build
from amago_pipe.config.stages import StageConfig
from amago_pipe.config.train import TrainStageConfig
from amago_pipe.errors import ConfigError, DataError, StoreFormatError
from amago_pipe.export.artifact import check_replaceable
from amago_pipe.export.build import export_policy
from amago_pipe.pipeline.lockfile import LockFile
from amago_pipe.store import Episode, TrajectoryStore
from amago_pipe.train.policy_loading import Which, policy_path

CANDIDATES = 200
"""Episodes read from the store to pick the longest verification episodes from."""


def train_stages(run_dir: Path) -> dict[str, tuple[TrainStageConfig, str]]:
    """Train stages recorded in a run's lock file: name -> (config, store path)."""
    lock = LockFile.load(run_dir)
    out = {}
    for name, record in lock.stages.items():
        problems = Problems()
        cfg = build(StageConfig, record.config.get("stage", {}), problems, name)
        if isinstance(cfg, TrainStageConfig):
            out[name] = (cfg, str(record.config.get("store") or ""))
    return out


def pick_train_stage(run_dir: Path, stage: str | None) -> str:
    """`stage`, or the one train stage of the run (ConfigError listing them otherwise)."""
    if not (run_dir / "pipeline.lock.json").is_file():
        raise ConfigError(f"{run_dir}: not a run directory (no pipeline.lock.json); run a pipeline first")
    names = sorted(train_stages(run_dir))
    if stage is None:
        if len(names) != 1:
            raise ConfigError(
                f"{run_dir}: {len(names)} train stages ({', '.join(names) or 'none'}); name one with --stage"
            )
        return names[0]
    if stage not in names:
        raise ConfigError(
            f"--stage {stage}: not a train stage of {run_dir} (train stages: {', '.join(names) or 'none'})"
        )
    return stage


def verification_episodes(store_url: str, partitions: list[str], n: int) -> list[Episode]:
    """The `n` longest whole episodes among the first few hundred of `partitions` (DataError when none)."""
    try:
        store = TrajectoryStore.open(store_url)
    except StoreFormatError as e:
        raise DataError(f"export: cannot read episodes to verify with from {store_url} ({e})") from e
    found: list[Episode] = []
    for partition in partitions:
        if partition not in store.partitions():
            continue
        for ep in store.iter_episodes(partition):
            if ep.time_start == 0:
                found.append(ep)
            if len(found) >= CANDIDATES:
                break
    if not found:
        raise DataError(
            f"export: the store {store_url} holds no whole episode in {', '.join(partitions)} to verify with"
        )
    return sorted(found, key=lambda ep: -ep.length)[:n]


def trained_tasks(store_url: str, partitions: list[str]) -> list[str]:
    """The env (task) names of the episodes in the trained partitions, from the seal markers ([] when unknown)."""
    store = TrajectoryStore.open(store_url)
    names = {
        name
        for p in partitions
        if p in store.partitions()
        for marker in store.files.markers(p)
        for name in (marker.env_names or ())
    }
    return sorted(n for n in names if n)


def evaluation_of(run_dir: Path, train_stage: str, which: Which) -> dict[str, Any] | None:
    """The summary of the newest evaluate stage of the run that scored this train stage's `which` policy, with
    whether it acted greedily and the env config it ran (what `play` uses by default)."""
    best: tuple[float, dict[str, Any]] | None = None
    for report_file in (run_dir / "stages").glob("*/report.json"):
        try:
            report = json.loads(report_file.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        policy = report.get("policy") if isinstance(report, dict) else None
        if not isinstance(policy, dict) or policy.get("train_stage") != train_stage or policy.get("which") != which:
            continue
        stage = report_file.parent.name
        summary = {
            "stage": stage,
            "env": report.get("env"),
            "greedy": report.get("greedy"),
            "env_config": _stage_env(run_dir, stage),
            **(report.get("summary") or {}),
        }
        mtime = report_file.stat().st_mtime
        if best is None or mtime > best[0]:
            best = (mtime, summary)
    return None if best is None else best[1]


def _stage_env(run_dir: Path, stage: str) -> dict[str, Any] | None:
    """The `env` block of stage `stage` as recorded in the run's lock file (None when absent)."""
    record = LockFile.load(run_dir).stages.get(stage)
    env = (record.config.get("stage") or {}).get("env") if record is not None else None
    return env if isinstance(env, dict) else None


def check_out_location(out: Path, run_dir: Path | None, store_url: str, *, where: str) -> None:
    """ConfigError when `out` is, contains or lies inside the run directory or the (local) store: an export there
    could delete checkpoints, the lock file or episodes."""
    target = Path(out).expanduser().resolve()
    store_path = store_url.removeprefix("file://")
    local_store = store_path if store_path and "://" not in store_path else None  # remote stores: nothing to check
    for label, place in (("the run directory", run_dir), ("the store", local_store)):
        if place is None:
            continue
        other = Path(place).expanduser().resolve()
        relation = (
            "is" if target == other else "lies inside" if target.is_relative_to(other)
            else "contains" if other.is_relative_to(target) else None
        )  # fmt: skip
        if relation:
            raise ConfigError(
                f"{where} {out}: {relation} {label} {place}; "
                "choose an empty or new folder outside the run directory and the store",
                path=where,
            )


def export_run(
    run_dir: Path,
    out: Path,
    *,
    stage: str | None = None,
    which: Which = "latest",
    forms: list[str],
    tolerance: float = 1e-3,
    episodes: int = 4,
    steps: int | None = None,
    store_url: str | None = None,
    progress: Callable[[str], None] = lambda message: None,
    where: str = "--out",
    stage_folder: bool = False,
) -> dict[str, Any]:
    """Export the `which` policy of a train stage of `run_dir` to `out`; returns the manifest.

    `out` may not be, contain or lie inside the run directory or the store, except with `stage_folder` (the
    `export` stage's own folder, inside the run); ConfigError naming `where` otherwise."""
    run_dir = Path(run_dir)
    stage = pick_train_stage(run_dir, stage)
    cfg, store = train_stages(run_dir)[stage]
    store = store_url or store
    if not store:
        raise ConfigError(f"{run_dir}: stage '{stage}' names no store to read verification episodes from; pass --store")
    check_out_location(out, None if stage_folder else run_dir, store, where=where)
    check_replaceable(Path(out), where=where)
    policy_file = policy_path(run_dir / "stages" / stage, which, where="--checkpoint")
    record = LockFile.load(run_dir).stages[stage]
    partitions = [p for p, w in cfg.partitions.items() if w > 0]
    progress("reading episodes to verify with")
    chosen = verification_episodes(store, partitions, episodes)
    source = {
        "pipeline": run_dir.name,
        "run": str(run_dir),
        "train_stage": stage,
        "checkpoint": which,
        "partitions": dict(cfg.partitions),
        "env": chosen[0].env_name or None,
        "tasks": trained_tasks(store, partitions),
        "train_config_hash": record.config_hash,
        "train_output_hash": record.output_hash,
    }
    return export_policy(
        policy_file, out, episodes=chosen, forms=forms, tolerance=tolerance, steps=steps, source=source,
        evaluation=evaluation_of(run_dir, stage, which), progress=progress, where=where,
    )  # fmt: skip
