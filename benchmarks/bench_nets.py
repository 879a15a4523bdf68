"""Network throughput and memory: trajectory encoders (train + rollout), attention backends, critic ensemble.

Training: forward+backward timesteps/s, autograd-saved activation MB and peak RSS (CPU; one subprocess per
encoder and width) or peak CUDA memory, batch 24, 3 layers, d_model 128/256, L = 64/256/1024. Rollout:
ms per step with the cache as the context grows. On a GPU it adds bf16 long-context cases up to L=8192.
`--quick` runs d_model 128 and L <= 256 only. Prints markdown tables.

    python benchmarks/bench_nets.py [--quick] [--threads N] [--device cpu|cuda] [--gpu-only]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import torch

from amago_pipe.config.nets import (
    CriticHeadConfig,
    FFTrajConfig,
    GruConfig,
    MambaConfig,
    TrajEncoderConfig,
    TransformerConfig,
)
from amago_pipe.nets import build_critic_head, build_traj_encoder
from amago_pipe.spec import ActionSpec

BATCH, LAYERS = 24, 3
ENCODERS = ("ff", "gru", "transformer", "mamba")


def encoder_config(name: str, d_model: int, **extra: Any) -> TrajEncoderConfig:
    if name == "ff":
        return FFTrajConfig(d_model=d_model, n_layers=LAYERS)
    if name == "gru":
        return GruConfig(d_model=d_model, n_layers=LAYERS)
    if name == "mamba":
        return MambaConfig(d_model=d_model, n_layers=LAYERS, **extra)
    return TransformerConfig(d_model=d_model, n_layers=LAYERS, **extra)


def sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def timed(fn: Callable[[], object], reps: int, device: str, warmup: int = 1) -> float:
    """Median seconds of `reps` calls after `warmup` calls."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(reps):
        sync(device)
        t0 = time.perf_counter()
        fn()
        sync(device)
        times.append(time.perf_counter() - t0)
    return sorted(times)[len(times) // 2]


def saved_activation_mb(fn: Callable[[], torch.Tensor]) -> float:
    """MB of distinct tensor storages autograd saves for backward in one forward (checkpointed ones excluded)."""
    seen: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        storage = t.untyped_storage()
        seen[storage.data_ptr()] = storage.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        fn()
    return sum(seen.values()) / 2**20


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def train_step_fn(enc: torch.nn.Module, seq: torch.Tensor, time_idx: torch.Tensor, amp: bool) -> Callable[[], Any]:
    def step() -> torch.Tensor:
        with torch.autocast(seq.device.type, dtype=torch.bfloat16, enabled=amp):
            out, _ = enc(seq, time_idx)
        loss = out.float().square().mean()
        loss.backward()
        return out

    return step


def train_cases(
    name: str, d_model: int, lengths: list[int], device: str, amp: bool = False, **extra: Any
) -> list[dict]:
    """Forward+backward of one encoder at growing L; memory per case (peak RSS is cumulative on CPU)."""
    rows = []
    base_rss = rss_mb()
    for length in lengths:
        torch.manual_seed(0)
        enc = build_traj_encoder(encoder_config(name, d_model, **extra), d_model, max(lengths)).to(device).train()
        seq = torch.randn(BATCH, length, d_model, device=device)
        time_idx = torch.arange(length, device=device).repeat(BATCH, 1)
        step = train_step_fn(enc, seq, time_idx, amp)
        if device == "cuda":
            torch.cuda.reset_peak_memory_stats()
        try:
            short = length <= 256 or device == "cuda"
            secs = timed(step, reps=3 if short else 1, device=device, warmup=1 if short else 0)
        except torch.OutOfMemoryError:
            rows.append({"encoder": name, "d_model": d_model, "L": length, "error": "OOM"})
            torch.cuda.empty_cache()
            continue
        peak = torch.cuda.max_memory_allocated() / 2**20 if device == "cuda" else rss_mb() - base_rss
        saved = saved_activation_mb(lambda s=step: s())  # type: ignore[misc]
        rows.append(
            {
                "encoder": name,
                "d_model": d_model,
                "L": length,
                "tokens_per_s": BATCH * length / secs,
                "ms": secs * 1e3,
                "saved_mb": saved,
                "peak_mb": peak,
                **extra,
            }
        )
    return rows


def worker(args: argparse.Namespace) -> None:
    """Subprocess entry: one encoder and width, printing one JSON line per case (isolates peak RSS)."""
    torch.set_num_threads(args.threads)
    lengths = [int(v) for v in args.lengths.split(",")]
    train_cases(args.worker, 16, [8], "cpu")  # import and initialise everything before the RSS baseline
    for row in train_cases(args.worker, args.d_model, lengths, "cpu"):
        print(json.dumps(row), flush=True)


def train_table(args: argparse.Namespace, lengths: list[int], widths: list[int]) -> list[dict]:
    rows: list[dict] = []
    for d_model in widths:
        for name in ENCODERS:
            if args.device == "cuda":
                rows += train_cases(name, d_model, lengths, "cuda")
                continue
            cmd = [sys.executable, __file__, "--worker", name, "--d-model", str(d_model), "--threads", str(args.threads),
                   "--lengths", ",".join(map(str, lengths))]  # fmt: skip
            out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
            rows += [json.loads(line) for line in out.splitlines() if line.startswith("{")]
            print(f"  trained {name} d{d_model}", file=sys.stderr, flush=True)
    return rows


@torch.no_grad()
def rollout_table(contexts: list[int], device: str) -> list[dict]:
    """ms per single step with the cache after `context` steps; the transformer also without a cache."""
    rows = []
    for name in ENCODERS:
        enc = build_traj_encoder(encoder_config(name, 128), 128, max(contexts)).to(device).eval()
        for context in contexts:
            state = enc.init_state(BATCH, device)
            for start in range(0, context, 256):  # prefill in chunks
                n = min(256, context - start)
                idx = torch.arange(start, start + n, device=device).repeat(BATCH, 1)
                _, state = enc(torch.randn(BATCH, n, 128, device=device), idx, state)
            x, t = torch.randn(BATCH, 1, 128, device=device), torch.full((BATCH, 1), context, device=device)
            holder = [state]

            def one_step(enc: Any = enc, x: torch.Tensor = x, t: torch.Tensor = t, holder: list = holder) -> None:
                _, holder[0] = enc(x, t, holder[0])  # the context grows by one per call (11 in all)

            row = {"encoder": name, "context": context, "step_ms": timed(one_step, 10, device) * 1e3}
            if name == "transformer":
                full = torch.randn(BATCH, context + 1, 128, device=device)
                idx = torch.arange(context + 1, device=device).repeat(BATCH, 1)
                row["recompute_ms"] = timed(lambda e=enc, f=full, i=idx: e(f, i), 1, device) * 1e3
            rows.append(row)
    return rows


def critic_table(device: str, quick: bool) -> list[dict]:
    """AMAGO's default critic load: K=4 critics x G=7 gammas, d_state 256, hidden 256, B=24, L=256 (128 quick)."""
    length, d_state, G, K = (128 if quick else 256), 256, 7, 4
    action = ActionSpec("continuous", (6,), low=(-1.0,) * 6, high=(1.0,) * 6)
    state = torch.randn(BATCH, length, d_state, device=device)
    per_gamma = torch.rand(BATCH, length, G, 6, device=device) * 2 - 1
    rows = []
    for label, cfg, act in [
        ("fused, per-gamma actions", CriticHeadConfig(num_critics=K), per_gamma),
        ("fused, one shared action", CriticHeadConfig(num_critics=K), per_gamma[:, :, 0]),
        ("fused, 128 bins, per-gamma", CriticHeadConfig(num_critics=K, output="bins"), per_gamma),
    ]:
        critic = build_critic_head(cfg, d_state, action, G).to(device)
        secs = timed(lambda c=critic, a=act: c(state, a).float().square().mean().backward(), 3, device)
        rows.append({"variant": label, "ms": secs * 1e3, "tokens_per_s": BATCH * length / secs})
    loop = [build_critic_head(CriticHeadConfig(num_critics=1), d_state, action, G).to(device) for _ in range(K)]

    def python_loop() -> None:
        torch.stack([c(state, per_gamma) for c in loop]).square().mean().backward()

    secs = timed(python_loop, 3, device)
    rows.append({"variant": "python loop over K critics", "ms": secs * 1e3, "tokens_per_s": BATCH * length / secs})
    return rows


def attention_table(lengths: list[int], device: str, amp: bool) -> list[dict]:
    variants: list[tuple[str, dict]] = [
        ("sdpa", {}),
        ("vanilla", {"attention": "vanilla"}),
        ("sdpa, window 128", {"window": 128}),
    ]
    if device == "cuda":
        variants.append(("flash", {"attention": "flash"}))
    rows = []
    for label, extra in variants:
        try:
            for row in train_cases("transformer", 128, lengths, device, amp=amp, **extra):
                rows.append({**row, "backend": label})
        except Exception as e:  # flash-attn missing or unsupported: show why, keep going
            rows.append({"backend": label, "L": "-", "error": f"{type(e).__name__}: {str(e)[:60]}"})
    return rows


def options_table(device: str) -> list[dict]:
    """Cost of the transformer's stability options at d_model 128, L=256 (to justify the defaults)."""
    variants = [
        ("default (4 heads, sigma-reparam, NormFormer, dropout 0.05)", {}),
        ("no sigma-reparam", {"sigma_reparam": False}),
        ("no NormFormer norms / head scaling", {"normformer_norms": False, "head_scaling": False}),
        ("8 heads", {"n_heads": 8}),
        ("no dropout", {"dropout_ff": 0.0, "dropout_emb": 0.0}),
        ("rope instead of sinusoidal", {"pos_emb": "rope"}),
    ]
    rows = []
    for label, extra in variants:
        row = train_cases("transformer", 128, [256], device, **extra)[0]
        rows.append({"variant": label, "tokens_per_s": row["tokens_per_s"], "saved_mb": row["saved_mb"]})
    return rows


def table(rows: list[dict], cols: list[tuple[str, str, str]]) -> str:
    head = "| " + " | ".join(title for _, title, _ in cols) + " |\n|" + "---|" * len(cols) + "\n"
    body = ""
    for r in rows:
        cells = []
        for key, _, fmt in cols:
            value = r.get(key)
            if value is None:
                value = r.get("error", "-") if key == "tokens_per_s" else ""
            cells.append(format(value, fmt) if isinstance(value, int | float) else str(value))
        body += "| " + " | ".join(cells) + " |\n"
    return head + body


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--threads", type=int, default=torch.get_num_threads())
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--gpu-only", action="store_true", help="only the bf16 long-context GPU tables")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    p.add_argument("--d-model", type=int, default=128, help=argparse.SUPPRESS)
    p.add_argument("--lengths", default="64", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        return worker(args)
    torch.set_num_threads(args.threads)
    lengths = [64, 256] if args.quick else [64, 256, 1024]
    widths = [128] if args.quick else [128, 256]
    t0 = time.perf_counter()
    print(f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, torch threads {args.threads}, "
          f"load average {os.getloadavg()[0]:.1f}; device {args.device}; python {platform.python_version()}, "
          f"torch {torch.__version__}\n")  # fmt: skip
    if args.gpu_only:
        return gpu_tables()
    train = train_table(args, lengths, widths)
    print("#### Training: forward+backward, batch 24, 3 layers\n")
    print(table(train, [("encoder", "encoder", ""), ("d_model", "d_model", ""), ("L", "L", ""),
                        ("tokens_per_s", "timesteps/s", ",.0f"), ("ms", "ms/step", ".0f"),
                        ("saved_mb", "saved activations MB", ",.0f"), ("peak_mb", "peak memory MB", ",.0f")]))  # fmt: skip
    print("#### Rollout: one step (batch 24, d_model 128) with the state after `context` steps\n")
    roll = rollout_table([64, 256] if args.quick else [64, 256, 1024], args.device)
    print(table(roll, [("encoder", "encoder", ""), ("context", "context", ""), ("step_ms", "ms/step (cache)", ".2f"),
                       ("recompute_ms", "ms/step (recompute, no cache)", ".1f")]))  # fmt: skip
    print("#### Transformer attention backends, d_model 128, batch 24\n")
    att = attention_table([256] if args.quick else [256, 1024], args.device, amp=False)
    print(table(att, [("backend", "backend", ""), ("L", "L", ""), ("tokens_per_s", "timesteps/s", ",.0f"),
                      ("saved_mb", "saved activations MB", ",.0f")]))  # fmt: skip
    print("#### Transformer options, d_model 128, L 256\n")
    print(table(options_table(args.device), [("variant", "variant", ""), ("tokens_per_s", "timesteps/s", ",.0f"),
                                             ("saved_mb", "saved activations MB", ",.0f")]))  # fmt: skip
    print("#### Critic ensemble, K=4 x G=7, d_state 256, hidden 256 x 2, forward+backward\n")
    print(table(critic_table(args.device, args.quick), [("variant", "variant", ""), ("ms", "ms", ".1f"),
                                                        ("tokens_per_s", "timesteps/s", ",.0f")]))  # fmt: skip
    if args.device == "cuda":
        gpu_tables()
    print(f"total {time.perf_counter() - t0:.0f} s", file=sys.stderr)


def gpu_tables() -> None:
    """bf16 long context: attention backends up to L=8192, mamba-ssm kernels vs the PyTorch scan."""
    long = [1024, 2048, 4096, 8192]
    att = attention_table(long, "cuda", amp=True)
    print("#### GPU, bf16: attention backends at long context, d_model 128, batch 24\n")
    print(table(att, [("backend", "backend", ""), ("L", "L", ""), ("tokens_per_s", "timesteps/s", ",.0f"),
                      ("peak_mb", "peak CUDA MB", ",.0f")]))  # fmt: skip
    rows = []
    for backend in ("cuda", "torch"):
        try:
            rows += [
                {**r, "backend": backend}
                for r in train_cases("mamba", 128, [1024, 4096], "cuda", amp=True, backend=backend)
            ]
        except Exception as e:
            rows.append({"backend": backend, "L": "-", "error": f"{type(e).__name__}: {str(e)[:60]}"})
    print("#### GPU, bf16: Mamba, mamba-ssm kernels vs PyTorch scan, d_model 128, batch 24\n")
    print(table(rows, [("backend", "backend", ""), ("L", "L", ""), ("tokens_per_s", "timesteps/s", ",.0f"),
                       ("peak_mb", "peak CUDA MB", ",.0f")]))  # fmt: skip


if __name__ == "__main__":
    main()
