"""Reliability battery: SIGKILL/SIGTERM `amago-pipe` convert, collect, train and export processes at random moments.

    python benchmarks/bench_reliability.py [--kills 30] [--seed 0] [--scenarios convert-d4rl convert-minari
        collect train export online-shared] [--sigterm-share 0.25] [--scale 1.0] [--workdir DIR]

Real CLI processes, real files, real signals. Each round starts concurrent writers into one store (two of the
same source and one of another, or two pipelines and a CLI collect), signals one or two of them at a moment
drawn uniformly over how long such a process runs, re-runs everything to completion, then checks: `amago-pipe
store verify` finds no damage; every expected episode is in the store exactly once (by content, against the
D4RL/Minari sources written here, or per writer for collected episodes); no `.tmp-*` file or unsealed segment
is left once a later write ran (a final uninterrupted write closes each scenario). `train` kills one training
run repeatedly, resumes it each time and compares its final checkpoint tensors (model and optimizer) with an
uninterrupted run of the same config. `export` kills exports of a trained run: the folder must read back intact
and the next export must reclaim what the killed one left; `--out` at user files, the run or the store is refused.
`online-shared` kills and resumes an online run while another run directory of its store is refused (`online_rounds`).
Prints a Markdown table; exits 1 when a check failed.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from amago_pipe.testing.reliability import (
    PARTITION,
    PID_MODULO,
    Audit,
    Battery,
    Row,
    Timer,
    audit_episodes,
    episode_key,
    episodes_by_writer,
    leftovers,
    run_all,
    verify_cli,
)
from amago_pipe.testing.reliability_scenarios import (
    export_refusals,
    export_rounds,
    online_rounds,
    same_checkpoints,
    train_store,
    trained_epochs,
)

WEIGHTS = {"convert-d4rl": 3, "convert-minari": 2, "collect": 3, "train": 2, "export": 2, "online-shared": 2}
"""How `--kills` is shared between the scenarios."""
SOURCE_STEPS = {"convert-d4rl": 300_000, "convert-minari": 80_000}
"""Timesteps per converted source: about one second of conversion on one core (HDF5 converts ~4x faster)."""
COLLECT_EPISODES = 500
EPOCHS = 12
TRAIN = """
version: 1
name: reliability-train
store: {store}
stages:
  train:
    type: train
    needs: []
    max_seq_len: 8
    batch_size: 8
    epochs: {epochs}
    updates_per_epoch: 20
    warmup_steps: 5
    deterministic: true
    ckpt_interval: 1
    model:
      tstep_encoder: {{type: ff, d_hidden: 16, d_output: 16}}
      traj_encoder: {{type: gru, d_model: 16}}
    agent: {{type: agent, actor: {{d_hidden: 16}}, critic: {{d_hidden: 16, num_critics: 2}}}}
    logging: {{plots: false}}
"""
COLLECT = """
version: 1
name: {name}
store: {store}
stages:
  data:
    type: collect
    env: {{id: CartPole-v1, n_envs: 4}}
    policies: [{{policy: {{type: random}}, episodes: {episodes}}}]
    seed: {seed}
"""
Source = Callable[[Battery, int, int], tuple[list[str], Counter[str]]]
"""Writes source number i of about n timesteps; returns the `convert` arguments and its episodes' content keys."""


def rounds_left(row: Row, kills: int, rounds: int) -> bool:
    return sum(row.kills.values()) < kills and rounds < 4 * kills


# ---------------------------------------------------------------- convert


def synthetic_episodes(seed: int, steps: int) -> list[Any]:
    """Continuous episodes of 20-250 steps (obs 3, action 2), terminal and timeout in turn, about `steps` in all."""
    from amago_pipe.testing.synthetic import continuous_episode

    rng = np.random.default_rng(seed)
    episodes: list[Any] = []
    while sum(e.length for e in episodes) < steps:
        episodes.append(continuous_episode(rng, int(rng.integers(20, 250)), ("terminal", "timeout")[len(episodes) % 2]))
    return episodes


def d4rl_source(b: Battery, index: int, steps: int) -> tuple[list[str], Counter[str]]:
    """A D4RL-layout HDF5 file written with h5py."""
    from amago_pipe.testing.synthetic import write_d4rl_hdf5

    episodes = synthetic_episodes(1000 + index, steps)
    (b.dir / "sources").mkdir(exist_ok=True)
    path = write_d4rl_hdf5(b.dir / "sources" / f"d4rl-{index}.hdf5", episodes)
    return ["convert", "d4rl", str(path)], Counter(episode_key(e) for e in episodes)


