"""Trajectory store throughput: windows/s (store vs one .npz per episode vs in-RAM numpy), appends, bytes on disk.

One run, same data: 1M transitions of 17-dim float32 observations and 6-dim actions in ~1000-step episodes,
plus an 84x84x3 uint8 image variant at 100k transitions; batches of 24 windows of 128 steps. Also measures
sampling while 2 writer processes append. `--quick` shrinks every size 10x. Prints a markdown table.

    python benchmarks/bench_store.py [--quick] [--dir /tmp/bench] [--skip-images]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from amago_pipe.spec import ActionSpec, ArraySpec, DataSpec
from amago_pipe.store import Episode, TrajectoryStore

BATCH, SEQ_LEN = 24, 128
NOISE = np.random.default_rng(123).integers(-8, 9, (97, 84, 84, 3)).astype(np.int16)


def vector_spec() -> DataSpec:
    return DataSpec(
        {"observation": ArraySpec((17,), "float32")}, ActionSpec("continuous", (6,), low=(-1.0,) * 6, high=(1.0,) * 6)
    )


def image_spec() -> DataSpec:
    return DataSpec({"pixels": ArraySpec((84, 84, 3), "uint8")}, ActionSpec("discrete", (), n=6))


def make_episode(spec: DataSpec, length: int, rng: np.random.Generator) -> Episode:
    """Data shaped like real rollouts: smooth (random-walk) states, smooth images with noise."""
    if "pixels" in spec.observations:
        base = rng.integers(0, 255, (1, 84, 84, 3)).astype(np.int16)
        drift = np.cumsum(rng.integers(-2, 3, (length + 1, 1, 1, 1)), axis=0)
        noise = NOISE[np.arange(length + 1) % len(NOISE)]  # (T+1, 84, 84, 3) sensor-like noise, from a bank
        obs = {"pixels": np.clip(base + drift + noise, 0, 255).astype(np.uint8)}  # (T+1, 84, 84, 3)
        actions = rng.integers(0, 6, length)
    else:
        obs = {"observation": np.cumsum(rng.standard_normal((length + 1, 17)) * 0.05, axis=0).astype(np.float32)}
        actions = np.tanh(np.cumsum(rng.standard_normal((length, 6)) * 0.1, axis=0)).astype(np.float32)
    ends = np.zeros(length, dtype=bool)
    ends[-1] = True
    return Episode(
        obs=obs,
        actions=actions,
        rewards=rng.standard_normal(length).astype(np.float32),
        terminated=np.zeros(length, dtype=bool),
        truncated=ends,
    )


def make_episodes(spec: DataSpec, total: int, seed: int = 0) -> list[Episode]:
    rng = np.random.default_rng(seed)
    episodes, steps = [], 0
    while steps < total:
        length = min(int(rng.integers(800, 1201)), total - steps)
        episodes.append(make_episode(spec, length, rng))
        steps += length
    return episodes


def rate(fn: Callable[[], object], min_seconds: float, min_calls: int = 3) -> float:
    """Calls per second of `fn` over at least `min_seconds` (after one warm-up call)."""
    fn()
    calls, start = 0, time.perf_counter()
    while calls < min_calls or time.perf_counter() - start < min_seconds:
        fn()
        calls += 1
    return calls / (time.perf_counter() - start)


# ---------------------------------------------------------------- baselines


class NpzPerEpisode:
    """AMAGO's layout: one uncompressed .npz per episode; a window = pick a file, np.load it, slice."""

    def __init__(self, root: Path, episodes: list[Episode]):
        root.mkdir(parents=True, exist_ok=True)
        for i, ep in enumerate(episodes):
            np.savez(
                root / f"ep_{i:06d}.npz",
                **{f"obs_{k}": v for k, v in ep.obs.items()},
                actions=ep.actions,
                rewards=ep.rewards,
                terminated=ep.terminated,
                truncated=ep.truncated,
            )
        self.files = sorted(root.iterdir())
        self.rng = np.random.default_rng(0)

    def window(self) -> dict[str, np.ndarray]:
        path = self.files[self.rng.integers(len(self.files))]
        with np.load(path) as z:
            data = {k: z[k] for k in z.files}
        length = len(data["actions"])
        i = int(self.rng.integers(0, max(length - SEQ_LEN + 1, 1)))
        return {k: v[i : i + SEQ_LEN + (1 if k.startswith("obs_") else 0)] for k, v in data.items()}

    def batch(self) -> list[dict[str, np.ndarray]]:
        return [self.window() for _ in range(BATCH)]


