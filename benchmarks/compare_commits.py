"""Compare two commits: the learner, rollout and store benchmarks of BASE and HEAD in interleaved windows, as
HEAD/BASE ratios of work units per CPU-second of each process (robust to a machine shared with other jobs).

    python benchmarks/compare_commits.py f691b07                 # f691b07 vs the working tree
    python benchmarks/compare_commits.py f691b07 HEAD --windows 5 --seconds 8
    python benchmarks/compare_commits.py HEAD~3 --only learner,store
    python benchmarks/compare_commits.py HEAD --quick            # a smoke run of the harness at tiny sizes
    python benchmarks/compare_commits.py f691b07 --head-bf16 --only learner   # HEAD as `mixed_precision: bf16`

BASE (and HEAD, when given) is checked out into a temporary git worktree, removed at the end, also on Ctrl-C.
HEAD defaults to the working tree, uncommitted changes included. Both run under this venv with PYTHONPATH set to
their tree, one thread each; one copy of `_compare_worker.py` (this folder's) drives both, through APIs stable
since f691b07. Each config of each commit is one worker process (built once, then timed window by window); the
windows alternate BASE, HEAD, HEAD, BASE, ... so neither side always goes first. Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _compare_worker import DEFAULT_SET, LEARNER, OTHERS, describe  # noqa: E402

GROUPS = ("learner", "rollout", "store")
ALL_CONFIGS = [*LEARNER, *OTHERS]


class CompareError(RuntimeError):
    """A comparison that cannot start or go on (bad revision, a worker that died, the wrong package imported)."""


class WrongPackage(CompareError):
    """A worker imported `amago_pipe` from outside its side's tree: every measurement would be wrong."""


@dataclass
class Side:
    """One of the two commits: a label and the tree its `amago_pipe` is imported from."""

    label: str
    tree: Path


@dataclass
class Worker:
    """A worker process of one side hosting some configs; `errors`: configs it could not build."""

    side: Side
    proc: subprocess.Popen[str]
    log: Path
    errors: dict[str, str] = field(default_factory=dict)

    def read(self) -> dict[str, Any]:
        """The next protocol record of the worker (its other output is ignored)."""
        stdout: IO[str] = self.proc.stdout  # type: ignore[assignment]
        for line in stdout:
            if line.startswith("@@ "):
                return json.loads(line[3:])
        tail = self.log.read_text(errors="replace").strip().splitlines()[-15:]
        raise CompareError(f"the {self.side.label} worker exited ({self.proc.wait()}):\n" + "\n".join(tail))

    def run(self, config: str, seconds: float) -> dict[str, Any]:
        stdin: IO[str] = self.proc.stdin  # type: ignore[assignment]
        stdin.write(f"run {config} {seconds}\n")
        stdin.flush()
        return self.read()

    def stop(self) -> None:
        """`quit` to an idle worker; one still busy in a window (interrupted) is terminated after 2 s."""
        try:
            if self.proc.poll() is None and self.proc.stdin is not None:
                self.proc.stdin.write("quit\n")
                self.proc.stdin.close()
            self.proc.wait(timeout=2)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def git(repo: Path, *args: str) -> str:
    proc = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise CompareError(f"git {' '.join(args)}: {proc.stderr.strip() or proc.returncode}")
    return proc.stdout.strip()


def checkout(repo: Path, rev: str, tmp: Path, role: str, trees: list[Path]) -> Side:
    """`rev` checked out (detached) in a worktree under `tmp`; the worktree is added to `trees` for removal."""
    try:
        sha = git(repo, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
    except CompareError:
        sha = ""
    if not sha:
        raise CompareError(f"{role.upper()} '{rev}': not a commit of {repo}")
    path = tmp / role
    git(repo, "worktree", "add", "--detach", "--quiet", str(path), sha)
    trees.append(path)
    short = git(repo, "rev-parse", "--short", sha)
    return Side(short if sha.startswith(rev.lower()) else f"{rev} ({short})", path)


def working_tree(repo: Path) -> Side:
    sha = git(repo, "rev-parse", "--short", "HEAD")
    dirty = git(repo, "status", "--porcelain", "--", "amago_pipe", "converters")
    return Side(f"working tree ({sha}{' + changes' if dirty else ''})", repo)


def start(side: Side, configs: list[str], quick: bool, tmp: Path, bf16: bool = False) -> Worker:
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", PYTHONHASHSEED="0")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(side.tree), os.environ.get("PYTHONPATH", "")) if p)
    log = Path(tempfile.mkstemp(prefix="worker_", suffix=".log", dir=tmp)[1])
    flags = [*(["--quick"] if quick else []), *(["--bf16"] if bf16 else [])]
    cmd = [sys.executable, str(HERE / "_compare_worker.py"), ",".join(configs), *flags]
    with log.open("w") as err:
        proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, text=True, env=env, cwd=tmp
        )
    return Worker(side, proc, log)


