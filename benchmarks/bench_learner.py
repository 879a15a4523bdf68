"""Learner throughput: updates/s, timesteps/s, FLOPs per update, MFU vs this CPU's matmul rate, peak memory.

Each configuration runs in its own subprocess (clean peak-RSS, fixed thread count) on a synthetic store
with CartPole-like (discrete) or Pendulum-like (continuous) shapes. Prints a Markdown table.

    python benchmarks/bench_learner.py                 # the default set, 1 thread
    python benchmarks/bench_learner.py --threads 2 --updates 10
    python benchmarks/bench_learner.py --only tf128-L64-discrete
    python benchmarks/bench_learner.py --history-coeff 0   # without the history objective's head (default 0.3)
    python benchmarks/bench_learner.py --device cuda --bf16 --updates 30   # GPU: MFU against its bf16 matmul rate
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

AMAGO_GAMMAS = (0.1, 0.9, 0.95, 0.97, 0.99, 0.995)
CONFIGS: dict[str, dict[str, Any]] = {
    # name: traj encoder, d_model, max_seq_len, action kind, extra gammas (besides 0.999), critics
    "tf128-L64-discrete": dict(traj="transformer", d=128, L=64, kind="discrete", gammas=(0.9, 0.99), K=4),
    "tf256-L128-discrete": dict(traj="transformer", d=256, L=128, kind="discrete", gammas=(0.9, 0.99), K=4),
    "tf128-L64-continuous": dict(traj="transformer", d=128, L=64, kind="continuous", gammas=(0.9, 0.99), K=4),
    "tf256-L128-continuous": dict(traj="transformer", d=256, L=128, kind="continuous", gammas=(0.9, 0.99), K=4),
    "gru256-L64-discrete": dict(traj="gru", d=256, L=64, kind="discrete", gammas=(0.9, 0.99), K=4),
    "ff256-L64-discrete": dict(traj="ff", d=256, L=64, kind="discrete", gammas=(0.9, 0.99), K=4),
    # AMAGO's own defaults for comparison: 4 critics x 7 gammas, d_model 256, 24 x 128
    "amago-defaults-discrete": dict(traj="transformer", d=256, L=128, kind="discrete", gammas=AMAGO_GAMMAS, K=4),
    "amago-defaults-continuous": dict(traj="transformer", d=256, L=128, kind="continuous", gammas=AMAGO_GAMMAS, K=4),
    # long context (GPU): the T-Maze pipeline's model at corridor 800 (L 1024), and AMAGO's sizes at L 1024
    "tmaze-tf64-L1024": dict(traj="transformer", d=64, L=1024, kind="discrete", gammas=(0.9, 0.99), K=4, small=True),
    "amago-defaults-L1024": dict(traj="transformer", d=256, L=1024, kind="discrete", gammas=AMAGO_GAMMAS, K=4),
    # the models of pipelines/quickstart.yaml and pipelines/pendulum-offline.yaml
    "quickstart-tf64-L32": dict(traj="transformer", d=64, L=32, kind="discrete", gammas=(0.9,), K=4, small=True),
    "pendulum-ff64-L32": dict(traj="ff", d=64, L=32, kind="continuous", gammas=(0.9,), K=4, small=True),
    # pixels: the models of pipelines/minatar-breakout.yaml (10x10x4) and atari-multigame.yaml (84x84x4 uint8)
    "cnn-minatar-tf64-L32": dict(
        traj="transformer",
        d=64,
        L=32,
        kind="image",
        image=(10, 10, 4),
        gammas=(0.9,),
        K=4,
        small=True,
        cnn=dict(impala_channels=(16,), img_features=64, d_output=64),
    ),
    "cnn-atari84-tf128-L32": dict(
        traj="transformer",
        d=128,
        L=32,
        kind="image",
        image=(84, 84, 4),
        gammas=(0.9,),
        K=4,
        small=True,
        cnn=dict(impala_channels=(16, 32, 32), img_features=256, d_output=128),
    ),
}
BATCH = 24


def matmul_rate(threads: int, device: str = "cpu", bf16: bool = False) -> float:
    """Measured GEMM FLOP/s: fp32 on this CPU at `threads` threads, or fp32 / bf16 on the GPU (random data)."""
    import torch

    torch.set_num_threads(threads)
    n, repeats = (1024, 20) if device == "cpu" else (8192, 20)
    dtype = torch.bfloat16 if bf16 else torch.float32
    a, b = torch.randn(n, n, device=device, dtype=dtype), torch.randn(n, n, device=device, dtype=dtype)
    for _ in range(3):
        a @ b
    _sync(device)
    start = time.perf_counter()
    for _ in range(repeats):
        a @ b
    _sync(device)
    return 2 * n**3 * repeats / (time.perf_counter() - start)


def _sync(device: str) -> None:
    import torch

    if device == "cuda":
        torch.cuda.synchronize()


def _store(path: Path, kind: str, image: tuple[int, ...] = ()) -> Any:
    import numpy as np

    from amago_pipe.spec import ActionSpec, ArraySpec, DataSpec
    from amago_pipe.store import Episode, TrajectoryStore

    if kind == "image":
        spec = DataSpec({"observation": ArraySpec(image, "uint8")}, ActionSpec("discrete", (), n=3))
    elif kind == "discrete":
        spec = DataSpec({"observation": ArraySpec((4,), "float32")}, ActionSpec("discrete", (), n=2))
    else:
        spec = DataSpec(
            {"observation": ArraySpec((3,), "float32")}, ActionSpec("continuous", (1,), low=(-2.0,), high=(2.0,))
        )
    store = TrajectoryStore.create(path, spec)
    rng = np.random.default_rng(0)
    shape = spec.observations["observation"].shape
    with store.writer("protected") as w:
        for _ in range(10 if kind == "image" else 40):
            T = 500
            actions = rng.uniform(-2, 2, (T, 1)).astype(np.float32) if kind == "continuous" else rng.integers(0, 2, T)
            ends = np.zeros(T, bool)
            ends[-1] = True
            obs = (
                rng.integers(0, 256, (T + 1, *shape), dtype=np.uint8)
                if kind == "image"
                else rng.normal(size=(T + 1, *shape)).astype(np.float32)
            )
            w.add(
                Episode(
                    obs={"observation": obs},
                    actions=actions,
                    rewards=rng.normal(size=T).astype(np.float32),
                    terminated=np.zeros(T, bool),
                    truncated=ends,
                )
            )
    return store


def _configs(c: dict[str, Any], history_coeff: float | None) -> tuple[Any, Any]:
    """The agent and model configs of one CONFIGS entry (`history_coeff` None: the agent's default)."""
    from amago_pipe.config.nets import (
        ActorHeadConfig,
        CnnTstepConfig,
        CriticHeadConfig,
        FFTrajConfig,
        FFTstepConfig,
        GruConfig,
        ModelConfig,
        TransformerConfig,
    )
    from amago_pipe.config.train import AgentConfig

    small = c.get("small", False)
    traj = {
        "transformer": TransformerConfig(d_model=c["d"], n_heads=4 if small else 8, n_layers=2 if small else 3),
        "gru": GruConfig(d_model=c["d"], n_layers=2),
        "ff": FFTrajConfig(d_model=c["d"], n_layers=2),
    }[c["traj"]]
    tstep = FFTstepConfig(d_hidden=128, d_output=64) if small else FFTstepConfig()
    if "cnn" in c:
        tstep = CnnTstepConfig(cnn="impala", channels_first=False, **c["cnn"])  # type: ignore[assignment]
    hidden = 128 if small else 256
    agent_cfg = AgentConfig(
        gamma=0.98 if small else 0.999,
        gammas=c["gammas"],
        reward_multiplier=10.0,
        actor=ActorHeadConfig(d_hidden=hidden),  # type: ignore[call-arg]
        critic=CriticHeadConfig(num_critics=c["K"], d_hidden=hidden),  # type: ignore[call-arg]
        **({} if history_coeff is None else {"history_coeff": history_coeff}),
    )
    return agent_cfg, ModelConfig(tstep_encoder=tstep, traj_encoder=traj)


def setup(
    name: str, tmp: Path, device: str = "cpu", history_coeff: float | None = None, agent_overrides: Any = None
) -> tuple[Any, Any, Any, list[Any]]:
    """(agent, optimizer, loader, 4 pre-sampled batches) of one configuration, its store in `tmp`; `agent_overrides`
    (AgentConfig -> AgentConfig) adjusts the agent config first."""
    import torch

    from amago_pipe.data.loader import BatchLoader
    from amago_pipe.train.optim import make_optimizer
    from amago_pipe.train.runtime import build_agent

    c = CONFIGS[name]
    torch.manual_seed(0)
    agent_cfg, model = _configs(c, history_coeff)
    agent_cfg = agent_overrides(agent_cfg) if agent_overrides is not None else agent_cfg
    store = _store(tmp / "s.zarr", c["kind"], c.get("image", ()))
    agent = build_agent(agent_cfg, model, store.spec, max_seq_len=c["L"]).to(device)
    opt = make_optimizer(agent, lr=1e-4, weight_decay=1e-4)
    loader = BatchLoader(store, batch_size=BATCH, seq_len=c["L"], partitions={"protected": 1.0}, seed=0, threaded=False)
    return agent, opt, loader, [next(loader).to(device) for _ in range(4)]


def update(agent: Any, opt: Any, batch: Any, autocast: Any = None) -> None:
    """One gradient step as the learner takes it (`autocast`: a context for the forward, e.g. bf16)."""
    import contextlib

    import torch

    with autocast or contextlib.nullcontext():
        losses, _ = agent(batch)
    loss = sum(losses.values())
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(agent.parameters(), 1.0)
    opt.step()
    agent.update_targets()


def run_one(
    name: str, threads: int, updates: int, device: str = "cpu", bf16: bool = False, history_coeff: float | None = None
) -> dict[str, Any]:
    """Measure one configuration in this process (`bf16`: autocast on the GPU, as `mixed_precision: bf16`)."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    c = CONFIGS[name]
    torch.set_num_threads(threads)
    with tempfile.TemporaryDirectory() as tmp:
        agent, opt, loader, batches = setup(name, Path(tmp), device, history_coeff)
        autocast = torch.autocast(device, dtype=torch.bfloat16) if bf16 else None
        with FlopCounterMode(display=False) as counter:
            update(agent, opt, batches[0], autocast)
        flops = counter.get_total_flops()
        for i in range(2):
            update(agent, opt, batches[i], autocast)
        _sync(device)
        if device == "cuda":
            torch.cuda.reset_peak_memory_stats()
        start = time.perf_counter()
        for i in range(updates):
            update(agent, opt, batches[i % len(batches)], autocast)
        _sync(device)
        seconds = (time.perf_counter() - start) / updates
        sample_start = time.perf_counter()
        for _ in range(5):
            next(loader)
        sample_ms = (time.perf_counter() - sample_start) / 5 * 1000
    params = sum(p.numel() for p in agent.parameters() if p.requires_grad)
    return {
        "config": name,
        "params_M": round(params / 1e6, 2),
        "gflop_per_update": round(flops / 1e9, 2),
        "updates_per_s": round(1 / seconds, 2),
        "timesteps_per_s": round(BATCH * c["L"] / seconds),
        "achieved_gflops": round(flops / seconds / 1e9, 1),
        "sample_ms": round(sample_ms, 1),
        "peak_rss_MB": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "peak_cuda_MB": round(torch.cuda.max_memory_allocated() / 2**20) if device == "cuda" else "-",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--updates", type=int, default=8)
    parser.add_argument("--only", nargs="*", default=None)
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument(
        "--bf16", action="store_true", help="bf16 autocast (GPU, or a CPU with AMX), MFU against the bf16 matmul rate"
    )
    parser.add_argument("--history-coeff", type=float, default=None, help="agent.history_coeff (default: the agent's)")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(run_one(args.one, args.threads, args.updates, args.device, args.bf16, args.history_coeff)))
        return
    rate = matmul_rate(args.threads, args.device, args.bf16)
    import torch

    where = torch.cuda.get_device_name() if args.device == "cuda" else f"{args.threads} CPU thread(s)"
    precision = "bf16" if args.bf16 else "fp32"
    print(f"torch {torch.__version__}, {where}, measured {precision} matmul rate {rate / 1e9:,.1f} GFLOP/s")
    history = "the default" if args.history_coeff is None else args.history_coeff
    print(
        f"batch {BATCH}; default agent: 3 gammas (0.9, 0.99, 0.999), 4 critics; 'amago-defaults': 7 gammas; "
        f"history_coeff {history}\n"
    )
    cols = [
        "config",
        "params_M",
        "gflop_per_update",
        "updates_per_s",
        "timesteps_per_s",
        "achieved_gflops",
        "mfu_%",
        "sample_ms",
        "peak_rss_MB",
        "peak_cuda_MB",
    ]
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    for name in args.only or list(CONFIGS):
        env = dict(os.environ, OMP_NUM_THREADS=str(args.threads))
        cmd = [sys.executable, __file__, "--one", name, "--threads", str(args.threads), "--updates", str(args.updates)]
        cmd += ["--device", args.device, *(["--bf16"] if args.bf16 else [])]
        cmd += [] if args.history_coeff is None else ["--history-coeff", str(args.history_coeff)]
        proc = subprocess.run(
            cmd,
            capture_output=True,
            text=True,
            env=env,
            check=False,
        )
        if proc.returncode != 0:
            print(f"| {name} | failed: {proc.stderr.strip().splitlines()[-1] if proc.stderr else proc.returncode} |")
            continue
        row = json.loads(proc.stdout.strip().splitlines()[-1])
        row["mfu_%"] = round(100 * row["achieved_gflops"] * 1e9 / rate, 1)
        print("| " + " | ".join(str(row[c]) for c in cols) + " |", flush=True)


if __name__ == "__main__":
    main()
