"""The reliability battery's kit: content audit, leftovers, signalled CLI processes (real store, real processes)."""

from __future__ import annotations

import os
import signal
from collections import Counter
from pathlib import Path

import numpy as np

from amago_pipe.store import TrajectoryStore
from amago_pipe.testing.episodes import example_specs, random_episode
from amago_pipe.testing.reliability import (
    PID_MODULO,
    CliProcess,
    audit_episodes,
    cli_env,
    episode_key,
    leftovers,
    run_all,
)

BOX = example_specs()["box"]


def test_audit_counts_lost_duplicate_and_unknown_episodes(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    e1, e2, e3, stranger = (random_episode(BOX, 5 + i, rng) for i in range(4))
    store = TrajectoryStore.create(tmp_path / "s.zarr", BOX)
    with store.writer("protected") as w:
        for ep in (e1, e2, e2, stranger):
            w.add(ep)
    audit = audit_episodes(tmp_path / "s.zarr", "protected", Counter(episode_key(e) for e in (e1, e2, e3)))
    assert (audit.expected, audit.found, audit.lost, audit.duplicates, audit.unexpected) == (3, 4, 1, 1, 1)
    without_truth = audit_episodes(tmp_path / "s.zarr", "protected", None)
    assert (without_truth.found, without_truth.duplicates) == (4, 1)


def test_leftovers_are_temporary_files_and_unsealed_segments_with_their_writer(tmp_path: Path) -> None:
    store = TrajectoryStore.create(tmp_path / "s.zarr", BOX)
    writer = store.writer("protected", atomic=True)
    writer.add(random_episode(BOX, 5, np.random.default_rng(0)))
    (tmp_path / "s.zarr" / ".tmp-abc-zarr.json").write_bytes(b"{")
    try:
        found = leftovers(tmp_path, [tmp_path / "s.zarr"])
    finally:
        writer.abort()
    assert [x.path for x in found if x.pid is None] == ["s.zarr/.tmp-abc-zarr.json"]
    assert [x.pid for x in found if x.pid is not None] == [os.getpid() % PID_MODULO]
    assert leftovers(tmp_path, [tmp_path / "s.zarr"])[0].path == "s.zarr/.tmp-abc-zarr.json"


def test_a_signalled_process_is_no_failure_and_a_failing_one_names_its_error(tmp_path: Path) -> None:
    env = cli_env()
    args = ["collect", "CartPole-v1", "--episodes", "1000000", "--n-envs", "1", "--store", "s.zarr"]
    victim = CliProcess(args, cwd=tmp_path, env=env, log_dir=tmp_path / "logs", label="victim")
    assert victim.kill_at(0.5, signal.SIGKILL)
    assert victim.proc.returncode == -signal.SIGKILL and victim.failure() is None
    failing = CliProcess(["store", "verify", "missing.zarr"], cwd=tmp_path, env=env, log_dir=tmp_path, label="f")
    (problem,) = run_all([failing])
    assert problem.startswith("f: exit 3: error: ") and "missing.zarr" in problem, problem
    assert not failing.kill_at(0.0, signal.SIGKILL)  # already gone: nothing sent