def minari_source(b: Battery, index: int, steps: int) -> tuple[list[str], Counter[str]]:
    """A local Minari dataset made through minari's API."""
    from gymnasium import spaces
    from minari.data_collector import EpisodeBuffer

    from amago_pipe.testing.synthetic import write_minari

    os.environ["MINARI_DATASETS_PATH"] = b.env["MINARI_DATASETS_PATH"]
    episodes = synthetic_episodes(2000 + index, steps)
    buffers = [
        EpisodeBuffer(
            observations=e.obs["observation"], actions=e.actions, rewards=e.rewards.astype(np.float64),
            terminations=e.terminated, truncations=e.truncated,
        )
        for e in episodes
    ]  # fmt: skip
    box = spaces.Box(-np.inf, np.inf, (3,), np.float32)
    write_minari(f"rel/src{index}-v0", buffers, box, spaces.Box(-1, 1, (2,), np.float32))
    return ["convert", "minari", f"rel/src{index}-v0"], Counter(episode_key(e) for e in episodes)


def convert_scenario(b: Battery, name: str, kills: int, source: Source, steps: int) -> Row:
    """Rounds of three concurrent conversions into one store (two of source A, one of B), one or two signalled;
    then A and B converted again (a no-op where they are in); a last source closes the scenario."""
    row, here = Row(name, "3 (2 of one source)"), b.dir / name
    here.mkdir()
    store = here / "store.zarr"
    args, _ = source(b, 10_000, steps)  # calibration: one uninterrupted conversion (three at once share the cores)
    calibration = b.spawn(row, "calibrate", *args, "--store", str(here / "scratch.zarr"))
    row.problems += run_all([calibration])
    shutil.rmtree(here / "scratch.zarr", ignore_errors=True)
    timer, expected, rounds = Timer([1.5 * calibration.seconds]), Counter[str](), 0
    while rounds_left(row, kills, rounds):
        (args_a, truth_a), (args_b, truth_b) = source(b, 2 * rounds, steps), source(b, 2 * rounds + 1, steps)
        rounds += 1
        jobs = {"a1": args_a, "a2": args_a, "b": args_b}
        procs = [b.spawn(row, f"r{rounds}-{tag}", *a, "--store", str(store)) for tag, a in jobs.items()]
        hit = b.kill_some(row, procs, timer.estimate, kills - sum(row.kills.values()))
        row.problems += run_all(procs)
        b.mark_mid_write(row, hit, store)
        timer.seconds += [p.seconds for p in procs if p not in hit]
        again = [
            b.spawn(row, f"r{rounds}-{t}-again", *a, "--store", str(store)) for t, a in (("a", args_a), ("b", args_b))
        ]
        row.problems += run_all(again)
        expected += truth_a + truth_b
        b.check_store(row, store, here, pending=hit)
        row.worst(audit_episodes(store, PARTITION, expected))
    args, truth = source(b, 2 * rounds, steps)
    row.problems += run_all([b.spawn(row, "last", *args, "--store", str(store))])
    b.check_store(row, store, here)
    row.worst(audit_episodes(store, PARTITION, expected + truth))
    return row


# ---------------------------------------------------------------- collect


def collect_scenario(b: Battery, kills: int) -> Row:
    """Rounds of two pipelines (one collect stage each) and one `amago-pipe collect --store` writing one store at
    once, one or two signalled; then the pipelines run again (resume) and a CLI collect that committed nothing
    collects again. A last CLI collect closes the scenario."""
    row, here = Row("collect", "3 (2 pipelines + 1 CLI)"), b.dir / "collect"
    here.mkdir()
    store = here / "store.zarr"
    cli = ["collect", "CartPole-v1", "--episodes", str(COLLECT_EPISODES), "--n-envs", "4", "--store"]
    calibration = b.spawn(row, "calibrate", *cli, str(here / "scratch.zarr"), "--seed", "99999")
    row.problems += run_all([calibration])
    shutil.rmtree(here / "scratch.zarr", ignore_errors=True)
    timer, rounds, cli_pids, tags = Timer([2.0 * calibration.seconds]), 0, [], []
    while rounds_left(row, kills, rounds):
        rounds += 1
        runs = []
        for x, seed in (("a", 10 * rounds), ("b", 10 * rounds + 1)):
            name = f"col-r{rounds}-{x}"
            (here / f"{name}.yaml").write_text(
                COLLECT.format(name=name, store=store, episodes=COLLECT_EPISODES, seed=seed)
            )
            runs.append(["run", str(here / f"{name}.yaml"), "--run-dir", str(here / "runs" / name)])
            tags.append(f"{name}/data")
        seed = ["--seed", str(10 * rounds + 5)]
        procs = [
            *(b.spawn(row, f"r{rounds}-{i}", *r) for i, r in enumerate(runs)),
            b.spawn(row, f"r{rounds}-cli", *cli, str(store), *seed),
        ]
        hit = b.kill_some(row, procs, timer.estimate, kills - sum(row.kills.values()))
        row.problems += run_all(procs)
        b.mark_mid_write(row, hit, store)
        timer.seconds += [p.seconds for p in procs if p not in hit]
        again = [b.spawn(row, f"r{rounds}-{i}-again", *r) for i, r in enumerate(runs)]
        last = procs[-1]
        if episodes_by_writer(store, PARTITION, "collect_stage")[1][last.pid % PID_MODULO] == 0:
            last = b.spawn(row, f"r{rounds}-cli-again", *cli, str(store), *seed)  # it committed nothing
            again.append(last)
        row.problems += run_all(again)
        cli_pids.append(last.pid % PID_MODULO)
        b.check_store(row, store, here, pending=hit)
        row.worst(collect_audit(store, tags, cli_pids))
    final = b.spawn(row, "last", *cli, str(store), "--seed", "7")
    row.problems += run_all([final])
    b.check_store(row, store, here)
    row.worst(collect_audit(store, tags, [*cli_pids, final.pid % PID_MODULO]))
    return row


