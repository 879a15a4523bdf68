"""Exports: how long exporting (with verification) takes, and the per-step latency of each form.

    python benchmarks/bench_export.py [--envs 1 8] [--steps 300]

For a transformer (d_model 128, 2 layers, context 64), a GRU and a Mamba policy (untrained, CartPole-v1 spaces;
speed does not depend on the weights): export time (TorchScript + ONNX, replay verification of 4 episodes), and
milliseconds per step for N parallel envs through the original agent (`Policy`), the TorchScript, torch.export
and ONNX programs (onnxruntime, CPU), stepping `--steps` steps (past the context). One torch thread.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from amago_pipe.export.artifact import FORM_FILES, ONNX, TORCH_EXPORT, TORCHSCRIPT
from amago_pipe.export.build import export_policy
from amago_pipe.export.policy import Policy
from amago_pipe.store import Episode
from amago_pipe.testing.policies import untrained_policy_file

ENCODERS = {
    "transformer": {"type": "transformer", "d_model": 128, "n_heads": 8, "n_layers": 2},
    "gru": {"type": "gru", "d_model": 128},
    "mamba": {"type": "mamba", "d_model": 128, "n_layers": 2},
}
CONTEXT = 64


def policy_file(folder: Path, encoder: str) -> Path:
    model = {"traj_encoder": ENCODERS[encoder], "tstep_encoder": {"type": "ff"}}
    return untrained_policy_file(folder / f"{encoder}.safetensors", "CartPole-v1", model=model, max_seq_len=CONTEXT)


def episodes(n: int, length: int, rng: np.random.Generator) -> list[Episode]:
    out = []
    for _ in range(n):
        obs = rng.normal(size=(length + 1, 4)).astype(np.float32)
        out.append(Episode(obs={"observation": obs}, actions=rng.integers(2, size=length), rewards=np.ones(length),
                           terminated=np.zeros(length, bool), truncated=np.zeros(length, bool)))  # fmt: skip
    return out


def time_steps(step, steps: int) -> float:  # type: ignore[no-untyped-def]
    """Milliseconds per step of `step(t)` over `steps` steps (after 5 warm-up steps)."""
    for t in range(5):
        step(t)
    start = time.perf_counter()
    for t in range(steps):
        step(t)
    return 1000 * (time.perf_counter() - start) / steps


def latencies(out: Path, manifest: dict, n: int, steps: int, rng: np.random.Generator) -> dict[str, float]:  # type: ignore[type-arg]
    """ms/step of N envs through `Policy` and each program of the export in `out`."""
    import onnxruntime as ort

    obs = rng.normal(size=(n, 4)).astype(np.float32)
    policy = Policy.load(out)
    policy.reset(n)
    result = {"eager": time_steps(lambda t: policy.act(obs, reward=np.ones(n)), steps)}
    init = policy.agent.model.init_state(n, "cpu")
    names = [s["name"] for s in manifest["program"]["state"]]
    for form, module in (
        ("torchscript", torch.jit.load(str(out / TORCHSCRIPT))),
        ("torch_export", torch.export.load(out / TORCH_EXPORT).module()),
    ):
        state = [init[k].clone() for k in names]

        def torch_step(t: int, module=module, state=state) -> None:  # type: ignore[no-untyped-def]
            inputs = [torch.as_tensor(obs), torch.zeros(n, dtype=torch.int64), torch.ones(n), torch.full((n,), t)]
            with torch.no_grad():
                _, *new = module(*inputs, *state)
            state[:] = new

        result[form] = time_steps(torch_step, steps)
    options = ort.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    session = ort.InferenceSession(str(out / ONNX), options, providers=["CPUExecutionProvider"])
    inputs = [i["name"] for i in manifest["program"]["inputs"]]
    used = {i.name for i in session.get_inputs()}
    ox_state = [init[k].numpy() for k in names]

    def onnx_step(t: int) -> None:
        values = [obs, np.zeros(n, np.int64), np.ones(n, np.float32), np.full(n, t, np.int64), *ox_state]
        _, *new = session.run(None, {k: v for k, v in zip(inputs, values, strict=True) if k in used})
        ox_state[:] = new

    result["onnx"] = time_steps(onnx_step, steps)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--encoders", nargs="+", default=sorted(ENCODERS), choices=sorted(ENCODERS))
    args = parser.parse_args()
    torch.set_num_threads(1)
    import onnxruntime as ort

    rng = np.random.default_rng(0)
    print(
        f"torch {torch.__version__}, onnxruntime {ort.__version__}, one thread; context {CONTEXT}, {args.steps} steps"
    )
    print("| encoder | export + verify s | N envs | Policy (eager) | TorchScript | torch.export | ONNX | (ms/step) |")
    print("|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for encoder in args.encoders:
            source = policy_file(Path(tmp), encoder)
            out = Path(tmp) / f"{encoder}-export"
            start = time.perf_counter()
            manifest = export_policy(source, out, episodes=episodes(4, 2 * CONTEXT, rng), forms=list(FORM_FILES),
                                     tolerance=1e-3)  # fmt: skip
            export_s = time.perf_counter() - start
            for n in args.envs:
                ms = latencies(out, manifest, n, args.steps, rng)
                print(f"| {encoder} | {export_s:.1f} | {n} | {ms['eager']:.2f} | {ms['torchscript']:.2f} | "
                      f"{ms['torch_export']:.2f} | {ms['onnx']:.2f} | |", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
