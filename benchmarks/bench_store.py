"""Trajectory store at scale: windows/s and peak RSS at data/RAM-budget ratios, beside AMAGO's one .npz per episode.

Data: 17-dim float32 vector observations (6-dim actions), and 84x84x4 uint8 frame stacks (6 discrete actions),
in 800-1,200-step episodes written straight into a store with its writer (lz4). For every ratio data/`cache_bytes`
a fresh worker process opens the store, warms it (`store.warm()`: RAM cache filled, disk-tier files built or
reused) and samples batches of 24 windows of 128 steps; it reports windows per CPU-second and per wall second and
its RSS from /proc/self/status (VmHWM, and RssAnon / RssFile at the end). Baselines, each in its own process: one
uncompressed .npz per episode (a window = np.load the file and slice, as AMAGO), and every episode in RAM (one
np.take per field: the in-RAM limit). Prints a markdown table.

    python benchmarks/bench_store.py [--quick] [--dir /tmp/bench] [--vector-steps N] [--image-frames N ...]
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
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from amago_pipe.spec import ActionSpec, ArraySpec, DataSpec
from amago_pipe.store import Episode, TrajectoryStore

BATCH, SEQ_LEN = 24, 128
RATIOS = (0.25, 1.0, 4.0, 8.0)
TEXTURES = np.kron(np.random.default_rng(7).integers(0, 8, (16, 11, 11)), np.ones((1, 8, 8))).astype(np.uint8)[
    :, :84, :84
] * np.uint8(24)  # (16, 84, 84) blocky grey backgrounds


def vector_spec() -> DataSpec:
    return DataSpec(
        {"observation": ArraySpec((17,), "float32")}, ActionSpec("continuous", (6,), low=(-1.0,) * 6, high=(1.0,) * 6)
    )


def image_spec() -> DataSpec:
    return DataSpec({"pixels": ArraySpec((84, 84, 4), "uint8")}, ActionSpec("discrete", (), n=6))


def make_episode(spec: DataSpec, length: int, rng: np.random.Generator) -> Episode:
    """Vector: smooth random-walk states. Images: Atari-like grey frames (a textured background, a moving 8x8
    sprite), stacked 4 deep as the agent sees them."""
    if "pixels" in spec.observations:
        frames = np.repeat(TEXTURES[rng.integers(len(TEXTURES))][None], length + 4, axis=0)  # (T+4, 84, 84)
        pos = np.cumsum(rng.integers(-2, 3, (length + 4, 2)), axis=0) % 76  # (T+4, 2) sprite corner
        t = np.arange(length + 4)[:, None, None]
        frames[t, pos[:, :1, None] + np.arange(8)[:, None], pos[:, 1:, None] + np.arange(8)] = 255
        obs = {"pixels": np.stack([frames[k : k + length + 1] for k in range(4)], axis=-1)}  # (T+1, 84, 84, 4)
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


def episodes(spec: DataSpec, total: int, seed: int = 0) -> Iterator[Episode]:
    """The same episodes for the same seed, made one at a time (a million frames do not fit in RAM)."""
    rng = np.random.default_rng(seed)
    steps = 0
    while steps < total:
        length = min(int(rng.integers(800, 1201)), total - steps)
        yield make_episode(spec, length, rng)
        steps += length


def memory() -> dict[str, float]:
    """MB of VmRSS, VmHWM (peak), RssAnon and RssFile of this process."""
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM", "RssAnon", "RssFile"):
                out[key] = int(value.split()[0]) / 1024
    return out


def rates(fn: Callable[[], object], seconds: float, min_calls: int = 3) -> tuple[float, float]:
    """(windows per CPU-second of this process, windows per wall second) of batches from `fn`."""
    calls, cpu0, wall0 = 0, time.process_time(), time.perf_counter()
    while calls < min_calls or time.perf_counter() - wall0 < seconds:
        fn()
        calls += 1
    return calls * BATCH / (time.process_time() - cpu0), calls * BATCH / (time.perf_counter() - wall0)


# ---------------------------------------------------------------- baselines (run in worker processes)


class NpzPerEpisode:
    """AMAGO's layout: one uncompressed .npz per episode; a window = pick a file, np.load it, slice."""

    def __init__(self, root: Path):
        self.files = sorted(root.iterdir())
        self.rng = np.random.default_rng(0)

    @staticmethod
    def write(root: Path, eps: Iterator[Episode]) -> None:
        root.mkdir(parents=True, exist_ok=True)
        for i, ep in enumerate(eps):
            arrays: dict[str, Any] = {f"obs_{k}": v for k, v in ep.obs.items()}
            arrays |= {k: getattr(ep, k) for k in ("actions", "rewards", "terminated", "truncated")}
            np.savez(root / f"ep_{i:06d}.npz", **arrays)

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
    """The limit: every episode concatenated in RAM, windows gathered with one np.take per array (the fields of a
    WindowBatch: obs, actions, rewards, terminated, truncated, mask, time, previous action and reward)."""

    def __init__(self, eps: Iterator[Episode]):
        obs: dict[str, list[np.ndarray]] = {}
        steps: dict[str, list[np.ndarray]] = {k: [] for k in ("actions", "rewards", "terminated", "truncated")}
        lengths = []
        for ep in eps:
            lengths.append(ep.length)
            for k, v in ep.obs.items():
                obs.setdefault(k, []).append(v)
            for k, parts in steps.items():
                parts.append(getattr(ep, k))
        self.lengths = np.asarray(lengths)
        self.obs_off = np.concatenate([[0], np.cumsum(self.lengths + 1)[:-1]])
        self.act_off = np.concatenate([[0], np.cumsum(self.lengths)[:-1]])
        self.obs = {k: np.concatenate(v) for k, v in obs.items()}
        self.steps = {k: np.concatenate(v) for k, v in steps.items()}
        self.counts = np.maximum(self.lengths - SEQ_LEN + 1, 1)
        self.cum = np.cumsum(self.counts)
        self.ar = np.arange(SEQ_LEN + 1)
        self.rng = np.random.default_rng(0)

    def batch(self) -> dict[str, np.ndarray]:
        g = self.rng.integers(0, self.cum[-1], BATCH)
        ep = np.searchsorted(self.cum, g, side="right")
        start = g - (self.cum[ep] - self.counts[ep])
        length = self.lengths[ep]
        steps = np.minimum(start[:, None] + self.ar, length[:, None])  # (B, L+1)
        act_rows = self.act_off[ep][:, None] + np.minimum(steps[:, :-1], length[:, None] - 1)  # (B, L)
        out = {k: np.take(v, self.obs_off[ep][:, None] + steps, axis=0) for k, v in self.obs.items()}
        out |= {k: np.take(v, act_rows, axis=0) for k, v in self.steps.items()}
        out["mask"], out["time"] = steps[:, :-1] < length[:, None], steps
        prev = np.maximum(self.act_off[ep] + start - 1, 0)  # (B,)
        out["prev_actions"] = np.take(self.steps["actions"], prev, axis=0) * (start > 0).reshape(-1, *[1] * (
            self.steps["actions"].ndim - 1))  # fmt: skip
        out["prev_rewards"] = np.take(self.steps["rewards"], prev) * (start > 0)
        return out


