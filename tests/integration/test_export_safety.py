"""`amago-pipe export --out DIR` never deletes what is not an earlier export (user files, the run directory, the
store), replaces an earlier one whole, reclaims what killed exports left, and reports a full disk in one line
(RLIMIT_FSIZE: writes past the limit fail with EFBIG) instead of aborting in torch's writer."""

from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from cli_support import cli_env
from unit.data.learning_data import make_store

from amago_pipe.errors import ConfigError
from amago_pipe.export.artifact import MANIFEST, WRITER, read_manifest, reclaim_debris
from amago_pipe.pipeline.export_run import export_run

PIPELINE = """
version: 1
name: ex
store: store.zarr
stages:
  train:
    type: train
    needs: []
    max_seq_len: 8
    batch_size: 4
    epochs: 1
    updates_per_epoch: 1
    warmup_steps: 1
    model:
      tstep_encoder: {type: ff, d_hidden: 16, d_output: 16}
      traj_encoder: {type: gru, d_model: 16}
    agent: {type: agent, actor: {d_hidden: 16}, critic: {d_hidden: 16}}
    logging: {plots: false}
"""
RUN = "runs/ex"
FIX = "choose an empty or new folder, or remove it yourself"
OUTSIDE = "choose an empty or new folder outside the run directory and the store"


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding a store and a run directory with one trained (1 update) train stage."""
    here = tmp_path_factory.mktemp("trained")
    make_store(here / "store.zarr", "discrete", episodes=8)
    (here / "p.yaml").write_text(PIPELINE)
    cli(here, "run", "p.yaml", check=True)
    return here


@pytest.fixture
def work(trained: Path, tmp_path: Path) -> Path:
    shutil.copytree(trained, tmp_path, dirs_exist_ok=True, symlinks=True)
    return tmp_path


def _limit_file_size(limit: int) -> Callable[[], None]:
    def apply() -> None:  # a full disk without root: a write past `limit` bytes fails with EFBIG
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return apply


def cli(cwd: Path, *args: str, limit: int | None = None, check: bool = False) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [sys.executable, "-m", "amago_pipe.cli", *args], cwd=cwd, env={**cli_env(), "OMP_NUM_THREADS": "1"},
        capture_output=True, text=True, timeout=300, preexec_fn=_limit_file_size(limit) if limit else None,
    )  # fmt: skip
    if check and proc.returncode != 0:
        raise AssertionError(f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc


def export(cwd: Path, out: str, *extra: str, limit: int | None = None) -> subprocess.CompletedProcess[str]:
    return cli(cwd, "export", RUN, "--out", out, "--form", "torchscript", *extra, limit=limit)


def errors_of(proc: subprocess.CompletedProcess[str]) -> list[str]:
    assert "Traceback" not in proc.stderr and "terminate called" not in proc.stderr, proc.stderr
    return [line for line in proc.stderr.splitlines() if line.strip()]


def tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def debris(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if ".partial-" in p.name or ".old-" in p.name)


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


# ---- what --out may be ------------------------------------------------------------------------


def test_refuses_an_out_that_is_not_an_earlier_export_and_deletes_nothing(work: Path) -> None:
    (work / "notes").mkdir()
    (work / "notes/mine.txt").write_text("keep me")
    run_files, store_files = tree(work / RUN), tree(work / "store.zarr")
    cases = {
        "notes": f"error: --out notes: is not empty and holds no earlier export (no {MANIFEST} of an export; "
        f"it holds mine.txt); {FIX}",
        RUN: f"error: --out {RUN}: is the run directory {RUN}; {OUTSIDE}",
        "store.zarr": f"error: --out store.zarr: is the store store.zarr; {OUTSIDE}",
    }
    for out, message in cases.items():
        proc = export(work, out)
        assert proc.returncode == 2 and errors_of(proc) == [message], proc.stderr
    assert (work / "notes/mine.txt").read_text() == "keep me"
    assert tree(work / RUN) == run_files and tree(work / "store.zarr") == store_files
    assert debris(work) == [] and debris(work / "runs") == []


def test_refusals_in_process(work: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(work)
    (work / "file.txt").write_text("x")
    (work / "exp").mkdir()
    (work / "exp" / MANIFEST).write_text(json.dumps({"format": 1, "files": {"policy.pt": "0"}}))
    (work / "exp/policy.pt").write_bytes(b"0")
    (work / "exp/notes.md").write_text("mine")
    (work / "link").symlink_to(work / "exp")
    cases = {
        "runs": rf"--out runs: contains the run directory {RUN}; {OUTSIDE}",
        f"{RUN}/stages/train/export": rf"--out {RUN}/stages/train/export: lies inside the run directory {RUN}",
        "store.zarr/x": r"--out store.zarr/x: lies inside the store store.zarr",
        ".": rf"--out \.: contains the run directory {RUN}",
        "file.txt": rf"--out file.txt: is a file, not a folder; {FIX}",
        "exp": rf"--out exp: holds an earlier export and other files \(notes.md\) that replacing it would delete; {FIX}",
        "link": rf"--out link: is a symbolic link; {FIX}",
    }
    for out, message in cases.items():
        with pytest.raises(ConfigError, match=message):
            export_run(Path(RUN), Path(out), forms=["torchscript"])
    assert (work / "exp/notes.md").read_text() == "mine" and (work / "file.txt").read_text() == "x"


# ---- killed exports ---------------------------------------------------------------------------


def test_a_killed_exports_partial_folder_is_reclaimed_by_the_next_export(work: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "amago_pipe.cli", "export", RUN, "--out", "e", "--form", "torchscript"],
        cwd=work, env={**cli_env(), "OMP_NUM_THREADS": "1"}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    partial = work / f".e.partial-{proc.pid}"
    deadline = time.monotonic() + 120
    while not partial.is_dir() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    proc.kill()
    proc.wait()
    assert partial.is_dir() and not (work / "e").exists()  # killed mid-export: its partial folder stays
    live = work / f".e.partial-{os.getpid()}"  # a live process's: never touched
    elsewhere = work / f".e.partial-{dead_pid()}"  # stamped by another host: its pid says nothing here
    for folder in (live, elsewhere):
        folder.mkdir()
        (folder / "weights.safetensors").write_bytes(b"w")
    stamp = {"host": socket.gethostname() + "-other", "pid": int(elsewhere.name.rsplit("-", 1)[1]), "started": 0}
    (elsewhere / WRITER).write_text(json.dumps(stamp))

    first = export(work, "e")
    assert first.returncode == 0, first.stderr
    assert debris(work) == sorted([live.name, elsewhere.name])
    read_manifest(work / "e")
    assert WRITER not in json.loads((work / "e" / MANIFEST).read_text())["files"]


def test_reclaim_removes_dead_copies_and_puts_back_an_export_moved_aside(tmp_path: Path) -> None:
    """A kill between the two renames of the fallback replacement leaves `<name>` missing and the earlier export
    in `.<name>.old-<pid>`: the next export puts it back; with `<name>` present the copy is removed."""
    old = tmp_path / f".e.old-{dead_pid()}"
    old.mkdir()
    (old / "policy.pt").write_bytes(b"p")
    (old / MANIFEST).write_text(json.dumps({"format": 1, "files": {"policy.pt": "x"}}))
    assert reclaim_debris(tmp_path / "e") == [] and debris(tmp_path) == []
    assert (tmp_path / "e/policy.pt").read_bytes() == b"p"
    again = tmp_path / f".e.old-{dead_pid()}"
    again.mkdir()
    assert reclaim_debris(tmp_path / "e") == [again] and debris(tmp_path) == []
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        live = tmp_path / f".e.old-{sleeper.pid}"  # of a live export: kept
        live.mkdir()
        other_name = tmp_path / f".f.partial-{dead_pid()}"  # another export's: its next run reclaims it
        other_name.mkdir()
        assert reclaim_debris(tmp_path / "e") == [] and debris(tmp_path) == sorted([live.name, other_name.name])
    finally:
        sleeper.kill()
        sleeper.wait()


# ---- a full disk ------------------------------------------------------------------------------


def test_disk_full_while_writing_a_program_is_one_line_exit_3_and_nothing_changes(work: Path) -> None:
    (work / "e").mkdir()  # an empty folder is a fine --out
    assert export(work, "e").returncode == 0
    before = tree(work / "e")
    limit = (work / RUN / "stages/train/policy/latest.safetensors").stat().st_size + 2000
    # the weights fit, the program does not: torch's zip writer used to abort the process (SIGABRT, C++ trace)
    proc = cli(work, "export", RUN, "--out", "e", "--form", "torchscript", limit=limit)
    assert proc.returncode == 3, proc.stderr
    assert errors_of(proc) == [
        "error: e: out of space while writing (file size limit reached); the earlier export there is unchanged; "
        "free some disk space (or raise the quota / file-size limit) and run again"
    ]
    assert tree(work / "e") == before and debris(work) == []
    proc = cli(work, "export", RUN, "--out", "new", "--form", "torch_export", limit=limit)
    assert proc.returncode == 3, proc.stderr
    assert errors_of(proc) == [
        "error: new: out of space while writing (file size limit reached); nothing was written; "
        "free some disk space (or raise the quota / file-size limit) and run again"
    ]
    assert not (work / "new").exists() and debris(work) == []

    inode = (work / "e").stat().st_ino
    again = export(work, "e")  # an earlier export is replaced whole
    assert again.returncode == 0, again.stderr
    assert sorted(tree(work / "e")) == sorted(before) and (work / "e").stat().st_ino != inode
    assert debris(work) == []
    read_manifest(work / "e")
