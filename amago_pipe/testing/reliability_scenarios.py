"""The reliability battery's scenarios beyond conversions and collection: resumed trainings compared bit for bit,
exports killed mid-write, and online runs sharing a store (signalled, resumed, refused).

Built on the kit in `reliability` (processes, audits, leftovers, the result row). Used by
`benchmarks/bench_reliability.py`. numpy + the store; torch only inside `same_checkpoints`; no click.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from amago_pipe.errors import StoreFormatError
from amago_pipe.export.artifact import read_manifest
from amago_pipe.hashing import hash_tree
from amago_pipe.store import TrajectoryStore
from amago_pipe.testing.reliability import (
    PARTITION,
    Audit,
    Battery,
    Row,
    audit_episodes,
    episodes_by_writer,
    run_all,
)

# ---------------------------------------------------------------- train


def train_store(path: Path) -> None:
    """16 random discrete-action episodes."""
    from amago_pipe.testing.episodes import example_specs, random_episode

    spec = example_specs()["discrete"]
    rng = np.random.default_rng(0)
    with TrajectoryStore.create(path, spec).writer(PARTITION) as writer:
        for i in range(16):
            writer.add(random_episode(spec, int(rng.integers(5, 30)), rng, terminated=i % 2 == 0))


def trained_epochs(run_dir: Path) -> int:
    """Epochs in the latest checkpoint of a run dir (0 before the first)."""
    state = run_dir / "stages/train/checkpoints/latest/state.json"
    return int(json.loads(state.read_text())["state"]["epoch"]) if state.exists() else 0


def same_checkpoints(a: Path, b: Path) -> tuple[bool, str]:
    """Whether the latest checkpoints of two run dirs hold bit-identical model and optimizer tensors."""
    import torch
    from safetensors.torch import load_file

    for name in ("model", "optimizer"):
        paths = [d / "stages/train/checkpoints/latest" / f"{name}.safetensors" for d in (a, b)]
        if not all(p.exists() for p in paths):
            return False, f"{name}.safetensors missing"
        x, y = (load_file(str(p)) for p in paths)
        if x.keys() != y.keys():
            return False, f"{name}: tensor names differ"
        differ = [k for k in x if not torch.equal(x[k], y[k])]
        if differ:
            return False, f"{name}: {len(differ)} of {len(x)} tensors differ (first: {differ[0]})"
    return True, ""


# ---------------------------------------------------------------- exports


def export_debris(root: Path) -> list[str]:
    """Folders that killed exports leave (`.<name>.partial-<pid>`, `.<name>.old-<pid>`) below `root`."""
    return sorted(str(p.relative_to(root)) for pat in (".*.partial-*", ".*.old-*") for p in root.rglob(pat))


def export_rounds(b: Battery, row: Row, run_dir: Path, kills: int, window: float) -> None:
    """Exports of `run_dir` to one folder signalled at moments uniform in [0, window], each followed by an
    uninterrupted one. After a kill the folder must hold an intact export (the earlier one, or none before the
    first finished); after the next export, nothing the killed one left may remain."""
    here, out, rounds = run_dir.parent, run_dir.parent / "out", 0
    args = ["export", str(run_dir), "--out", str(out), "--form", "torchscript", "--form", "torch_export"]
    while sum(row.kills.values()) < kills and rounds < 4 * kills:
        rounds += 1
        victim = b.spawn(row, f"r{rounds}", *args)
        hit = b.kill_some(row, [victim], window, most=1)
        row.problems += run_all([victim])
        if hit and (here / f".{out.name}.partial-{victim.pid}").is_dir():
            row.moments[-1] += " mid-export"
        _check_export(row, out, required=rounds > 1 or not hit)
        row.problems += run_all([b.spawn(row, f"r{rounds}-again", *args)])
        _check_export(row, out, required=True)
        if debris := export_debris(here):
            row.problems.append(f"left behind after a later export: {', '.join(debris[:5])}")


def _check_export(row: Row, out: Path, *, required: bool) -> None:
    """Count `out` as verified when it reads back intact (every checksum), else note the problem."""
    if not out.exists() and not required:
        return
    row.verifications += 1
    try:
        read_manifest(out)
        row.verified += 1
    except StoreFormatError as e:
        row.problems.append(f"export folder not intact: {e}")


def export_refusals(b: Battery, row: Row, run_dir: Path, store: Path) -> None:
    """`--out` at a folder of user files, the run directory and the store: each refused (exit 2), nothing changed."""
    mine = run_dir.parent / "mine"
    mine.mkdir(exist_ok=True)
    (mine / "notes.txt").write_text("not an export")
    for target in (mine, run_dir, store):
        before = hash_tree(target)
        proc = b.spawn(row, f"refuse-{target.name}", "export", str(run_dir), "--out", str(target))
        if (rc := proc.wait()) != 2:
            row.problems.append(f"export --out {target.name}: exit {rc}, expected 2 (refused)")
        if not target.is_dir() or hash_tree(target) != before:
            row.problems.append(f"export --out {target.name}: its files changed")


# ---------------------------------------------------------------- online runs sharing a store


def online_rounds(b: Battery, row: Row, pipeline: Path, store: Path, kills: int, window: float) -> None:
    """Run directory `a` of an online pipeline signalled at random moments in `window` and resumed until it ends;
    whenever the FIFO holds data, run directory `b` of the same pipeline and store must be refused. At the end
    the FIFO holds exactly the episodes `a`'s checkpoint counts, all `a`'s (`online_audit`)."""
    here, run, attempts, refused = pipeline.parent, ["run", str(pipeline), "--run-dir"], 0, 0
    while sum(row.kills.values()) < kills and attempts < 4 * kills:
        attempts += 1
        victim = b.spawn(row, f"a-attempt{attempts}", *run, str(here / "a"))
        hit = b.kill_some(row, [victim], window, most=1)
        row.problems += run_all([victim])
        if not hit:
            break  # it finished before the signal
        fifo = TrajectoryStore.open(store).segments("fifo") if TrajectoryStore.exists(store) else []
        refused += bool(fifo) and _refused(b, row, f"b-attempt{attempts}", [*run, str(here / "b")], store)
        b.check_store(row, store, here, pending=hit)
    row.problems += run_all([b.spawn(row, "a-resume-to-end", *run, str(here / "a"))])
    refused += _refused(b, row, "b-after-the-end", [*run, str(here / "b")], store)
    b.check_store(row, store, here)
    row.worst(online_audit(store, "fifo", here / "a"))
    row.writers = f"2 run dirs ({refused} starts of b refused)"


def _refused(b: Battery, row: Row, label: str, args: list[str], store: Path) -> bool:
    """Run `args`: it must exit 3 saying its FIFO holds another run's data, leaving `store` as it was."""
    before = TrajectoryStore.open(store).fingerprint()
    code = b.spawn(row, label, *args).wait()
    said = "holds online data of another run" in (b.dir / "logs" / row.scenario / f"{label}.log").read_text()
    if code == 3 and said and TrajectoryStore.open(store).fingerprint() == before:
        return True
    row.problems.append(f"{label}: exit {code}, expected a refusal (exit 3, the message, the store unchanged)")
    return False


def online_audit(store_url: str | Path, partition: str, run_dir: Path) -> Audit:
    """Episodes of `partition` tagged with `run_dir`'s run id against those its latest checkpoint counts
    (`online.episodes`); other runs' episodes are `unexpected`, copies `duplicates`."""
    run_id = json.loads((run_dir / "pipeline.lock.json").read_text())["run_id"]
    state = json.loads((run_dir / "stages/train/checkpoints/latest/state.json").read_text())["state"]
    by_run, _ = episodes_by_writer(store_url, partition, "run_id")
    expected, found = int(state["online"]["episodes"]), by_run[run_id]
    audit = Audit(expected=expected, found=sum(by_run.values()), lost=max(0, expected - found))
    audit.duplicates = max(0, found - expected) + audit_episodes(store_url, partition, None).duplicates
    audit.unexpected = audit.found - found
    return audit
