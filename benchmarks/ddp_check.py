"""Data-parallel proof on CPU: the train stage's Learner under `torchrun --nproc_per_node 2` (gloo) vs one process.

    python benchmarks/ddp_check.py            # makes a synthetic store, runs both, prints a comparison table

Checks that both ranks end with identical weights (gradients were averaged) and compares losses and
throughput with a single process using the same global batch (2 x 12 vs 1 x 24). Validation (rank 0 only) is
scripted to peak at epoch 1 with `patience: 1`, so every run must stop early after epoch 2 of 4 together, and the
two-rank run resumed afterwards must train nothing more.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def make_store(path: Path) -> None:
    import numpy as np

    from amago_pipe.spec import ActionSpec, ArraySpec, DataSpec
    from amago_pipe.store import Episode, TrajectoryStore

    spec = DataSpec({"observation": ArraySpec((4,), "float32")}, ActionSpec("discrete", (), n=2))
    store = TrajectoryStore.create(path, spec)
    rng = np.random.default_rng(0)
    with store.writer("protected") as w:
        for _ in range(60):
            T = int(rng.integers(20, 200))
            obs = rng.normal(size=(T + 1, 4)).astype(np.float32)
            actions = (obs[:-1, 2] > 0).astype(np.int64)
            ends = np.zeros(T, bool)
            ends[-1] = True
            w.add(
                Episode(
                    obs={"observation": obs},
                    actions=actions,
                    rewards=np.ones(T, np.float32),
                    terminated=ends,
                    truncated=np.zeros(T, bool),
                )
            )


def worker(store: str, out: str, batch: int, updates: int) -> None:
    """One rank: train with the Learner, then write a digest of its weights."""
    import torch

    from amago_pipe.config.envs import EnvConfig
    from amago_pipe.config.nets import FFTstepConfig, ModelConfig, TransformerConfig
    from amago_pipe.config.train import AgentConfig, LoggingConfig, TrainStageConfig, ValidateConfig
    from amago_pipe.store import TrajectoryStore
    from amago_pipe.train.learner import Learner, LearnerHooks

    torch.set_num_threads(1)
    cfg = TrainStageConfig(
        max_seq_len=32,
        batch_size=batch,
        epochs=4,
        updates_per_epoch=updates // 2,
        warmup_steps=10,
        device="cpu",
        model=ModelConfig(
            tstep_encoder=FFTstepConfig(d_hidden=64, d_output=64),
            traj_encoder=TransformerConfig(d_model=64, n_heads=4, n_layers=2),
        ),
        agent=AgentConfig(online_coeff=0.0, offline_coeff=1.0),  # the `exp` filter (the default)
        logging=LoggingConfig(log_interval=10, plots=False),
        validate=ValidateConfig(env=EnvConfig(id="CartPole-v1"), every=1, patience=1),
    )
    hooks = LearnerHooks(validate=lambda agent, epoch: {"return_mean": 1.0 if epoch == 1 else 0.0})
    learner = Learner(cfg, TrajectoryStore.open(store), Path(out), seed=0, hooks=hooks)
    start = time.perf_counter()
    learner.resume()  # the second two-rank run resumes the first
    metrics = learner.run()
    seconds = time.perf_counter() - start
    digest = hashlib.sha256()  # parameters only: buffers (running norms) follow rank 0 at every forward
    for k, v in sorted(learner.agent.named_parameters()):
        digest.update(k.encode() + v.detach().cpu().numpy().tobytes())
    rank = learner.rt.rank
    Path(out).mkdir(parents=True, exist_ok=True)
    (Path(out) / f"rank{rank}.json").write_text(
        json.dumps(
            {
                "rank": rank,
                "world": learner.rt.world_size,
                "digest": digest.hexdigest(),
                "seconds": seconds,
                **metrics,
            }
        )
    )


def run_group(cmd: list[str], env: dict[str, str], *, timeout: float) -> None:
    """Run `cmd` in its own process group; on a hang kill the whole group (the launcher and its ranks)."""
    proc = subprocess.Popen(
        cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        _, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        sys.exit(f"the two-rank run did not finish in {timeout:.0f} s (a rank waiting on the other?); killed")
    if proc.returncode:
        sys.exit(f"the two-rank run failed (exit {proc.returncode}):\n{err[-3000:]}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--worker", nargs=2, metavar=("STORE", "OUT"))
    parser.add_argument("--batch", type=int, default=24)
    parser.add_argument("--updates", type=int, default=60)
    args = parser.parse_args()
    if args.worker:
        worker(*args.worker, batch=args.batch, updates=args.updates)
        return
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(REPO))
    with tempfile.TemporaryDirectory() as tmp:
        store = Path(tmp) / "s.zarr"
        make_store(store)
        me = [sys.executable, __file__, "--updates", str(args.updates)]
        ddp = [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nproc_per_node",
            "2",
            "--master_port",
            "29533",
            __file__,
            "--updates",
            str(args.updates),
            "--batch",
            str(args.batch // 2),
            "--worker",
            str(store),
            f"{tmp}/ddp",
        ]
        run_group(ddp, env, timeout=300)
        subprocess.run([*me, "--batch", str(args.batch), "--worker", str(store), f"{tmp}/single"], env=env, check=True)
        rows = [json.loads((Path(tmp) / "ddp" / f"rank{r}.json").read_text()) for r in (0, 1)]
        single = json.loads((Path(tmp) / "single" / "rank0.json").read_text())
        run_group(ddp, env, timeout=300)  # resumed with its patience spent: both ranks must stop before training
        resumed = [json.loads((Path(tmp) / "ddp" / f"rank{r}.json").read_text()) for r in (0, 1)]
    same = rows[0]["digest"] == rows[1]["digest"]
    print(f"ranks hold identical parameters after training: {same}")
    print("| run | processes x batch | updates | seconds | updates/s | final critic loss | final actor loss |")
    print("|---|---|---|---|---|---|---|")
    for name, r, b in (
        ("single", single, args.batch),
        ("ddp rank 0", rows[0], args.batch // 2),
        ("ddp rank 1", rows[1], args.batch // 2),
    ):
        print(
            f"| {name} | {r['world']} x {b} | {r['steps']} | {r['seconds']:.1f} | {r['steps'] / r['seconds']:.2f} | "
            f"{r['critic_loss']:.4f} | {r['actor_loss']:.4f} |"
        )
    stops = {r.get("stopped_early") for r in (*rows, single, *resumed)}
    more = {r["steps"] for r in resumed} != {rows[0]["steps"]}
    print(f"every run stopped early after epoch 2 of 4 (validation patience): {stops == {2}}")
    print(f"a resumed two-rank run trained nothing more: {not more}")
    if not same:
        sys.exit("data-parallel ranks diverged")
    if stops != {2} or more:
        sys.exit(f"the runs stopped early after epochs {stops}, expected all after epoch 2 (resumed: {resumed})")


if __name__ == "__main__":
    main()
