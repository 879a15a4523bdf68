"""`compile: true` on this machine: thread CPU time per learner update, eager vs `torch.compile(agent.forward)` (what
the train stage's `compile: true` does), for configurations of bench_learner.py, 1 thread. Prints a Markdown table.

    python benchmarks/bench_compile.py tf128-L64-discrete tf128-L64-continuous
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_learner


def measure(name: str, compiled: bool, updates: int) -> tuple[float, float]:
    """(CPU seconds per update after warm-up, CPU seconds of the 3 warm-up updates, compilation included)."""
    import torch

    with tempfile.TemporaryDirectory() as tmp:
        agent, opt, _, batches = bench_learner.setup(name, Path(tmp))
        if compiled:
            agent.forward = torch.compile(agent.forward)
        start = time.thread_time()
        for i in range(3):
            bench_learner.update(agent, opt, batches[i % len(batches)])
        warm = time.thread_time() - start
        start = time.thread_time()
        for i in range(updates):
            bench_learner.update(agent, opt, batches[i % len(batches)])
        return (time.thread_time() - start) / updates, warm


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("configs", nargs="+", choices=sorted(bench_learner.CONFIGS))
    parser.add_argument("--updates", type=int, default=12)
    args = parser.parse_args()
    import torch

    torch.set_num_threads(1)
    print("| config | eager CPU ms/update | compiled CPU ms/update | compiled / eager | compiled warm-up CPU s |")
    print("|---|---|---|---|---|")
    for name in args.configs:
        eager, _ = measure(name, False, args.updates)
        compiled, warm = measure(name, True, args.updates)
        print(
            f"| {name} | {eager * 1e3:.0f} | {compiled * 1e3:.0f} | {compiled / eager:.2f} | {warm:.1f} |", flush=True
        )


if __name__ == "__main__":
    main()
