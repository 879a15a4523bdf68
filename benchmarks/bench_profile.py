"""Where one learner update's CPU time goes, per configuration of `bench_learner.py`: timestep encoder, sequence
model, critics (online, target), actors, TD targets, backward, optimiser step, Polyak updates and the rest.

1 thread; each part is the thread CPU time (`time.thread_time`) between forward hooks on the agent's modules (the
agent's code is not touched), so a part holds everything its module does (a critic pass includes its action
features). `forward, other` is the agent's forward outside those modules (loss terms, PopArt, glue); `backward`
runs from the forward's end to the optimiser step (loss sum, zero_grad, autograd, grad clipping). `outside ops`
is, from a separate torch.profiler pass, the share of the update outside aten and oneDNN operators' own time (Python,
dispatch, autograd bookkeeping). Prints Markdown tables (shares of the update, %).

    python benchmarks/bench_profile.py                     # the four default configs, default and matched agent
    python benchmarks/bench_profile.py --only tf128-L64-continuous --agent matched --updates 6
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import bench_learner
from _compare_worker import MATCHED

DEFAULT_CONFIGS = ["tf128-L64-discrete", "tf256-L128-discrete", "tf128-L64-continuous", "amago-defaults-continuous"]
MODULE_PARTS = {
    "model.tstep_encoder": "tstep encoder",
    "model.traj_encoder": "sequence model",
    "critic": "critic",
    "target_critic": "target critic",
    "actor": "actor",
    "target_actor": "target actor",
    "history": "history head",
}
"""Agent submodules timed by forward hooks -> their part's name (the tstep encoder through `embed`, the history head
through `loss`: the methods the update calls)."""
METHODS = {"tstep encoder": "embed", "history head": "loss"}
PARTS = [*MODULE_PARTS.values(), "TD targets", "forward, other", "backward", "optimiser step", "Polyak updates"]


def matched(cfg: Any) -> Any:
    """`cfg` with `_compare_worker.MATCHED`'s options: the update matched to AMAGO's."""
    changes = {k: dataclasses.replace(getattr(cfg, k), **v) if isinstance(v, dict) else v for k, v in MATCHED.items()}
    return dataclasses.replace(cfg, **changes)


class PartClock:
    """Thread CPU seconds per part, from hooks on an agent and its optimiser."""

    def __init__(self, agent: Any, opt: Any):
        self.seconds: dict[str, float] = defaultdict(float)
        self._open: dict[str, float] = {}
        self._forward_end = 0.0
        for path, part in MODULE_PARTS.items():
            module = getattr(agent.model, path.split(".")[1]) if path.startswith("model.") else getattr(agent, path)
            if module is None:  # no history head
                continue
            if part in METHODS:
                setattr(module, METHODS[part], self._timed(part, getattr(module, METHODS[part])))
            else:
                module.register_forward_pre_hook(lambda *_, p=part: self._start(p))
                module.register_forward_hook(lambda *_, p=part: self._stop(p))
        agent.targets = self._timed("TD targets", agent.targets)
        agent.update_targets = self._timed("Polyak updates", agent.update_targets)
        agent.register_forward_pre_hook(lambda *_: self._start("forward"))
        agent.register_forward_hook(lambda *_: self._end_forward())
        opt.register_step_pre_hook(lambda *_: self._begin_step())
        opt.register_step_post_hook(lambda *_: self._stop("optimiser step"))

    def _start(self, part: str) -> None:
        self._open[part] = time.thread_time()

    def _stop(self, part: str) -> None:
        self.seconds[part] += time.thread_time() - self._open.pop(part)

    def _timed(self, part: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            self._start(part)
            try:
                return fn(*args, **kwargs)
            finally:
                self._stop(part)

        return timed

    def _end_forward(self) -> None:
        self._stop("forward")
        self._forward_end = time.thread_time()

    def _begin_step(self) -> None:
        self.seconds["backward"] += time.thread_time() - self._forward_end
        self._start("optimiser step")

    def shares(self, total: float) -> dict[str, float]:
        """% of `total` per part; the forward's own time is what its timed modules and targets leave."""
        inner = sum(self.seconds[p] for p in [*MODULE_PARTS.values(), "TD targets"])
        parts = dict(self.seconds, **{"forward, other": self.seconds["forward"] - inner})
        return {p: 100 * parts.get(p, 0.0) / total for p in PARTS}


def outside_ops(agent: Any, opt: Any, batches: list[Any]) -> float:
    """% of two updates' time outside aten and oneDNN operators' self time (torch.profiler's times are wall-clock,
    so this is too; the profiler's own cost per op counts partly inside, partly outside)."""
    from torch.profiler import ProfilerActivity, profile

    start = time.perf_counter()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for batch in batches[:2]:
            bench_learner.update(agent, opt, batch)
    total_us = (time.perf_counter() - start) * 1e6
    ops_us = sum(e.self_cpu_time_total for e in prof.key_averages() if e.key.startswith(("aten::", "mkldnn::")))
    return max(0.0, 100 * (1 - ops_us / total_us))


def profile_one(name: str, agent_kind: str, updates: int) -> dict[str, Any]:
    """Shares of one configuration's update (`agent_kind`: `defaults` or `matched`), after 2 warm-up updates."""
    import torch

    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        overrides = matched if agent_kind == "matched" else None
        agent, opt, _, batches = bench_learner.setup(name, Path(tmp), agent_overrides=overrides)
        for batch in batches[:2]:
            bench_learner.update(agent, opt, batch)
        clock = PartClock(agent, opt)
        start = time.thread_time()
        for i in range(updates):
            bench_learner.update(agent, opt, batches[i % len(batches)])
        total = time.thread_time() - start
        shares = clock.shares(total)
        outside = outside_ops(agent, opt, batches)
    return {
        "config": name,
        "agent": agent_kind,
        "ms_per_update": 1000 * total / updates,
        **shares,
        "outside ops": outside,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", default=None, help=f"configs (default: {' '.join(DEFAULT_CONFIGS)})")
    parser.add_argument("--agent", choices=["defaults", "matched", "both"], default="both")
    parser.add_argument("--updates", type=int, default=4)
    parser.add_argument("--json", help="also write the rows as JSON here")
    args = parser.parse_args()
    kinds = ["defaults", "matched"] if args.agent == "both" else [args.agent]
    cols = ["config", "agent", "ms/update", *PARTS, "outside ops"]
    print("Shares of one update's thread CPU time, % (1 thread; 'matched': _compare_worker.MATCHED)\n")
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    rows = []
    for name in args.only or DEFAULT_CONFIGS:
        for kind in kinds:
            row = profile_one(name, kind, args.updates)
            rows.append(row)
            cells = [name, kind, f"{row['ms_per_update']:.0f}", *(f"{row[p]:.1f}" for p in [*PARTS, "outside ops"])]
            print("| " + " | ".join(cells) + " |", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
