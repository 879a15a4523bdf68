"""A full disk during a conversion (into a store, or a store or collection into a Minari dataset) or an online
train's append: one line naming the store and partition or the dataset (exit 3), no empty partition, store or
dataset left behind, the data already there untouched. Real CLI processes; a full disk is simulated with
RLIMIT_FSIZE (a write past the limit fails with EFBIG; SIGXFSZ ignored)."""

from __future__ import annotations

import re
import resource
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
from cli_support import cli_env

from amago_pipe.hashing import hash_tree
from amago_pipe.spec import ActionSpec, ArraySpec, DataSpec
from amago_pipe.store import TrajectoryStore
from amago_pipe.store.verify import verify_store
from amago_pipe.testing import synthetic as syn

HINT = "free some disk space (or raise the quota / file-size limit) and run again"
NOISY_ENV = '''
"""Observations of 1,024 random bytes (incompressible: the store's chunk files are about 1 MB)."""
import gymnasium as gym
import numpy as np


class NoisyEnv(gym.Env):
    def __init__(self):
        self.observation_space = gym.spaces.Box(0, 255, (1024,), np.uint8)
        self.action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self.np_random.integers(0, 256, 1024, dtype=np.uint8), {}

    def step(self, action):
        self.t += 1
        return self.np_random.integers(0, 256, 1024, dtype=np.uint8), 0.0, self.t >= 20, False, {}


def make():
    return NoisyEnv()
'''
ONLINE = """
version: 1
name: full
store: store.zarr
stages:
  train:
    type: train
    partitions: {fifo: 1.0}
    online: {env: {factory: "noisy_env:make", n_envs: 2}, timesteps_per_epoch: 1200}
    max_seq_len: 6
    batch_size: 4
    epochs: 2
    updates_per_epoch: 1
    warmup_steps: 1
    model:
      tstep_encoder: {type: ff, d_hidden: 16, d_output: 16}
      traj_encoder: {type: gru, d_model: 16, n_layers: 1}
    agent: {type: agent, actor: {d_hidden: 16}, critic: {d_hidden: 16, num_critics: 2}}
    logging: {plots: false}
"""
LIMIT = 400_000
"""Room for the run's small files and the policy file (about 100 kB), not for a store chunk (about 1 MB)."""


def _limit_file_size(limit: int) -> Callable[[], None]:
    def apply() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return apply


def cli(cwd: Path, *args: str, limit: int | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "amago_pipe.cli", *args], cwd=cwd,
        env={**cli_env(), "OMP_NUM_THREADS": "1", "MINARI_DATASETS_PATH": str(cwd / "minari")},
        capture_output=True, text=True, timeout=600, preexec_fn=_limit_file_size(limit) if limit else None,
    )  # fmt: skip


def one_error(proc: subprocess.CompletedProcess[str], *, stage: bool = False) -> str:
    """The one `error:` line (a failed stage's is also logged before it, as `ERROR: stage failed: ...`)."""
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 3 and "Traceback" not in proc.stderr, proc.stdout + proc.stderr
    assert [line for line in lines if not line.startswith("ERROR: stage failed: ")] == lines[-1:], proc.stderr
    assert len(lines) == 1 + stage, proc.stderr
    return lines[-1]


def _source(tmp_path: Path) -> Path:
    """A D4RL-layout file of 30 episodes of 200 steps (the store's chunks are far above the limit)."""
    rng = np.random.default_rng(0)
    return syn.write_d4rl_hdf5(tmp_path / "d.hdf5", [syn.continuous_episode(rng, 200, "timeout") for _ in range(30)])


def test_a_conversion_out_of_space_names_the_store_and_leaves_no_partition(tmp_path: Path) -> None:
    _source(tmp_path)
    assert cli(tmp_path, "convert", "d4rl", "d.hdf5", "--store", "s.zarr").returncode == 0
    before = hash_tree(tmp_path / "s.zarr")
    proc = cli(tmp_path, "convert", "d4rl", "d.hdf5", "--store", "s.zarr", "--partition", "extra", limit=20_000)
    assert one_error(proc) == (
        f"error: s.zarr (partition 'extra'): out of space while writing (file size limit reached); the store was "
        f"left as it was; {HINT}"
    )
    store = TrajectoryStore.open(tmp_path / "s.zarr")
    assert store.partitions() == ["protected"] and hash_tree(tmp_path / "s.zarr") == before
    assert verify_store(store).ok
    proc = cli(tmp_path, "convert", "d4rl", "d.hdf5", "--store", "new.zarr", limit=20_000)
    assert one_error(proc) == (
        f"error: new.zarr (partition 'protected'): out of space while writing (file size limit reached); the store "
        f"it created was removed; {HINT}"
    )
    assert not (tmp_path / "new.zarr").exists()
    assert cli(tmp_path, "convert", "d4rl", "d.hdf5", "--store", "s.zarr", "--partition", "extra").returncode == 0


