"""Exports: how long exporting (with verification) takes, and the per-step latency of each form.

    python benchmarks/bench_export.py [--envs 1 8] [--steps 300]

For a transformer (d_model 128, 2 layers, context 64), a GRU and a Mamba policy (untrained, CartPole-v1 spaces;
speed does not depend on the weights): export time (TorchScript + ONNX, replay verification of 4 episodes), and
milliseconds per step for N parallel envs through the original agent (`Policy`), the TorchScript program and the
ONNX program (onnxruntime, CPU), stepping `--steps` steps (past the context). One torch thread.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import gymnasium as gym
import numpy as np
import torch

from amago_pipe.config.base import to_dict
from amago_pipe.config.build import build_strict
from amago_pipe.config.nets import ModelConfig
from amago_pipe.config.train import AgentConfig
from amago_pipe.export.artifact import ONNX, TORCHSCRIPT
from amago_pipe.export.build import export_policy
from amago_pipe.export.policy import Policy
from amago_pipe.spec import from_spaces
from amago_pipe.store import Episode
from amago_pipe.train.checkpoint import save_weights
from amago_pipe.train.runtime import build_agent

ENCODERS = {
    "transformer": {"type": "transformer", "d_model": 128, "n_heads": 8, "n_layers": 2},
    "gru": {"type": "gru", "d_model": 128},
    "mamba": {"type": "mamba", "d_model": 128, "n_layers": 2},
}
CONTEXT = 64


def policy_file(folder: Path, encoder: str) -> Path:
    env = gym.make("CartPole-v1")
    spec = from_spaces(env.observation_space, env.action_space)
    model = build_strict(ModelConfig, {"traj_encoder": ENCODERS[encoder], "tstep_encoder": {"type": "ff"}})
    agent_cfg = build_strict(AgentConfig, {"type": "agent"})
    agent = build_agent(agent_cfg, model, spec, max_seq_len=CONTEXT)
    meta = {"format": 1, "spec": spec.to_json(), "model": to_dict(model), "agent": to_dict(agent_cfg),
            "max_seq_len": CONTEXT, "epoch": 0}  # fmt: skip
    path = folder / f"{encoder}.safetensors"
    save_weights(path, agent.policy_state_dict(), {k: json.dumps(v) for k, v in meta.items()})
    return path


def episodes(n: int, length: int, rng: np.random.Generator) -> list[Episode]:
    out = []
    for _ in range(n):
        obs = rng.normal(size=(length + 1, 4)).astype(np.float32)
        out.append(Episode(obs={"observation": obs}, actions=rng.integers(2, size=length), rewards=np.ones(length),
                           terminated=np.zeros(length, bool), truncated=np.zeros(length, bool)))  # fmt: skip
    return out


def time_steps(step, n: int, steps: int) -> float:  # type: ignore[no-untyped-def]
    """Milliseconds per step of `step(t)` over `steps` steps (after 5 warm-up steps)."""
    for t in range(5):
        step(t)
    start = time.perf_counter()
    for t in range(steps):
        step(t)
    return 1000 * (time.perf_counter() - start) / steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--encoders", nargs="+", default=sorted(ENCODERS), choices=sorted(ENCODERS))
    args = parser.parse_args()
    torch.set_num_threads(1)
    import onnxruntime as ort

    rng = np.random.default_rng(0)
    print(f"torch {torch.__version__}, onnxruntime {ort.__version__}, one thread; context {CONTEXT}, {args.steps} steps")
    print("| encoder | export + verify s | N envs | Policy (eager) ms/step | TorchScript ms/step | ONNX ms/step |")
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for encoder in args.encoders:
            source = policy_file(Path(tmp), encoder)
            out = Path(tmp) / f"{encoder}-export"
            start = time.perf_counter()
            manifest = export_policy(source, out, episodes=episodes(4, 2 * CONTEXT, rng), forms=["torchscript", "onnx"],
                                     tolerance=1e-3)  # fmt: skip
            export_s = time.perf_counter() - start
            policy = Policy.load(out)
            module = torch.jit.load(str(out / TORCHSCRIPT))
            options = ort.SessionOptions()
            options.intra_op_num_threads = options.inter_op_num_threads = 1
            session = ort.InferenceSession(str(out / ONNX), options, providers=["CPUExecutionProvider"])
            names = [i["name"] for i in manifest["program"]["inputs"]]
            used = {i.name for i in session.get_inputs()}
            for n in args.envs:
                obs = rng.normal(size=(n, 4)).astype(np.float32)
                policy.reset(n)
                eager = time_steps(lambda t: policy.act(obs, reward=np.ones(n) if t else None), n, args.steps)
                init = {k: v for k, v in policy.agent.model.init_state(n, "cpu").items()}
                state = [init[s["name"]] for s in manifest["program"]["state"]]
                fixed = [torch.as_tensor(obs), torch.zeros(n, dtype=torch.int64), torch.ones(n), torch.zeros(n, dtype=torch.int64)]

                def ts_step(t: int) -> None:
                    nonlocal state
                    fixed[3] = torch.full((n,), t, dtype=torch.int64)
                    with torch.no_grad():
                        _, *state = module(*fixed, *state)

                script = time_steps(ts_step, n, args.steps)
                ox_state = [s.numpy() for s in (init[s["name"]] for s in manifest["program"]["state"])]

                def onnx_step(t: int) -> None:
                    nonlocal ox_state
                    values = [obs, np.zeros(n, np.int64), np.ones(n, np.float32), np.full(n, t, np.int64), *ox_state]
                    _, *ox_state = session.run(None, {k: v for k, v in zip(names, values, strict=True) if k in used})

                onnx = time_steps(onnx_step, n, args.steps)
                print(f"| {encoder} | {export_s:.1f} | {n} | {eager:.2f} | {script:.2f} | {onnx:.2f} |", flush=True)


if __name__ == "__main__":
    main()