def collect_audit(store: Path, tags: list[str], cli_pids: list[int]) -> Audit:
    """Per writer: each pipeline stage (by tag) and each finished CLI collect (by pid) holds its episodes once;
    plus copies of one episode anywhere (every collected episode is distinct: each writer has its own seed)."""
    by_tag, by_pid = episodes_by_writer(store, PARTITION, "collect_stage")
    found = [sum(n for k, n in by_tag.items() if k.split("@")[0] == t) for t in tags] + [by_pid[p] for p in cli_pids]
    audit = Audit(expected=COLLECT_EPISODES * len(found), found=sum(by_tag.values()))
    audit.lost = sum(max(0, COLLECT_EPISODES - n) for n in found)
    audit.duplicates = sum(max(0, n - COLLECT_EPISODES) for n in found)
    audit.duplicates += audit_episodes(store, PARTITION, None).duplicates
    audit.unexpected = audit.found - sum(found)
    return audit


# ---------------------------------------------------------------- train


def train_scenario(b: Battery, kills: int) -> Row:
    """Trainings signalled at random moments and resumed each time until one ends, against a straight run;
    another training starts while kills are left. Every one must end bit-identical to the straight run."""
    row, here = Row("train-resume", "1 (a reader)"), b.dir / "train"
    here.mkdir()
    train_store(here / "store.zarr")
    (here / "p.yaml").write_text(TRAIN.format(store=here / "store.zarr", epochs=EPOCHS))
    run = ["run", str(here / "p.yaml"), "--run-dir"]
    straight = b.spawn(row, "straight", *run, str(here / "straight"))
    row.problems += run_all([straight])
    attempts, trainings, differ = 0, 0, []
    while rounds_left(row, kills, attempts):
        trainings += 1
        run_dir = here / f"killed-{trainings}"
        while rounds_left(row, kills, attempts):
            attempts += 1
            left = 1 - trained_epochs(run_dir) / EPOCHS
            victim = b.spawn(row, f"t{trainings}-attempt{attempts}", *run, str(run_dir))
            hit = b.kill_some(row, [victim], straight.seconds * (0.5 + 0.5 * left), most=1)
            row.problems += run_all([victim])
            if not hit:
                break  # it finished before the signal
            row.moments[-1] += f" (checkpoint at epoch {trained_epochs(run_dir)})"
        row.problems += run_all([b.spawn(row, f"t{trainings}-resume-to-end", *run, str(run_dir))])
        same, detail = same_checkpoints(here / "straight", run_dir)
        differ += [] if same else [f"{run_dir.name}: {detail}"]
    row.weights = f"{'yes' if not differ else 'no'} ({trainings - len(differ)}/{trainings})"
    row.problems += [f"resumed checkpoint differs from the straight run: {d}" for d in differ]
    ok, summary = verify_cli(here / "store.zarr", cwd=b.dir, env=b.env)
    row.verifications, row.verified = 1, int(ok)
    row.problems += [] if ok else [summary]
    debris = [x.path for x in leftovers(here, [here / "store.zarr"])]
    row.problems += [f"left behind: {', '.join(debris[:5])}"] if debris else []
    return row


# ---------------------------------------------------------------- export


