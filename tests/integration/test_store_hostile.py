"""Hostile uses of a store through the CLI, with real processes and signals: conversions racing into one
store, writers killed mid-segment, damaged chunks under `amago-pipe run`, and paths that are not stores.

Races are made deterministic by pausing a process (SIGSTOP) at the moment that matters.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import h5py
import numpy as np
import pytest
from cli_support import cli_env

from amago_pipe.store import TrajectoryStore
from amago_pipe.store.verify import verify_store
from amago_pipe.testing import synthetic as syn
from amago_pipe.testing.episodes import example_specs, random_episode

BOX = example_specs()["box"]
N_LARGE = 6000
"""Episodes (of 20 steps) in a source whose conversion runs long enough to be paused mid-write."""


def _d4rl(path: Path, episodes: int, *, seed: int, nan_in_last: bool = False) -> Path:
    rng = np.random.default_rng(seed)
    syn.write_d4rl_hdf5(path, [syn.continuous_episode(rng, 20, "timeout") for _ in range(episodes)])
    if nan_in_last:
        with h5py.File(path, "a") as f:
            f["rewards"][-3] = np.nan
    return path


SPAWNED: list[subprocess.Popen[str]] = []


@pytest.fixture(autouse=True)
def _no_process_left_behind() -> Iterator[None]:
    """A failing test must not leave a paused (SIGSTOP) CLI process behind."""
    yield
    while SPAWNED:
        proc = SPAWNED.pop()
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def _spawn(cwd: Path, *args: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "amago_pipe.cli", *args],
        cwd=cwd,
        env=cli_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    SPAWNED.append(proc)
    return proc


def _finish(proc: subprocess.Popen[str], timeout: float = 120) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=timeout)
    return proc.returncode, out, err


def _wait_for(what: str, condition: Callable[[], bool], proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 60
    while not condition():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise AssertionError(f"never saw {what}: {proc.communicate()}")
        time.sleep(0.005)


def _unsealed(store: Path, partition: str = "protected") -> set[str]:
    part = store / "partitions" / partition
    sealed = {p.stem for p in part.glob("sealed/*.json")}
    return {p.name for p in part.glob("segments/*") if p.is_dir() and p.name not in sealed}


def _writer_recorded(store: Path, partition: str = "protected") -> bool:
    """Some unsealed segment's metadata already names its writer (host, pid): a kill now leaves a provable leftover."""
    for sid in _unsealed(store, partition):
        try:
            meta = json.loads((store / "partitions" / partition / "segments" / sid / "zarr.json").read_text())
        except (OSError, ValueError):
            continue
        if (meta.get("attributes") or {}).get("writer"):
            return True
    return False


def _convert(cwd: Path, source: Path, *extra: str) -> subprocess.Popen[str]:
    return _spawn(cwd, "convert", "d4rl", str(source), "--store", "s.zarr", "--json", *extra)


def _pause_once_writing(proc: subprocess.Popen[str], store: Path, already: set[str]) -> None:
    _wait_for("a segment being written", lambda: bool(_unsealed(store) - already), proc)
    os.kill(proc.pid, signal.SIGSTOP)


def test_a_failing_conversion_keeps_what_a_concurrent_one_wrote(tmp_path: Path) -> None:
    bad = _d4rl(tmp_path / "bad.hdf5", N_LARGE, seed=0, nan_in_last=True)
    good = _d4rl(tmp_path / "good.hdf5", N_LARGE, seed=1)
    small = _d4rl(tmp_path / "small.hdf5", 30, seed=2)
    store = tmp_path / "s.zarr"
    failing = _convert(tmp_path, bad)  # creates the store
    _pause_once_writing(failing, store, set())
    writing = _convert(tmp_path, good)  # opens it and is mid-write when the other fails
    _pause_once_writing(writing, store, _unsealed(store))
    code, _, _ = _finish(_convert(tmp_path, small))  # seals a segment while both are paused
    assert code == 0
    os.kill(failing.pid, signal.SIGCONT)
    code, out, err = _finish(failing)
    assert code == 3 and "non-finite value" in err and "Traceback" not in err
    os.kill(writing.pid, signal.SIGCONT)
    code, out, err = _finish(writing)
    assert code == 0, err
    assert json.loads(out)["status"] == "converted"
    opened = TrajectoryStore.open(store)
    assert sorted(s.episodes for s in opened.segments("protected")) == [30, N_LARGE]
    report = verify_store(opened)
    assert report.ok and report.findings == []


def test_concurrent_conversions_of_one_source_store_it_once(tmp_path: Path) -> None:
    source = _d4rl(tmp_path / "d.hdf5", N_LARGE, seed=0)
    store = tmp_path / "s.zarr"
    first = _convert(tmp_path, source)
    _pause_once_writing(first, store, set())
    code, out, err = _finish(_convert(tmp_path, source))  # sees nothing sealed yet: converts too
    assert code == 0 and json.loads(out)["status"] == "converted", err
    os.kill(first.pid, signal.SIGCONT)
    code, out, err = _finish(first)
    assert code == 0, err
    opened = TrajectoryStore.open(store)
    assert opened.partition_info("protected").episodes == N_LARGE and len(opened.segments("protected")) == 1
    code, out, _ = _finish(_convert(tmp_path, source))
    assert code == 0 and json.loads(out)["status"] == "skipped"
    assert TrajectoryStore.open(store).partition_info("protected").episodes == N_LARGE