def ready(worker: Worker) -> None:
    """Wait until `worker` has built its configs; check it imported its own side's package."""
    hello = worker.read()
    package = Path(hello["package"])
    if not package.is_relative_to(worker.side.tree.resolve()):
        raise WrongPackage(f"{worker.side.label}: the worker imported amago_pipe from {package}, not its tree")
    worker.errors = hello["errors"]


def measure(workers: tuple[Worker, Worker], config: str, windows: int, seconds: float) -> dict[str, Any]:
    """`windows` timed windows of each side, alternating; per-window HEAD/BASE ratios of units per CPU-second."""
    base, head = workers
    broken = {w.side.label: w.errors[config] for w in workers if config in w.errors}
    if broken:
        return {"config": config, "error": "; ".join(f"cannot run at {k}: {v}" for k, v in broken.items())}
    rates: dict[str, list[float]] = {"base": [], "head": []}
    shares = []
    for i in range(windows):
        order = [("base", base), ("head", head)] if i % 2 == 0 else [("head", head), ("base", base)]
        for key, worker in order:
            out = worker.run(config, seconds)
            if "error" in out:
                return {"config": config, "error": f"{worker.side.label}: {out['error']}"}
            rates[key].append(out["units"] / out["cpu_s"])
            shares.append(out["cpu_s"] / max(out["wall_s"], 1e-9))
        print(f"  {config} window {i + 1}/{windows}: {rates['head'][-1] / rates['base'][-1]:.3f}", file=sys.stderr)
    ratios = sorted(h / b for h, b in zip(rates["head"], rates["base"], strict=True))
    return {
        "config": config,
        "unit": describe(config)[1],
        "base_per_cpu_s": statistics.median(rates["base"]),
        "head_per_cpu_s": statistics.median(rates["head"]),
        "ratio": statistics.median(ratios),
        "ratio_min": ratios[0],
        "ratio_max": ratios[-1],
        "windows": windows,
        "cpu_share": statistics.median(shares),
    }


def schedule(configs: list[str], quick: bool) -> list[list[str]]:
    """Configs per worker pair: one config per process, or all in one process per side for --quick."""
    return [configs] if quick else [[c] for c in configs]


def compare(sides: tuple[Side, Side], configs: list[str], args: argparse.Namespace, tmp: Path) -> list[dict[str, Any]]:
    """A row per config; a worker that dies marks its configs not measured yet as not run, and the rest goes on."""
    rows: list[dict[str, Any]] = []
    for group in schedule(configs, args.quick):
        workers = (start(sides[0], group, args.quick, tmp), start(sides[1], group, args.quick, tmp, args.head_bf16))
        try:
            for w in workers:
                ready(w)
            for config in group:
                print(f"{config}: {args.windows} windows of {args.seconds:g} CPU-s per side", file=sys.stderr)
                rows.append(measure(workers, config, args.windows, args.seconds))
        except CompareError as e:
            if isinstance(e, WrongPackage):
                raise
            print(f"compare_commits: {e}", file=sys.stderr)
            done = {r["config"] for r in rows}
            rows += [{"config": c, "error": str(e).splitlines()[0]} for c in group if c not in done]
        finally:
            for w in workers:
                w.stop()
    return rows


def fmt(x: float) -> str:
    return f"{x:,.0f}" if x >= 100 else f"{x:.3g}"


def table(rows: list[dict[str, Any]], sides: tuple[Side, Side]) -> str:
    """The Markdown table of `rows` (one per config, same columns for all), then a line per config not run."""
    header = ["config", "unit", "BASE /CPU-s", "HEAD /CPU-s", "HEAD/BASE (median)", "min–max", "windows", "CPU share"]
    lines = ["| " + " | ".join(header) + " |", "|---|---|---:|---:|---:|---:|---:|---:|"]
    notes = []
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['config']} | {describe(r['config'])[1]} | – | – | not run | – | 0 | – |")
            notes.append(f"- {r['config']}: {r['error']}")
            continue
        lines.append(
            f"| {r['config']} | {r['unit']} | {fmt(r['base_per_cpu_s'])} | {fmt(r['head_per_cpu_s'])} | "
            f"**{r['ratio']:.2f}×** | {r['ratio_min']:.2f}–{r['ratio_max']:.2f} | {r['windows']} | "
            f"{100 * r['cpu_share']:.0f}% |"
        )
    notes_text = "\n\nNot run:\n" + "\n".join(notes) if notes else ""
    return f"BASE = {sides[0].label}, HEAD = {sides[1].label}\n\n" + "\n".join(lines) + notes_text