def test_a_convert_stage_out_of_space_fails_naming_the_store(tmp_path: Path) -> None:
    _source(tmp_path)
    (tmp_path / "p.yaml").write_text(
        "version: 1\nname: conv\nstore: s.zarr\nstages:\n"
        "  data: {type: convert, source: {type: d4rl, path: d.hdf5}, partition: demos}\n"
    )
    proc = cli(tmp_path, "run", "p.yaml", limit=20_000)
    assert one_error(proc, stage=True) == (
        f"error: stage 'data' failed: s.zarr (partition 'demos'): out of space while writing (file size limit "
        f"reached); the store it created was removed; {HINT}"
    )
    assert not (tmp_path / "s.zarr").exists()


def test_an_online_append_out_of_space_names_the_store_and_leaves_no_partition(tmp_path: Path) -> None:
    (tmp_path / "noisy_env.py").write_text(NOISY_ENV)
    (tmp_path / "p.yaml").write_text(ONLINE)
    proc = cli(tmp_path, "run", "p.yaml", limit=LIMIT)
    store = TrajectoryStore.open(tmp_path / "store.zarr")
    assert one_error(proc, stage=True) == (
        f"error: stage 'train' failed: {store.url} (partition 'fifo'): out of space while writing (file size limit "
        f"reached); episodes sealed before stay; those not yet sealed were dropped; {HINT}"
    )
    assert (tmp_path / "runs/full/stages/train/policy/latest.safetensors").stat().st_size < LIMIT  # got that far
    assert store.partitions() == [] and verify_store(store).ok  # no empty fifo left behind


def test_minari_writes_out_of_space_name_the_dataset_and_leave_nothing(tmp_path: Path) -> None:
    """h5py crashes the process (SIGSEGV) when its write fails: the writer checks for room first."""
    _source(tmp_path)
    assert cli(tmp_path, "convert", "d4rl", "d.hdf5", "--store", "s.zarr").returncode == 0
    minari = tmp_path / "minari"
    for limit, args in [
        (20_000, ["store", "to-minari", "s.zarr", "--dataset-id", "test/x-v0"]),
        (300, ["store", "to-minari", "s.zarr", "--dataset-id", "test/x-v0"]),  # not even room for its metadata
        (20_000, ["collect", "CartPole-v1", "--episodes", "200", "--minari-id", "test/c-v0"]),
    ]:
        error = one_error(cli(tmp_path, *args, limit=limit))
        dataset = minari / args[-1]
        assert re.fullmatch(
            rf"error: {dataset}: out of space while writing \(file size limit reached\); nothing was written"
            rf"( \(it needs about [\d,]+ bytes more\))?; {re.escape(HINT)}",
            error,
        ), error
        assert not dataset.exists() and not list((minari / ".amago-pipe/staging").iterdir())
    assert cli(tmp_path, "store", "to-minari", "s.zarr", "--dataset-id", "test/x-v0").returncode == 0


WRITE_MANY_CHUNKS = """
import sys
import numpy as np
from amago_pipe.spec import ActionSpec, ArraySpec, DataSpec
from amago_pipe.store import TrajectoryStore
from amago_pipe.store.episode import Episode

store = TrajectoryStore.open(sys.argv[1])
T = 16_000  # 16 MB of incompressible observations: 16 chunks of about 1 MB written by one call, each over the limit
rng = np.random.default_rng(0)
episode = Episode(
    obs={"observation": rng.integers(0, 256, (T + 1, 1024), dtype=np.uint8)},
    actions=np.zeros(T, np.int64), rewards=np.zeros(T, np.float32),
    terminated=np.eye(1, T, T - 1, dtype=bool)[0], truncated=np.zeros(T, bool),
)
try:
    with store.writer("fifo", atomic=sys.argv[2] == "atomic") as writer:
        writer.add(episode)
except OSError as e:
    print("failed", e.errno)
"""


def test_a_write_of_many_chunks_that_fails_leaves_no_chunk_behind(tmp_path: Path) -> None:
    """zarr keeps writing a call's other chunks after one failed: the writer waits for them before it removes
    the segment (a chunk landing after the removal left a non-empty partition behind, seen once in 13 runs)."""
    spec = DataSpec({"observation": ArraySpec((1024,), "uint8")}, ActionSpec("discrete", (), n=2))
    for mode in ("atomic", "segments"):
        store = TrajectoryStore.create(tmp_path / f"{mode}.zarr", spec)
        proc = subprocess.run(
            [sys.executable, "-c", WRITE_MANY_CHUNKS, store.url, mode], capture_output=True, text=True, timeout=120,
            env={**cli_env(), "OMP_NUM_THREADS": "1"}, preexec_fn=_limit_file_size(LIMIT),
        )  # fmt: skip
        assert proc.stdout.strip() == "failed 27" and "Traceback" not in proc.stderr, proc.stdout + proc.stderr
        left = sorted(p.name for p in (Path(store.url) / "partitions").rglob("*") if p.is_file())
        assert left in ([], ["zarr.json"] * len(left)), left  # group metadata at most: no chunk, no segment
        assert verify_store(TrajectoryStore.open(store.url)).ok