def worker(args: argparse.Namespace) -> dict[str, float]:
    """One measurement in this (fresh) process; its RSS is the method's."""
    base = memory()
    t0 = time.perf_counter()
    result: dict[str, float] = {}
    if args.worker == "store":
        store = TrajectoryStore.open(args.path, cache_bytes=args.cache_bytes, disk_tier=not args.no_tier)
        result |= {f"segments_{k}": v for k, v in store.warm().items()}
        rng = np.random.default_rng(0)
        fn: Callable[[], object] = lambda: store.sample(BATCH, SEQ_LEN, rng=rng)  # noqa: E731
    elif args.worker == "npz":
        fn = NpzPerEpisode(Path(args.path)).batch
    else:
        spec = TrajectoryStore.open(args.path).spec
        ram = InRam(episodes(spec, args.steps))
        fn = ram.batch
    fn()
    result["warm_s"] = time.perf_counter() - t0
    result["cpu"], result["wall"] = rates(fn, args.seconds)
    end = memory()
    return result | {"base_mb": base["VmRSS"], **{f"{k}_mb": v for k, v in end.items()}}


# ---------------------------------------------------------------- the driver


def run_worker(kind: str, path: Path, seconds: float, **extra: object) -> dict[str, float]:
    cmd = [sys.executable, __file__, "--worker", kind, "--path", str(path), "--seconds", str(seconds)]
    for k, v in extra.items():
        cmd += [f"--{k.replace('_', '-')}"] + ([] if v is True else [str(v)])
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def mb(x: float) -> str:
    return f"{x / 1024:,.1f} GiB" if x >= 1024 else f"{x:,.0f} MiB"


