"""Two writer processes and one sampling process on one store at once; SIGKILLed writers leave a valid store.

Worker processes run this file as a script (`python test_store_concurrency.py writer|sampler|killme ...`).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from amago_pipe.store import TrajectoryStore
from amago_pipe.store.verify import verify_store
from amago_pipe.testing.episodes import counting_episode, example_specs

BOX = example_specs()["box"]
HERE = Path(__file__)


# ---------------------------------------------------------------- workers (run in subprocesses)


def check_episode_is_whole(rewards: np.ndarray, obs: np.ndarray) -> None:
    """Counting episodes: rewards first, first+1, ...; obs the same numbers with one more row."""
    if not np.array_equal(np.diff(rewards), np.ones(len(rewards) - 1)):
        raise AssertionError(f"torn episode: rewards {rewards[:5]}...")
    if not np.array_equal(obs[:, 0], np.arange(rewards[0], rewards[0] + len(rewards) + 1)):
        raise AssertionError("observations do not match rewards")


def writer_main(url: str, writer_id: int, episodes: int, atomic: bool) -> None:
    store = TrajectoryStore.open(url)
    rng = np.random.default_rng(writer_id)
    with store.writer("fifo", atomic=atomic, segment_timesteps=40) as w:
        sealed = 0
        for i in range(episodes):
            w.add(counting_episode(BOX, int(rng.integers(5, 30)), 1_000_000 * writer_id + 1000 * (i % 900)))  # < 2**24
            if atomic and i % 4 == 3:
                w.flush()
            for info in w.sealed[sealed:]:
                print(f"sealed {info.id} {info.episodes}", flush=True)  # noqa: T201 (read by the parent process)
            sealed = len(w.sealed)


def sampler_main(url: str, done_flag: str) -> None:
    store = TrajectoryStore.open(url, cache_bytes=4000, refresh_seconds=0.0)
    rng = np.random.default_rng(0)
    batches = windows_from_fifo = 0
    while not os.path.exists(done_flag) or batches < 5:
        try:
            batch = store.sample(16, 8, partitions={"protected": 0.5, "fifo": 0.5}, rng=rng)
        except Exception as e:  # the fifo may be empty for a moment: only the "nothing to sample" case is allowed
            if "nothing to sample" not in str(e):
                raise
            continue
        for b in range(batch.batch_size):
            n = int(batch.mask[b].sum())
            check_episode_is_whole(batch.rewards[b, :n], batch.obs["observation"][b, : n + 1])
        windows_from_fifo += int((np.asarray(batch.partition_names)[batch.partition] == "fifo").sum())
        batches += 1
    print(json.dumps({"batches": batches, "fifo_windows": windows_from_fifo}), flush=True)  # noqa: T201 (to the parent)


# ---------------------------------------------------------------- tests


def _spawn(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(HERE), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _make_store(tmp_path: Path) -> str:
    store = TrajectoryStore.create(tmp_path / "s.zarr", BOX)
    with store.writer("protected") as w:
        for i in range(4):
            w.add(counting_episode(BOX, 50, 15_000_000 + 1000 * i))
    store.configure_partition("fifo", capacity_timesteps=400)
    return str(tmp_path / "s.zarr")


def test_two_writers_and_a_sampler_at_once(tmp_path: Path) -> None:
    url = _make_store(tmp_path)
    done = str(tmp_path / "writers-done")
    sampler = _spawn("sampler", url, done)
    writers = [_spawn("writer", url, str(i), "60", "0") for i in (1, 2)]
    for proc in writers:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    Path(done).touch()
    out, err = sampler.communicate(timeout=120)
    assert sampler.returncode == 0, err
    stats = json.loads(out.strip().splitlines()[-1])
    assert stats["batches"] >= 5 and stats["fifo_windows"] > 0

    store = TrajectoryStore.open(url)
    report = verify_store(store)
    assert report.ok and report.findings == []
    assert store.partition_info("protected").timesteps == 200  # protected untouched by fifo eviction
    fifo = store.partition_info("fifo")
    assert 0 < fifo.timesteps <= 400
    for ep in store.iter_episodes("fifo"):
        check_episode_is_whole(ep.rewards, ep.obs["observation"])


def _kill_writer_at_random_moment(url: str, rng: np.random.Generator, atomic: bool) -> list[str]:
    """Start a writer, let it seal a few segments (or flush), SIGKILL it; return the segment ids it reported."""
    proc = _spawn("writer", url, str(int(rng.integers(1, 15))), "100000", "1" if atomic else "0")
    reported: list[str] = []
    assert proc.stdout is not None
    if atomic:
        time.sleep(1.0 + float(rng.random()))
    else:
        while len(reported) < 2:
            line = proc.stdout.readline()
            assert line, proc.stderr.read() if proc.stderr else "writer died"
            reported.append(line.split()[1])
        time.sleep(float(rng.random()) * 0.2)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    reported += [line.split()[1] for line in proc.stdout.read().splitlines() if line.startswith("sealed")]
    return reported


def _check_after_kill(url: str, reported: list[str]) -> None:
    store = TrajectoryStore.open(url)
    report = verify_store(store)
    assert report.ok, [f.__dict__ for f in report.findings]
    assert {f.status for f in report.findings} <= {"abandoned", "stray"}
    present = {s.id for s in store.segments("fifo")}
    assert set(reported) <= present, f"sealed segments missing after the kill: {set(reported) - present}"
    episodes = list(store.iter_episodes("fifo"))
    assert len(episodes) == sum(s.episodes for s in store.segments("fifo"))
    for ep in episodes:
        check_episode_is_whole(ep.rewards, ep.obs["observation"])
    batch = store.sample(32, 8, partitions={"protected": 1.0, "fifo": 1.0}, rng=np.random.default_rng(0))
    assert batch.mask.any()
    cleaned = verify_store(store, quarantine=True)
    assert cleaned.ok and verify_store(store).findings == []


def test_sigkilled_writers_leave_a_valid_store_with_every_sealed_episode(tmp_path: Path) -> None:
    url = _make_store(tmp_path)
    TrajectoryStore.open(url).configure_partition("fifo", kind="fifo")  # no capacity: keep every segment
    seed = int(time.time())
    print(f"kill moments drawn with seed {seed}")  # noqa: T201 (shown by pytest on failure)
    rng = np.random.default_rng(seed)
    reported = _kill_writer_at_random_moment(url, rng, atomic=False)
    _check_after_kill(url, reported)
    before = {s.id for s in TrajectoryStore.open(url).segments("fifo")}
    assert _kill_writer_at_random_moment(url, rng, atomic=True) == []
    assert {s.id for s in TrajectoryStore.open(url).segments("fifo")} == before  # atomic: nothing visible
    _check_after_kill(url, [])


@pytest.mark.slow
def test_many_random_kills_with_a_concurrent_sampler(tmp_path: Path) -> None:
    url = _make_store(tmp_path)
    TrajectoryStore.open(url).configure_partition("fifo", kind="fifo")  # no capacity: keep every segment
    done = str(tmp_path / "done")
    sampler = _spawn("sampler", url, done)
    rng = np.random.default_rng(int(time.time()))
    for round_ in range(12):
        reported = _kill_writer_at_random_moment(url, rng, atomic=bool(round_ % 3 == 2))
        store = TrajectoryStore.open(url)
        assert verify_store(store).ok
        assert set(reported) <= {s.id for s in store.segments("fifo")}
    Path(done).touch()
    _, err = sampler.communicate(timeout=120)
    assert sampler.returncode == 0, err
    _check_after_kill(url, [])


if __name__ == "__main__":
    role, *rest = sys.argv[1:]
    if role == "writer":
        writer_main(rest[0], int(rest[1]), int(rest[2]), rest[3] == "1")
    elif role == "sampler":
        sampler_main(rest[0], rest[1])