class InRam:
    """The limit: every episode concatenated in RAM, windows gathered with one np.take per array.

    `batch()` returns what a WindowBatch holds (obs, actions, rewards, terminated, truncated, mask, time,
    previous action and reward); `batch_minimal()` only obs, actions, rewards, dones and mask.
    """

    def __init__(self, episodes: list[Episode]):
        self.lengths = np.asarray([ep.length for ep in episodes])
        self.obs_off = np.concatenate([[0], np.cumsum(self.lengths + 1)[:-1]])
        self.act_off = np.concatenate([[0], np.cumsum(self.lengths)[:-1]])
        self.obs = {k: np.concatenate([ep.obs[k] for ep in episodes]) for k in episodes[0].obs}
        self.actions = np.concatenate([ep.actions for ep in episodes])
        self.rewards = np.concatenate([ep.rewards for ep in episodes])
        self.terminated = np.concatenate([ep.terminated for ep in episodes])
        self.truncated = np.concatenate([ep.truncated for ep in episodes])
        counts = np.maximum(self.lengths - SEQ_LEN + 1, 1)
        self.counts, self.cum = counts, np.cumsum(counts)
        self.ar = np.arange(SEQ_LEN + 1)
        self.rng = np.random.default_rng(0)

    def _rows(self) -> tuple[np.ndarray, ...]:
        g = self.rng.integers(0, self.cum[-1], BATCH)
        ep = np.searchsorted(self.cum, g, side="right")
        start = g - (self.cum[ep] - self.counts[ep])
        length = self.lengths[ep]
        steps = np.minimum(start[:, None] + self.ar, length[:, None])  # (B, L+1)
        obs_rows = self.obs_off[ep][:, None] + steps  # (B, L+1)
        act_rows = self.act_off[ep][:, None] + np.minimum(steps[:, :-1], length[:, None] - 1)  # (B, L)
        return ep, start, steps, obs_rows, act_rows, steps[:, :-1] < length[:, None]

    def batch_minimal(self) -> dict[str, np.ndarray]:
        _, _, _, obs_rows, act_rows, mask = self._rows()
        out = {k: np.take(v, obs_rows, axis=0) for k, v in self.obs.items()}
        out["actions"] = np.take(self.actions, act_rows, axis=0)
        out["rewards"] = np.take(self.rewards, act_rows, axis=0)
        out["dones"] = np.take(self.terminated, act_rows, axis=0)
        out["mask"] = mask
        return out

    def batch(self) -> dict[str, np.ndarray]:
        ep, start, steps, obs_rows, act_rows, mask = self._rows()
        out = {k: np.take(v, obs_rows, axis=0) for k, v in self.obs.items()}
        for name in ("actions", "rewards", "terminated", "truncated"):
            out[name] = np.take(getattr(self, name), act_rows, axis=0)
        out["mask"], out["time"] = mask, steps
        prev = np.maximum(self.act_off[ep] + start - 1, 0)  # (B,)
        out["prev_actions"] = np.take(self.actions, prev, axis=0) * (start > 0)[:, None]
        out["prev_rewards"] = np.take(self.rewards, prev) * (start > 0)
        return out


# ---------------------------------------------------------------- measurements


def write_store(path: Path, spec: DataSpec, episodes: list[Episode], codec: str) -> tuple[float, float]:
    """(timesteps/s, bytes per timestep) of one writer appending every episode (100k-step segments)."""
    shutil.rmtree(path, ignore_errors=True)
    store = TrajectoryStore.create(path, spec, codec=codec)
    start = time.perf_counter()
    with store.writer("protected") as w:
        for ep in episodes:
            w.add(ep)
    seconds = time.perf_counter() - start
    info = store.partition_info("protected")
    return info.timesteps / seconds, info.bytes / info.timesteps


def row(variant: str, what: str, value: str, extra: str = "") -> dict[str, str]:
    return {"variant": variant, "what": what, "value": value, "extra": extra}