def export_scenario(b: Battery, kills: int) -> Row:
    """Exports of a one-epoch training signalled at random moments (`export_rounds`), then `export_refusals`."""
    row, here = Row("export", "1 (+ the next export)"), b.dir / "export"
    here.mkdir()
    train_store(here / "store.zarr")
    (here / "p.yaml").write_text(TRAIN.format(store=here / "store.zarr", epochs=1))
    run_dir = here / "run"
    row.problems += run_all([b.spawn(row, "train", "run", str(here / "p.yaml"), "--run-dir", str(run_dir))])
    forms = ["--form", "torchscript", "--form", "torch_export"]  # as export_rounds writes
    calibration = b.spawn(row, "calibrate", "export", str(run_dir), "--out", str(here / "calibration"), *forms)
    row.problems += run_all([calibration])
    export_rounds(b, row, run_dir, kills, window=calibration.seconds)
    export_refusals(b, row, run_dir, here / "store.zarr")
    return row


def online_scenario(b: Battery, kills: int) -> Row:
    """A small online training (toy env) killed and resumed, another run directory refused its FIFO: `online_rounds`."""
    row, here = Row("online-shared", "2 run dirs"), b.dir / "online"
    here.mkdir()
    toy = "{factory: amago_pipe.envs.toy:make_toy_env, kwargs: {min_len: 4, max_len: 9}, n_envs: 2}"
    online = f"    partitions: {{fifo: 1.0}}\n    online: {{env: {toy}, timesteps_per_epoch: 40}}\n"
    (here / "p.yaml").write_text(TRAIN.format(store=here / "store.zarr", epochs=4) + online)
    straight = b.spawn(row, "straight", "run", str(here / "p.yaml"), "--run-dir", str(here / "straight"))
    row.problems += run_all([straight])
    shutil.rmtree(here / "store.zarr", ignore_errors=True)  # the straight run only times the window
    online_rounds(b, row, here / "p.yaml", here / "store.zarr", kills, window=straight.seconds)
    return row


# ---------------------------------------------------------------- main


def share(total: int, names: list[str]) -> dict[str, int]:
    """Split `total` kills between the scenarios by WEIGHTS (each gets at least one)."""
    weight = sum(WEIGHTS[n] for n in names)
    counts = {n: max(1, round(total * WEIGHTS[n] / weight)) for n in names}
    counts[names[0]] = max(1, counts[names[0]] + total - sum(counts.values()))
    return counts


def run_scenario(b: Battery, name: str, kills: int, scale: float) -> Row:
    started = time.perf_counter()
    if name.startswith("convert"):
        source = d4rl_source if name == "convert-d4rl" else minari_source
        row = convert_scenario(b, name, kills, source, int(SOURCE_STEPS[name] * scale))
    else:
        scenarios = {"collect": collect_scenario, "train": train_scenario, "export": export_scenario}
        scenarios["online-shared"] = online_scenario
        row = scenarios[name](b, kills)
    row.seconds = time.perf_counter() - started
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=30, help="signals sent in all (shared between scenarios)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the kill moments, victims and signals")
    parser.add_argument("--scenarios", nargs="+", choices=list(WEIGHTS), default=list(WEIGHTS))
    parser.add_argument("--sigterm-share", type=float, default=0.25, help="share of SIGTERM among the signals")
    parser.add_argument("--scale", type=float, default=1.0, help="multiplies the size of the converted sources")
    parser.add_argument("--workdir", type=Path, default=None, help="keep the files here (default: a temporary dir)")
    args = parser.parse_args()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="bench_reliability_"))
    workdir.mkdir(parents=True, exist_ok=True)
    battery = Battery(workdir, args.seed, args.sigterm_share)
    started = time.perf_counter()
    try:
        counts = share(args.kills, args.scenarios)
        rows = [run_scenario(battery, name, counts[name], args.scale) for name in args.scenarios]
    finally:
        if args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)
    import minari
    import torch
    import zarr

    from amago_pipe import __version__

    print(
        f"\n{platform.node()}: {os.cpu_count()} CPUs, Python {platform.python_version()}, amago-pipe {__version__}, "
        f"zarr {zarr.__version__}, minari {minari.__version__}, torch {torch.__version__}; "
        f"{' '.join(sys.argv[1:]) or '(defaults)'}; "
        f"{time.perf_counter() - started:.0f}s\n\n{Row.HEADER}"
    )
    for row in rows:
        print(row.markdown())
    print("\nSignals (when each landed after its process started / the window drawn from):")
    print("\n".join(f"- {r.scenario}: {', '.join(r.moments) or 'none'}" for r in rows))
    problems = [f"- {r.scenario}: {p}" for r in rows for p in r.problems]
    print("\n" + ("\n".join(problems) if problems else "No problem found."))
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