def test_a_killed_writers_leftovers_are_shown_then_reclaimed_by_the_next_write(tmp_path: Path) -> None:
    source = _d4rl(tmp_path / "d.hdf5", N_LARGE, seed=0)
    store = tmp_path / "s.zarr"
    victim = _convert(tmp_path, source)
    # killed before its metadata names the writer, a segment is `unknown` (not provably dead) and is kept: wait
    _wait_for("a segment being written, with its writer recorded", lambda: _writer_recorded(store), victim)
    os.kill(victim.pid, signal.SIGKILL)
    victim.wait()
    (leftover,) = _unsealed(store)
    code, out, err = _finish(_spawn(tmp_path, "store", "inspect", "s.zarr"))
    assert code == 0, err
    assert f"abandoned   protected/{leftover}: unsealed; writer pid {victim.pid}" in out
    code, _, err = _finish(_convert(tmp_path, _d4rl(tmp_path / "e.hdf5", 5, seed=3)))
    assert code == 0, err
    assert _unsealed(store) == set()
    assert verify_store(TrajectoryStore.open(store)).findings == []


def test_a_missing_chunk_is_an_error_for_inspect_and_copy(tmp_path: Path) -> None:
    store = TrajectoryStore.create(tmp_path / "s.zarr", BOX)
    with store.writer("protected") as w:
        w.add(random_episode(BOX, 20, np.random.default_rng(0)))
    (sid,) = [s.id for s in store.segments("protected")]
    (tmp_path / "s.zarr" / "partitions" / "protected" / "segments" / sid / "actions" / "c.0.0").unlink()
    for args in (("store", "inspect", "s.zarr"), ("store", "copy", "s.zarr", "c.zarr")):
        code, _, err = _finish(_spawn(tmp_path, *args))
        assert code == 3 and err.count("\n") == 1 and "Traceback" not in err, err
        assert f"segment protected/{sid} is damaged: array 'actions' has 0 of 1 chunks" in err or args[1] == "inspect"
        assert f"protected/{sid}" in err and "amago-pipe store verify" in err and "s.zarr --quarantine`" in err


TRAIN = """\
version: 1
name: flip
store: {store}
stages:
  train:
    type: train
    needs: []
    max_seq_len: 8
    batch_size: 4
    epochs: 1
    updates_per_epoch: 2
    model:
      tstep_encoder: {{type: ff, d_hidden: 16, d_output: 16}}
      traj_encoder: {{type: ff, d_model: 16}}
    agent: {{type: agent, actor: {{d_hidden: 16}}, critic: {{d_hidden: 16, num_critics: 2}}}}
    logging: {{plots: false}}
"""


def test_a_flipped_bit_under_run_is_one_line(tmp_path: Path) -> None:
    from unit.data.learning_data import make_store

    store = make_store(tmp_path / "store.zarr", "discrete", episodes=12)
    (sid,) = [s.id for s in store.segments("protected")]
    chunk = next((tmp_path / "store.zarr" / "partitions" / "protected" / "segments" / sid / "rewards").glob("c.*"))
    data = bytearray(chunk.read_bytes())
    data[len(data) // 2] ^= 0x01
    chunk.write_bytes(bytes(data))
    (tmp_path / "p.yaml").write_text(TRAIN.format(store="store.zarr"))
    code, out, err = _finish(_spawn(tmp_path, "run", "p.yaml"), timeout=300)
    assert code == 3, out + err
    assert "Traceback" not in err and f"segment protected/{sid} is damaged: array 'rewards'" in err
    assert "--quarantine" in err


def test_a_store_path_that_is_a_file(tmp_path: Path) -> None:
    source = _d4rl(tmp_path / "d.hdf5", 3, seed=0)
    (tmp_path / "notes.txt").write_text("mine")
    code, _, err = _finish(_spawn(tmp_path, "convert", "d4rl", str(source), "--store", "notes.txt"))
    assert code == 3 and err.count("\n") == 1 and "is a regular file, not a trajectory store" in err
    (tmp_path / "p.yaml").write_text(
        "version: 1\nname: f\nstore: notes.txt\nstages:\n"
        f"  data: {{type: convert, source: {{type: d4rl, path: {source}}}, partition: protected}}\n"
    )
    code, out, err = _finish(_spawn(tmp_path, "run", "p.yaml"))
    assert code == 3 and "is a regular file, not a trajectory store" in err and "Traceback" not in out + err
    assert (tmp_path / "notes.txt").read_text() == "mine"


def test_byte_string_observations_write_nothing(tmp_path: Path) -> None:
    with h5py.File(tmp_path / "b.hdf5", "w") as f:
        f["observations"] = np.array([[b"a"]] * 20, dtype="S1")
        f["actions"] = np.zeros((20, 2), np.float32)
        f["rewards"] = np.zeros(20, np.float32)
        f["terminals"] = np.arange(20) % 10 == 9
    code, _, err = _finish(_spawn(tmp_path, "convert", "d4rl", "b.hdf5", "--store", "s.zarr"))
    assert code == 3 and err.count("\n") == 1 and "observations: dtype |S1 (byte strings) cannot be stored" in err
    assert not (tmp_path / "s.zarr").exists()