def bench_data(name: str, spec: DataSpec, total: int, args: argparse.Namespace, ratios: tuple[float, ...]) -> list:
    """Rows for one data set: append, the store at each ratio, the npz baseline and (when it fits) the in-RAM limit."""
    path, npz_dir = args.dir / f"{name}.zarr", args.dir / f"{name}-npz"
    for made in (path, npz_dir):  # written and deleted by this run only: never a folder that was there before
        if made.exists():
            raise SystemExit(f"bench_store: {made} already exists; give --dir an empty folder (or remove it)")
    store = TrajectoryStore.create(path, spec)
    seg = 100_000 if "pixels" not in spec.observations else 10_000
    t0 = time.perf_counter()
    with store.writer("protected", segment_timesteps=seg) as w:
        for ep in episodes(spec, total):
            w.add(ep)
    info = store.partition_info("protected")
    raw = sum(f.row_bytes for f in store.fields.values()) * (info.timesteps + info.episodes)
    label = f"{name}, {total:,} steps, {mb(raw / 2**20)} raw"
    rows = [[label, "append (store writer, lz4)", "", f"{total / (time.perf_counter() - t0):,.0f} steps/s", "", "",
             f"{info.bytes / raw:.2f} of raw on disk; {info.segments} segments of {seg:,} steps"]]  # fmt: skip
    limit = None
    if raw < 0.5 * os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"):
        limit = run_worker("ram", path, args.seconds, steps=total)
    print(f"[{name}] written, in-RAM limit {limit}", file=sys.stderr)
    measured = []
    for ratio in ratios:
        measured.append(
            (ratio, int(raw / ratio), run_worker("store", path, args.seconds, cache_bytes=int(raw / ratio)))
        )
        print(f"[{name}] ratio {ratio}: {measured[-1][2]}", file=sys.stderr)
    if not args.keep_tier:
        shutil.rmtree(path / ".cache", ignore_errors=True)
    NpzPerEpisode.write(npz_dir, episodes(spec, total))
    npz = run_worker("npz", npz_dir, args.seconds)
    shutil.rmtree(npz_dir, ignore_errors=True)
    for ratio, budget, r in measured:
        vs = f"{r['cpu'] / limit['cpu']:.2f}x in-RAM, " if limit else ""
        rows.append([label, f"store, data = {ratio:g} x budget ({mb(budget / 2**20)})", f"{r['segments_ram']} RAM, "
                     f"{r['segments_spill']} spill ({r['segments_tier']} tier), {r['segments_zarr']} zarr", f"{r['cpu']:,.0f}", f"{r['wall']:,.0f}",
                     f"{mb(r['VmHWM_mb'])} (anon {mb(r['RssAnon_mb'])}, file {mb(r['RssFile_mb'])})",
                     f"{vs}{r['cpu'] / npz['cpu']:.0f}x npz; warm-up {r['warm_s']:.1f} s"])  # fmt: skip
    rows.append([label, "one .npz per episode (AMAGO)", "", f"{npz['cpu']:,.0f}", f"{npz['wall']:,.0f}",
                 mb(npz["VmHWM_mb"]), ""])  # fmt: skip
    if limit:
        rows.append([label, "in-RAM numpy, same fields (limit)", "", f"{limit['cpu']:,.0f}", f"{limit['wall']:,.0f}",
                     mb(limit["VmHWM_mb"]), ""])  # fmt: skip
    shutil.rmtree(path, ignore_errors=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small data, short timings (a smoke test)")
    parser.add_argument("--dir", type=Path, default=None, help="work directory (default: a temporary one)")
    parser.add_argument("--vector-steps", type=int, default=1_000_000, help="0: no vector data set")
    parser.add_argument("--image-frames", type=int, nargs="*", default=[200_000],
                        help="one image data set per size; ratios below 4 are skipped where the data exceed RAM/2")  # fmt: skip
    parser.add_argument("--seconds", type=float, default=None, help="sampling time per measurement")
    parser.add_argument("--keep-tier", action="store_true", help="keep the disk tier while the npz baseline runs")
    parser.add_argument("--json", type=Path, default=None, help="also write the rows as JSON here")
    parser.add_argument("--worker", choices=("store", "npz", "ram"), help=argparse.SUPPRESS)
    parser.add_argument("--path", help=argparse.SUPPRESS)
    parser.add_argument("--cache-bytes", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--steps", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--no-tier", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(args)))
        return
    if args.quick:
        args.vector_steps, args.image_frames = 50_000, [10_000]
    args.seconds = args.seconds or (1.0 if args.quick else 4.0)
    cleanup = args.dir is None
    args.dir = args.dir or Path(tempfile.mkdtemp(prefix="bench_store_"))
    args.dir.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    try:
        rows = bench_data("vector", vector_spec(), args.vector_steps, args, RATIOS) if args.vector_steps else []
        ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        for frames in args.image_frames:
            big = frames * 28_224 > 0.5 * ram
            rows += bench_data("image", image_spec(), frames, args, RATIOS[2:] if big else RATIOS)
    finally:
        if cleanup:
            shutil.rmtree(args.dir, ignore_errors=True)
    import zarr

    print(
        f"\n{platform.node()}: {os.cpu_count()} CPUs, {ram / 2**30:.0f} GiB RAM, Python {platform.python_version()}, "
        f"numpy {np.__version__}, zarr {zarr.__version__}; batch {BATCH} x {SEQ_LEN}; "
        f"{time.perf_counter() - started:.0f}s\n"
    )
    columns = ["data", "method", "segments", "windows/CPU-s", "windows/s wall", "peak RSS (VmHWM)", "notes"]
    print("| " + " | ".join(columns) + " |\n|---|---|---|---:|---:|---|---|")
    for r in rows:
        print("| " + " | ".join(str(c) for c in r) + " |")
    if args.json:
        args.json.write_text(json.dumps({"columns": columns, "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