def store_rates(path: Path, raw_bytes: int, seconds: float) -> tuple[float, float, float]:
    """(warm windows/s, windows/s with a budget of 1/4 of the data, seconds of the first (cache-filling) batch)."""
    rng = np.random.default_rng(0)
    warm = TrajectoryStore.open(path, cache_bytes=2 * raw_bytes)
    t0 = time.perf_counter()
    warm.sample(BATCH, SEQ_LEN, rng=rng)
    load_s = time.perf_counter() - t0
    warm_rate = rate(lambda: warm.sample(BATCH, SEQ_LEN, rng=rng), seconds) * BATCH
    warm.refresh()
    warm._sampler = None  # free the cache before the next measurement
    cold = TrajectoryStore.open(path, cache_bytes=raw_bytes // 4)
    cold_rate = rate(lambda: cold.sample(BATCH, SEQ_LEN, rng=rng), seconds / 2) * BATCH
    return warm_rate, cold_rate, load_s


def bench_variant(name: str, spec: DataSpec, total: int, workdir: Path, seconds: float) -> list[dict[str, str]]:
    t0 = time.perf_counter()
    episodes = make_episodes(spec, total)
    print(
        f"[{name}] made {len(episodes)} episodes ({total:,} steps) in {time.perf_counter() - t0:.1f}s", file=sys.stderr
    )
    rows = []
    for codec in ("zstd", "lz4"):
        steps_s, bytes_step = write_store(workdir / f"{name}-{codec}.zarr", spec, episodes, codec)
        label = f"append, codec {codec}" + (" (default)" if codec == "lz4" else "")
        rows.append(row(name, label, f"{steps_s:,.0f} steps/s", f"{bytes_step:,.1f} B/step on disk"))
    shutil.rmtree(workdir / f"{name}-lz4.zarr", ignore_errors=True)
    path = workdir / f"{name}-zstd.zarr"
    raw_bytes = sum(f.row_bytes for f in TrajectoryStore.open(path).fields.values()) * (total + len(episodes))
    warm, cold, load_s = store_rates(path, raw_bytes, seconds)
    rows.append(
        row(name, "windows/s: store, warm (RAM cache)", f"{warm:,.0f}", f"first batch fills the cache: {load_s:.2f}s")
    )
    rows.append(
        row(name, "windows/s: store, RAM budget = 1/4 of data", f"{cold:,.0f}", "3/4 of windows read from zarr")
    )
    npz = NpzPerEpisode(workdir / f"{name}-npz", episodes)
    npz_rate = rate(npz.batch, seconds / 2, min_calls=2) * BATCH
    rows.append(
        row(
            name,
            "windows/s: one .npz per episode (AMAGO)",
            f"{npz_rate:,.0f}",
            f"store/npz = {warm / npz_rate:,.0f}x (target >= 20x)",
        )
    )
    shutil.rmtree(workdir / f"{name}-npz", ignore_errors=True)
    ram = InRam(episodes)
    del episodes
    ram_rate = rate(ram.batch, seconds) * BATCH
    minimal_rate = rate(ram.batch_minimal, seconds) * BATCH
    rows.append(
        row(
            name,
            "windows/s: in-RAM numpy, same fields (limit)",
            f"{ram_rate:,.0f}",
            f"store/limit = {warm / ram_rate:.2f} (target >= 0.5)",
        )
    )
    rows.append(
        row(
            name,
            "windows/s: in-RAM numpy, obs/act/rew/done only",
            f"{minimal_rate:,.0f}",
            f"store/this = {warm / minimal_rate:.2f}",
        )
    )
    return rows


WRITER = """
import sys, time, numpy as np
sys.path.insert(0, {bench_dir!r})
from bench_store import make_episode, vector_spec
from amago_pipe.store import TrajectoryStore
store = TrajectoryStore.open({path!r})
rng = np.random.default_rng({seed})
deadline, steps = time.time() + {seconds}, 0
with store.writer("fifo", segment_timesteps=5000) as w:
    while time.time() < deadline:
        ep = make_episode(vector_spec(), 1000, rng)
        w.add(ep)
        steps += ep.length
print(steps)
"""


def bench_concurrent(workdir: Path, seconds: float) -> list[dict[str, str]]:
    """Sampling from protected+fifo while 2 writer processes append to fifo (capacity-bounded)."""
    path = workdir / "vector-zstd.zarr"
    store = TrajectoryStore.open(path)
    store.configure_partition("fifo", capacity_timesteps=200_000)
    code = [
        WRITER.format(bench_dir=str(Path(__file__).parent), path=str(path), seed=s, seconds=seconds) for s in (1, 2)
    ]
    writers = [subprocess.Popen([sys.executable, "-c", c], stdout=subprocess.PIPE, text=True) for c in code]
    time.sleep(2.0)  # let the writers start and seal their first segments
    rng = np.random.default_rng(0)
    mix = {"protected": 0.5, "fifo": 0.5}
    sampled = rate(lambda: store.sample(BATCH, SEQ_LEN, partitions=mix, rng=rng), seconds - 3.0) * BATCH
    appended = sum(int(w.communicate()[0].strip() or 0) for w in writers)
    info = store.partition_info("fifo")
    extra = f"writers appended {appended / seconds:,.0f} steps/s together; fifo now {info.segments} segments"
    return [row("vector", "windows/s while 2 writers append (50/50 protected/fifo)", f"{sampled:,.0f}", extra)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10x smaller data, shorter timings")
    parser.add_argument("--dir", type=Path, default=None, help="work directory (default: a temporary one)")
    parser.add_argument("--skip-images", action="store_true")
    parser.add_argument("--json", type=Path, default=None, help="also write the rows as JSON here")
    args = parser.parse_args()
    scale = 10 if args.quick else 1
    seconds = 1.0 if args.quick else 3.0
    workdir = args.dir or Path(tempfile.mkdtemp(prefix="bench_store_"))
    workdir.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    try:
        rows = bench_variant("vector", vector_spec(), 1_000_000 // scale, workdir, seconds)
        rows += bench_concurrent(workdir, 4.0 if args.quick else 10.0)
        if not args.skip_images:
            rows += bench_variant("image", image_spec(), 100_000 // scale, workdir, seconds)
    finally:
        if args.dir is None:
            shutil.rmtree(workdir, ignore_errors=True)
    import zarr

    print(
        f"\n{platform.node()}: {os.cpu_count()} CPUs, Python {platform.python_version()}, numpy {np.__version__}, "
        f"zarr {zarr.__version__}; batch {BATCH} x {SEQ_LEN}; {'quick' if args.quick else 'full'} sizes; "
        f"{time.perf_counter() - started:.0f}s\n"
    )
    print("| data | measurement | value | notes |\n|---|---|---:|---|")
    for r in rows:
        print(f"| {r['variant']} | {r['what']} | {r['value']} | {r['extra']} |")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
