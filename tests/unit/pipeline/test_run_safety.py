"""What a run may and may not do to a run directory: resume vs restart after config changes, live
processes, store placement, and the small commands around them (`status`, `unlock`, `plan`)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cli_support import cli_env, wait_for_progress

from amago_pipe.pipeline.lockfile import lock_is_stale

PIPELINE = """\
version: 1
name: demo
stages:
  a: {type: "pipeline_stages:Emit", value: 2}
  b: {type: "unit.pipeline.resume_stages:PacedEmit", value: 3, steps: 400, step_seconds: 0.02}
"""


@pytest.fixture
def pipeline(tmp_path: Path) -> Path:
    path = tmp_path / "p.yaml"
    path.write_text(PIPELINE)
    return path


def lock(tmp_path: Path) -> dict:
    return json.loads((tmp_path / "runs/demo/pipeline.lock.json").read_text())["stages"]


def start_run(tmp_path: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "amago_pipe.cli", "run", "p.yaml", *args],
        cwd=tmp_path,
        env=cli_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_safe_change_resumes_an_interrupted_stage_and_another_change_moves_it_aside(amago, tmp_path, pipeline):
    proc = start_run(tmp_path)
    wait_for_progress(tmp_path)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 143
    done_steps = int((tmp_path / "runs/demo/stages/b/progress.txt").read_text())

    plan = amago("plan", "p.yaml", "--set", "stages.b.step_seconds=0", check=True).stdout
    assert f"will resume b from step {done_steps} — interrupted; changed: step_seconds" in plan
    amago("run", "p.yaml", "--set", "stages.b.step_seconds=0", check=True)
    assert lock(tmp_path)["b"]["metrics"]["started_at_step"] == done_steps

    plan = amago("plan", "p.yaml", "--set", "stages.b.step_seconds=0", "--set", "stages.b.value=4", check=True).stdout
    assert "will restart b — config changed (value); old outputs moved to runs/demo/superseded/b.1" in plan
    out = amago("run", "p.yaml", "--set", "stages.b.step_seconds=0", "--set", "stages.b.value=4", check=True).stdout
    assert "restart b" in out
    assert (tmp_path / "runs/demo/superseded/b.1/out.txt").read_text() == "5"  # the old outputs, kept
    assert (tmp_path / "runs/demo/stages/b/out.txt").read_text() == "6"
    assert lock(tmp_path)["b"]["metrics"]["started_at_step"] == 0


def test_a_stage_whose_process_is_alive_is_never_rerun(amago, tmp_path, pipeline):
    live = start_run(tmp_path, "--set", "stages.b.steps=150")
    try:
        wait_for_progress(tmp_path)
        unlocked = amago("unlock", "runs/demo", "--force", check=True)
        assert "WARNING" in unlocked.stderr and f"pid {live.pid} is ALIVE" in unlocked.stderr
        plan = amago("plan", "p.yaml", "--set", "stages.b.steps=150", check=True).stdout
        assert f"running b — pid {live.pid} on this host is still running it" in plan
        second = amago("run", "p.yaml")
        assert second.returncode == 5, second.stderr
        assert f"still being run by pid {live.pid}" in second.stderr
        assert len(second.stderr.strip().splitlines()) == 1
        assert (tmp_path / "runs/demo/stages/b/progress.txt").exists()
    finally:
        _, stderr = live.communicate(timeout=60)
    assert live.returncode == 0, stderr
    assert (tmp_path / "runs/demo/stages/b/out.txt").read_text() == "5"


def test_status_says_interrupted_when_the_process_is_gone(amago, tmp_path, pipeline):
    proc = start_run(tmp_path)
    wait_for_progress(tmp_path)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert lock(tmp_path)["b"]["status"] == "running"  # what the killed process left
    table = amago("status", "runs/demo", check=True).stdout
    assert "interrupted" in table and "running" not in table
    as_json = json.loads(amago("status", "runs/demo", "--json", check=True).stdout)
    assert as_json["stages"]["b"]["status"] == "interrupted"


def test_a_reused_pid_does_not_hold_an_old_lock():
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        holder = {"pid": other.pid, "host": socket.gethostname()}
        assert not lock_is_stale({**holder, "started": time.time()})
        assert lock_is_stale({**holder, "started": time.time() - 3600})  # written long before that process began
    finally:
        other.kill()
        other.wait()


def test_a_run_removes_lock_file_temporaries_of_killed_runs(amago, tmp_path, pipeline):
    """A run killed inside `write_atomic` leaves `.tmp-pipeline.lock.json.<pid>`; the next run takes it away."""
    run_dir = tmp_path / "runs/demo"
    run_dir.mkdir(parents=True)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    debris = run_dir / f".tmp-pipeline.lock.json.{dead.pid}"
    debris.write_text('{"partial": ')
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        live = run_dir / f".tmp-resolved.yaml.{other.pid}"  # a live writer's temporary stays
        live.write_text("x")
        amago("run", "p.yaml", "--until", "a", check=True)
        assert not debris.exists() and live.exists()
    finally:
        other.kill()
        other.wait()


def test_unlock_of_something_that_is_not_a_run_directory_fails(amago, tmp_path):
    (tmp_path / "plain").mkdir()
    for target in ("plain", "missing"):
        proc = amago("unlock", target)
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.startswith(f"error: {target}: not a run directory") and len(proc.stderr.splitlines()) == 1


@pytest.mark.parametrize("store", ["runs/demo/stages/a/store.zarr", "runs/demo/stages/store.zarr"])
def test_store_inside_the_stage_folders_is_refused(amago, tmp_path, pipeline, store):
    pipeline.write_text(PIPELINE.replace("stages:\n", f"store: {store}\nstages:\n", 1))
    for command in ("validate", "plan", "run"):
        proc = amago(command, "p.yaml")
        assert proc.returncode == 2, (command, proc.stdout, proc.stderr)
        assert proc.stderr.startswith(f"error: p.yaml: store: '{store}' lies inside runs/demo/stages/")
        assert len(proc.stderr.splitlines()) == 1 and "Traceback" not in proc.stderr
        assert not (tmp_path / "runs").exists()
    other = amago("plan", "p.yaml", "--run-dir", "elsewhere", "--set", "store=elsewhere/stages/b/s.zarr")
    assert other.returncode == 2 and "lies inside elsewhere/stages/" in other.stderr


def test_store_of_another_run_directory_warns(amago, tmp_path, pipeline):
    pipeline.write_text(PIPELINE.replace("stages:\n", "store: runs/${name}/store.zarr\nstages:\n", 1))
    assert "WARNING" not in amago("plan", "p.yaml", check=True).stderr
    proc = amago("plan", "p.yaml", "--run-dir", "runs/second", check=True)
    assert "store 'runs/demo/store.zarr' lies in run directory runs/demo, not in runs/second" in proc.stderr
    assert "--set store=runs/second/store.zarr" in proc.stderr
    own = amago("plan", "p.yaml", "--run-dir", "runs/second", "--set", "store=runs/second/store.zarr", check=True)
    assert "WARNING" not in own.stderr


def test_plan_error_is_on_its_own_line(amago, tmp_path, pipeline):
    amago("run", "p.yaml", "--until", "a", check=True)
    (tmp_path / "runs/demo/pipeline.lock.json").write_text("{damaged")
    proc = subprocess.run(
        [sys.executable, "-m", "amago_pipe.cli", "plan", "p.yaml"],
        cwd=tmp_path,
        env=cli_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert proc.returncode == 3
    lines = proc.stdout.splitlines()
    assert any(line.startswith("error: runs/demo/pipeline.lock.json: damaged lock file") for line in lines), lines
