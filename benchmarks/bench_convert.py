"""Conversion throughput vs merely reading the source, and peak memory at two dataset sizes.

    python benchmarks/bench_convert.py [--sizes 250000 1000000] [--workdir DIR]

For each source (D4RL HDF5, Minari) and size it writes a continuous dataset (obs 17, action 6, 1000-step
episodes), then runs, each in a fresh subprocess: (a) read-only — iterate the Minari episodes / read every
HDF5 array block by block; (b) convert into a new store. Prints timesteps/s, the ratio, and peak RSS.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

OBS_DIM, ACT_DIM, EPISODE = 17, 6, 1000


def make_d4rl(path: Path, steps: int) -> None:
    from amago_pipe.testing.synthetic import write_d4rl_hdf5_large

    write_d4rl_hdf5_large(path, steps, episode_length=EPISODE, obs_dim=OBS_DIM, act_dim=ACT_DIM)


def make_minari(root: Path, dataset_id: str, steps: int) -> None:
    import numpy as np
    from gymnasium import spaces
    from minari.data_collector import EpisodeBuffer

    from amago_pipe.testing.synthetic import write_minari

    os.environ["MINARI_DATASETS_PATH"] = str(root)
    rng = np.random.default_rng(0)
    obs_space = spaces.Box(-np.inf, np.inf, (OBS_DIM,), np.float32)
    act_space = spaces.Box(-1, 1, (ACT_DIM,), np.float32)

    def batch(n: int) -> list[EpisodeBuffer]:
        out = []
        for _ in range(n):
            trunc = np.zeros(EPISODE, bool)
            trunc[-1] = True
            out.append(
                EpisodeBuffer(
                    observations=rng.standard_normal((EPISODE + 1, OBS_DIM)).astype(np.float32),
                    actions=rng.uniform(-1, 1, (EPISODE, ACT_DIM)).astype(np.float32),
                    rewards=rng.standard_normal(EPISODE),
                    terminations=np.zeros(EPISODE, bool),
                    truncations=trunc,
                )
            )
        return out

    episodes = steps // EPISODE
    dataset = write_minari(dataset_id, batch(min(50, episodes)), obs_space, act_space)
    for start in range(50, episodes, 50):
        dataset.storage.update_episodes(batch(min(50, episodes - start)))


def child(mode: str, source: str, target: str, store: str) -> dict[str, float]:
    """One measurement in this (fresh) process; returns timesteps, seconds and peak RSS."""
    import amago_pipe.converters.run
    import h5py  # noqa: F401 - import the heavy modules first so `import_mb` is the baseline
    import minari  # noqa: F401

    import amago_pipe.store  # noqa: F401

    base_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    if mode == "read" and source == "d4rl":
        steps = read_d4rl(Path(target))
    elif mode == "read":
        steps = read_minari(target)
    elif mode == "write":
        steps = write_only(int(target), store)
    else:
        from amago_pipe.converters.run import convert

        from amago_pipe.config.convert import ConvertStageConfig, D4rlSourceConfig, MinariSourceConfig

        config = D4rlSourceConfig(path=target) if source == "d4rl" else MinariSourceConfig(dataset=target)
        report = convert(ConvertStageConfig(type="convert", source=config), store)
        steps = report.timesteps
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"timesteps": steps, "seconds": seconds, "peak_mb": peak / 1024, "import_mb": base_rss / 1024}


def write_only(steps: int, store_url: str) -> int:
    """The store's own floor: the same number of ready-made 1000-step episodes written atomically."""
    import numpy as np

    from amago_pipe.spec import ActionSpec, ArraySpec, DataSpec
    from amago_pipe.store import Episode, TrajectoryStore

    rng = np.random.default_rng(0)
    spec = DataSpec(
        {"observation": ArraySpec((OBS_DIM,), "float32")},
        ActionSpec("continuous", (ACT_DIM,), low=(-1.0,) * ACT_DIM, high=(1.0,) * ACT_DIM),
    )
    trunc = np.zeros(EPISODE, bool)
    trunc[-1] = True
    episode = Episode(
        obs={"observation": rng.standard_normal((EPISODE + 1, OBS_DIM)).astype(np.float32)},
        actions=rng.uniform(-1, 1, (EPISODE, ACT_DIM)).astype(np.float32),
        rewards=rng.standard_normal(EPISODE).astype(np.float32),
        terminated=np.zeros(EPISODE, bool),
        truncated=trunc,
    )
    store = TrajectoryStore.create(store_url, spec)
    with store.writer("protected", atomic=True) as writer:
        for _ in range(steps // EPISODE):
            writer.add(episode)
    return steps // EPISODE * EPISODE


def read_d4rl(path: Path) -> int:
    import h5py
    import numpy as np

    with h5py.File(path, "r") as f:
        n = f["observations"].shape[0]
        for b0 in range(0, n, 200_000):
            for key in ("observations", "next_observations", "actions", "rewards", "terminals", "timeouts"):
                np.asarray(f[key][b0 : b0 + 200_000])
    return int(n)


def read_minari(dataset_id: str) -> int:
    import minari

    steps = 0
    for episode in minari.load_dataset(dataset_id).iterate_episodes():
        steps += len(episode.rewards)
    return steps


def measure(mode: str, source: str, target: str, workdir: Path, env: dict[str, str], repeat: int) -> dict[str, float]:
    """Best (fastest) of `repeat` fresh-process runs; peak memory is the largest seen."""
    runs = []
    for _ in range(repeat):
        store = str(workdir / f"store-{source}-{time.time_ns()}.zarr")
        command = [sys.executable, __file__, "--child", mode, source, target, store]
        out = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    best = min(runs, key=lambda r: r["seconds"])
    return {**best, "peak_mb": max(r["peak_mb"] for r in runs)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[250_000, 1_000_000])
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--repeat", type=int, default=2, help="Runs per measurement (the fastest is kept).")
    parser.add_argument("--child", nargs=4, metavar=("MODE", "SOURCE", "TARGET", "STORE"))
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(*args.child)))
        return
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="bench-convert-"))
    env = {**os.environ, "MINARI_DATASETS_PATH": str(workdir / "minari")}
    rows = []
    for steps in args.sizes:
        d4rl_path = workdir / f"d4rl-{steps}.hdf5"
        dataset_id = f"bench/continuous{steps}-v0"
        t0 = time.perf_counter()
        make_d4rl(d4rl_path, steps)
        make_minari(workdir / "minari", dataset_id, steps)
        print(f"# made {steps:,}-step datasets in {time.perf_counter() - t0:.1f}s", file=sys.stderr)
        write = measure("write", "store", str(steps), workdir, env, args.repeat)
        for source, target in (("d4rl", str(d4rl_path)), ("minari", dataset_id)):
            read = measure("read", source, target, workdir, env, args.repeat)
            conv = measure("convert", source, target, workdir, env, args.repeat)
            rows.append((source, steps, read, conv, write))
    print(
        "| source | timesteps | read-only ts/s | store-write-only ts/s | convert ts/s | convert/read | "
        "read peak MB | convert peak MB | convert peak - imports MB |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for source, steps, read, conv, write in rows:
        r_rate, c_rate = read["timesteps"] / read["seconds"], conv["timesteps"] / conv["seconds"]
        w_rate = write["timesteps"] / write["seconds"]
        print(
            f"| {source} | {steps:,} | {r_rate:,.0f} | {w_rate:,.0f} | {c_rate:,.0f} | {c_rate / r_rate:.2f} | "
            f"{read['peak_mb']:.0f} | {conv['peak_mb']:.0f} | {conv['peak_mb'] - conv['import_mb']:.0f} |"
        )


if __name__ == "__main__":
    main()
