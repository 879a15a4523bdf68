"""Conversion throughput vs merely reading the source, and peak memory at two dataset sizes.

    python benchmarks/bench_convert.py [--sizes 250000 1000000] [--workdir DIR] [--image 84 84 4]

For each source (D4RL HDF5, Minari) and size it writes a continuous dataset (obs 17, action 6, 1000-step
episodes), then runs, each in a fresh subprocess: (a) read-only — iterate the Minari episodes / read every
HDF5 array block by block; (b) convert into a new store. Prints timesteps/s, the ratio, and peak RSS.
With `--image H W C` the source is one D4RL-layout file of uint8 frames of that shape instead (discrete
actions, no next_observations, as Atari datasets ship), written block by block; the written files are
deleted afterwards.
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
from typing import Any

OBS_DIM, ACT_DIM, EPISODE = 17, 6, 1000


def make_d4rl(path: Path, steps: int) -> None:
    from amago_pipe.testing.synthetic import write_d4rl_hdf5_large

    write_d4rl_hdf5_large(path, steps, episode_length=EPISODE, obs_dim=OBS_DIM, act_dim=ACT_DIM)


def make_d4rl_pixels(path: Path, steps: int, shape: tuple[int, int, int], block: int = 8192) -> None:
    """Frames that compress like Atari's: flat background, a few moving blocks, channels a 4-frame stack."""
    import h5py
    import numpy as np

    height, width, stack = shape
    rng = np.random.default_rng(0)
    with h5py.File(path, "w") as f:
        obs = f.create_dataset("observations", (steps, *shape), np.uint8)
        actions = f.create_dataset("actions", (steps,), np.int64)
        rewards = f.create_dataset("rewards", (steps,), np.float32)
        f.create_dataset("terminals", data=np.zeros(steps, bool))
        f.create_dataset("timeouts", data=(np.arange(steps) + 1) % EPISODE == 0)
        for b0 in range(0, steps, block):
            n = min(block, steps - b0)
            t = np.arange(b0 - stack + 1, b0 + n)  # the frames this block's stacks are made of
            frames = np.empty((len(t), height, width), np.uint8)
            frames[:] = (40 + 20 * (t // EPISODE) % 120)[:, None, None].astype(np.uint8)  # one flat colour per episode
            for k, (vy, vx) in enumerate(((1, 2), (2, 1), (3, 3))):  # three 8x8 blocks bouncing around
                ys = np.abs((t * vy + 17 * k) % (2 * (height - 8)) - (height - 8))
                xs = np.abs((t * vx + 29 * k) % (2 * (width - 8)) - (width - 8))
                for i, (y, x) in enumerate(zip(ys, xs, strict=True)):
                    frames[i, y : y + 8, x : x + 8] = 200 + 20 * k
            obs[b0 : b0 + n] = np.stack([frames[stack - 1 - c : stack - 1 - c + n] for c in range(stack)], axis=-1)
            actions[b0 : b0 + n] = rng.integers(0, 6, n)
            rewards[b0 : b0 + n] = (rng.random(n) < 0.01).astype(np.float32)


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
        row_bytes = sum(f[k].dtype.itemsize * int(np.prod(f[k].shape[1:])) for k in f)
        step = max(1, min(200_000, (64 << 20) // row_bytes))  # 64 MB blocks: 200k vector rows, ~2k frames
        for b0 in range(0, n, step):
            for key in ("observations", "next_observations", "actions", "rewards", "terminals", "timeouts"):
                if key in f:
                    np.asarray(f[key][b0 : b0 + step])
    return int(n)


def read_minari(dataset_id: str) -> int:
    import minari

    steps = 0
    for episode in minari.load_dataset(dataset_id).iterate_episodes():
        steps += len(episode.rewards)
    return steps


def measure(
    mode: str, source: str, target: str, workdir: Path, env: dict[str, str], repeat: int, *, keep_store: bool = False
) -> dict[str, Any]:
    """Best (fastest) of `repeat` fresh-process runs; peak memory is the largest seen.

    Each run's store is deleted after it unless `keep_store` (then the last one is kept, at `store`)."""
    import shutil

    runs = []
    for i in range(repeat):
        store = str(workdir / f"store-{source}-{time.time_ns()}.zarr")
        command = [sys.executable, __file__, "--child", mode, source, target, store]
        out = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
        runs.append({**json.loads(out.stdout.strip().splitlines()[-1]), "store": store})
        if not (keep_store and i == repeat - 1):
            shutil.rmtree(store, ignore_errors=True)
    best = min(runs, key=lambda r: r["seconds"])
    return {**best, "peak_mb": max(r["peak_mb"] for r in runs)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[250_000, 1_000_000])
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--repeat", type=int, default=2, help="Runs per measurement (the fastest is kept).")
    parser.add_argument("--image", type=int, nargs=3, metavar=("H", "W", "C"), help="uint8 D4RL frames instead.")
    parser.add_argument("--child", nargs=4, metavar=("MODE", "SOURCE", "TARGET", "STORE"))
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(*args.child)))
        return
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="bench-convert-"))
    workdir.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "MINARI_DATASETS_PATH": str(workdir / "minari")}
    if args.image:
        image_main(args.sizes, tuple(args.image), workdir, env, args.repeat)
        return
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


def image_main(sizes: list[int], shape: tuple[int, int, int], workdir: Path, env: dict[str, str], repeat: int) -> None:
    """D4RL pixels: raw read vs convert at each size; the files written here are deleted after each size."""
    import shutil

    print(
        "| frames | frame shape | HDF5 GB | read-only ts/s | convert ts/s | convert/read | store GB | "
        "read peak MB | convert peak MB |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for steps in sizes:
        path = workdir / f"d4rl-pixels-{steps}.hdf5"
        if path.exists():  # it is deleted afterwards: never one this script did not write
            sys.exit(f"{path} exists; remove it or give another --workdir")
        conv: dict[str, Any] | None = None
        t0 = time.perf_counter()
        make_d4rl_pixels(path, steps, shape)
        print(f"# made {steps:,} frames in {time.perf_counter() - t0:.1f}s", file=sys.stderr)
        try:
            read = measure("read", "d4rl", str(path), workdir, env, repeat)
            conv = measure("convert", "d4rl", str(path), workdir, env, repeat, keep_store=True)
            r_rate, c_rate = read["timesteps"] / read["seconds"], conv["timesteps"] / conv["seconds"]
            store_gb = sum(p.stat().st_size for p in Path(conv["store"]).rglob("*") if p.is_file()) / 1e9
            print(
                f"| {steps:,} | {'x'.join(map(str, shape))} uint8 | {path.stat().st_size / 1e9:.1f} | {r_rate:,.0f} | "
                f"{c_rate:,.0f} | {c_rate / r_rate:.2f} | {store_gb:.2f} | {read['peak_mb']:.0f} | "
                f"{conv['peak_mb']:.0f} |",
                flush=True,
            )
        finally:
            path.unlink(missing_ok=True)
            if conv is not None:  # the store it kept to weigh; the others were deleted by `measure`
                shutil.rmtree(conv["store"], ignore_errors=True)


if __name__ == "__main__":
    main()