def selected(only: str | None) -> list[str]:
    """Config names of `--only`: groups (learner, rollout, store) and/or config names; default DEFAULT_SET."""
    if not only:
        return list(DEFAULT_SET)
    out: list[str] = []
    for word in (w.strip() for w in only.split(",") if w.strip()):
        if word in GROUPS:
            out += [c for c in DEFAULT_SET if describe(c)[0] == word]
        elif word in ALL_CONFIGS:
            out.append(word)
        else:
            known = f"groups: {', '.join(GROUPS)}; configs: {', '.join(ALL_CONFIGS)}"
            raise CompareError(f"--only: unknown '{word}' ({known})")
    return list(dict.fromkeys(out))


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    lines = __doc__.splitlines()
    parser = argparse.ArgumentParser(
        description=lines[0], epilog="\n".join(lines[2:]), formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("base", help="the commit to compare against (any git revision)")
    parser.add_argument("head", nargs="?", default=None, help="the commit measured (default: the working tree)")
    parser.add_argument("--windows", type=int, default=5, help="timed windows per side and config (default 5)")
    parser.add_argument("--seconds", type=float, default=8.0, help="CPU-seconds per window (default 8)")
    parser.add_argument("--only", default=None, help="comma-separated groups (learner, rollout, store) or configs")
    parser.add_argument("--quick", action="store_true", help="tiny sizes, 2 windows of 0.1 s, one process per side")
    parser.add_argument(
        "--head-bf16",
        action="store_true",
        help="HEAD's learner updates under CPU bf16 autocast, as `mixed_precision: bf16` trains (needs AMX or "
        "AVX512-BF16); BASE stays float32",
    )
    parser.add_argument("--json", type=Path, default=None, help="also write the rows as JSON here")
    args = parser.parse_args(argv)
    if args.quick:
        args.windows, args.seconds = 2, 0.1
    if args.windows < 1 or args.seconds <= 0:
        parser.error("--windows must be >= 1 and --seconds > 0")
    return args


def cleanup(repo: Path, trees: list[Path], tmp: Path) -> None:
    """Remove the temporary worktrees (and git's records of them) and the scratch folder; Ctrl-C waits for it."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for path in trees:
        subprocess.run(["git", "-C", str(repo), "worktree", "remove", "--force", str(path)], capture_output=True)
    subprocess.run(["git", "-C", str(repo), "worktree", "prune"], capture_output=True)
    shutil.rmtree(tmp, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # cleanup below runs on SIGTERM as on Ctrl-C
    repo = Path(git(HERE, "rev-parse", "--show-toplevel"))
    tmp = Path(tempfile.mkdtemp(prefix="compare_commits_"))
    trees: list[Path] = []
    started = time.perf_counter()
    try:
        configs = selected(args.only)
        base = checkout(repo, args.base, tmp, "base", trees)
        head = working_tree(repo) if args.head is None else checkout(repo, args.head, tmp, "head", trees)
        rows = compare((base, head), configs, args, tmp)
    except CompareError as e:
        print(f"compare_commits: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("compare_commits: interrupted; removing the worktrees", file=sys.stderr)
        return 130
    finally:
        cleanup(repo, trees, tmp)
    sizes = "quick (tiny) sizes" if args.quick else "full sizes"
    sizes += ", HEAD's learner in bf16 autocast" if args.head_bf16 else ""
    print(f"\n{table(rows, (base, head))}\n")
    print(
        f"{args.windows} windows x {args.seconds:g} CPU-s per side and config, 1 thread, {sizes}, "
        f"{time.perf_counter() - started:.0f}s in all. Ratio > 1: HEAD does more work per CPU-second. "
        "CPU share: the worker's CPU-s per wall-s (below 100%: the machine was busy or it waited on I/O)."
    )
    if args.json:
        args.json.write_text(json.dumps({"base": base.label, "head": head.label, "rows": rows}, indent=2))
    return 0 if all("error" not in r for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
