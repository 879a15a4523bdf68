"""Segment load time: what a sampler pays to bring every sealed segment into RAM, then per-batch sampling.

Writes (once) a store of `--steps` transitions of 17-dim float32 observations and 6-dim actions in 1000-step
episodes, 100k-step segments; then, `--repeats` times, opens it afresh and times the first `sample` (which
loads and checks every segment) and 200 batches of 24 x 128 windows from RAM. Prints a markdown table.

    python benchmarks/bench_segment_load.py [--dir /tmp/bench-load] [--steps 1000000]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from amago_pipe.spec import ActionSpec, ArraySpec, DataSpec
from amago_pipe.store import Episode, TrajectoryStore

SPEC = DataSpec(
    {"observation": ArraySpec((17,), "float32")}, ActionSpec("continuous", (6,), low=(-1.0,) * 6, high=(1.0,) * 6)
)


def write(path: Path, steps: int) -> None:
    rng = np.random.default_rng(0)
    store = TrajectoryStore.create(path, SPEC)
    with store.writer("protected", segment_timesteps=100_000) as w:
        for _ in range(steps // 1000):
            obs = np.cumsum(rng.standard_normal((1001, 17)) * 0.05, axis=0).astype(np.float32)
            ends = np.zeros(1000, dtype=bool)
            ends[-1] = True
            w.add(
                Episode(
                    obs={"observation": obs},
                    actions=np.tanh(rng.standard_normal((1000, 6))).astype(np.float32),
                    rewards=rng.standard_normal(1000).astype(np.float32),
                    terminated=ends,
                    truncated=np.zeros(1000, dtype=bool),
                )
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", default="/tmp/bench-load")
    parser.add_argument("--steps", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    path = Path(args.dir) / f"store-{args.steps}.zarr"
    if not path.exists():
        write(path, args.steps)
    loads, batches = [], []
    for r in range(args.repeats):
        store = TrajectoryStore.open(path, cache_bytes=4 << 30)
        t0 = time.perf_counter()
        store.sample(24, 128, rng=np.random.default_rng(r))
        loads.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        for i in range(200):
            store.sample(24, 128, rng=np.random.default_rng([r, i]))
        batches.append((time.perf_counter() - t0) / 200)
    segments = len(TrajectoryStore.open(path).segments("protected"))
    print(f"| store | segments | load all (best of {args.repeats}) | per segment | per batch (24 x 128) |")
    print("|---|---:|---:|---:|---:|")
    print(
        f"| {path} | {segments} | {min(loads) * 1e3:.0f} ms | {min(loads) / segments * 1e3:.1f} ms "
        f"| {min(batches) * 1e6:.0f} µs |"
    )


if __name__ == "__main__":
    main()
