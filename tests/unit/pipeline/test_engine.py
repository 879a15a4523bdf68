"""Engine behaviour end to end through the CLI: skip, invalidate, selection, locks, signals, resume."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from cli_support import cli_env, wait_for_progress

PIPELINE = """\
version: 1
name: demo
stages:
  a: {type: "pipeline_stages:Emit", value: 2, counter: counts.json}
  b: {type: "pipeline_stages:ResumableEmit", value: 3, counter: counts.json}
  c: {type: "pipeline_stages:Emit", needs: [a], counter: counts.json}
"""


def counts(tmp_path: Path) -> dict[str, int]:
    path = tmp_path / "counts.json"
    return json.loads(path.read_text()) if path.exists() else {}


def lock(tmp_path: Path) -> dict:
    return json.loads((tmp_path / "runs/demo/pipeline.lock.json").read_text())["stages"]


@pytest.fixture
def pipeline(tmp_path: Path) -> Path:
    path = tmp_path / "p.yaml"
    path.write_text(PIPELINE)
    return path


def test_run_then_everything_skipped(amago, tmp_path, pipeline):
    first = amago("run", "p.yaml", check=True)
    assert "never run" in first.stdout
    assert counts(tmp_path) == {"a": 1, "b": 1, "c": 1}
    assert (tmp_path / "runs/demo/stages/b/out.txt").read_text() == "5"
    assert (tmp_path / "runs/demo/resolved.yaml").exists()
    second = amago("run", "p.yaml", check=True)
    assert second.stdout.count("unchanged") == 3
    assert counts(tmp_path) == {"a": 1, "b": 1, "c": 1}
    record = lock(tmp_path)["a"]
    assert record["status"] == "done" and record["config_hash"] and record["output_hash"]


def test_config_change_reruns_stage_and_downstream_only(amago, tmp_path, pipeline):
    amago("run", "p.yaml", check=True)
    pipeline.write_text(PIPELINE.replace("value: 3", "value: 4"))
    out = amago("run", "p.yaml", check=True).stdout
    assert "config changed" in out
    assert counts(tmp_path) == {"a": 1, "b": 2, "c": 1}
    pipeline.write_text(PIPELINE.replace("value: 2", "value: 7"))
    amago("run", "p.yaml", check=True)
    assert counts(tmp_path) == {"a": 2, "b": 3, "c": 2}
    assert (tmp_path / "runs/demo/stages/c/out.txt").read_text() == "8"


def test_changed_input_and_damaged_outputs_rerun(amago, tmp_path, pipeline):
    (tmp_path / "in.txt").write_text("one")
    pipeline.write_text(PIPELINE.replace("value: 2,", "value: 2, input_file: in.txt,"))
    amago("run", "p.yaml", check=True)
    (tmp_path / "in.txt").write_text("two")
    out = amago("plan", "p.yaml", check=True).stdout
    assert "input changed (input_file)" in out
    amago("run", "p.yaml", check=True)
    (tmp_path / "runs/demo/stages/c/out.txt").unlink()
    out = amago("run", "p.yaml", check=True).stdout
    assert "outputs missing or modified" in out
    assert counts(tmp_path) == {"a": 2, "b": 2, "c": 3}


def test_selection_options(amago, tmp_path, pipeline):
    amago("run", "p.yaml", "--until", "a", check=True)
    assert counts(tmp_path) == {"a": 1}
    amago("run", "p.yaml", "--only", "c", check=True)
    assert counts(tmp_path) == {"a": 1, "c": 1}
    amago("run", "p.yaml", "--from", "b", check=True)
    assert counts(tmp_path) == {"a": 1, "b": 1, "c": 1}
    amago("run", "p.yaml", "--force", "a", check=True)
    assert counts(tmp_path) == {"a": 2, "b": 2, "c": 2}
    amago("run", "p.yaml", "--only", "b", "--force", check=True)
    assert counts(tmp_path) == {"a": 2, "b": 3, "c": 2}
    bad = amago("run", "p.yaml", "--only", "bb")
    assert bad.returncode == 2 and "no stage named 'bb'" in bad.stderr and "did you mean 'b'" in bad.stderr


def test_only_requires_completed_upstream(amago, tmp_path, pipeline):
    proc = amago("run", "p.yaml", "--only", "c")
    assert proc.returncode == 2
    assert "needs 'a', which has not completed" in proc.stderr


def test_dry_run_and_set_change_nothing(amago, tmp_path, pipeline):
    out = amago("run", "p.yaml", "--dry-run", "--set", "stages.a.value=9", check=True).stdout
    assert "will run" in out and not (tmp_path / "runs").exists()
    amago("run", "p.yaml", "--set", "stages.a.value=9", check=True)
    assert (tmp_path / "runs/demo/stages/a/out.txt").read_text() == "9"
    assert "value: 9" in (tmp_path / "runs/demo/resolved.yaml").read_text()


def test_failure_is_recorded_and_rerun(amago, tmp_path, pipeline):
    proc = amago("run", "p.yaml", "--set", "stages.b.fail=true")
    assert proc.returncode == 3, proc.stderr
    assert "stage 'b' failed: the data were bad on purpose" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert lock(tmp_path)["b"]["status"] == "failed"
    assert "c" not in lock(tmp_path) or lock(tmp_path)["c"]["status"] != "done"
    out = amago("run", "p.yaml", check=True).stdout
    assert "config changed" in out or "failed last time" in out


def test_live_lock_blocks_second_run_and_stale_lock_is_taken_over(amago, tmp_path, pipeline):
    run_dir = tmp_path / "runs/demo"
    run_dir.mkdir(parents=True)
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        (run_dir / ".run.lock").write_text(json.dumps({"pid": holder.pid, "host": socket.gethostname(), "started": 0}))
        proc = amago("run", "p.yaml")
        assert proc.returncode == 5
        assert "locked by another run" in proc.stderr and "amago-pipe unlock" in proc.stderr
        refused = amago("unlock", "runs/demo")
        assert refused.returncode == 5 and "--force" in refused.stderr
    finally:
        holder.kill()
        holder.wait()
    status = amago("status", "runs/demo") if (run_dir / "pipeline.lock.json").exists() else None
    assert status is None
    out = amago("run", "p.yaml", check=True)
    assert "stale run lock" in out.stderr
    assert not (run_dir / ".run.lock").exists()


def test_unlock_removes_dead_lock(amago, tmp_path, pipeline):
    amago("run", "p.yaml", check=True)
    (tmp_path / "runs/demo/.run.lock").write_text(json.dumps({"pid": 2**22 + 7, "host": socket.gethostname()}))
    status = amago("status", "runs/demo", check=True).stdout
    assert "stale" in status
    assert "unlocked" in amago("unlock", "runs/demo", check=True).stdout
    assert not (tmp_path / "runs/demo/.run.lock").exists()


def _start_slow_run(tmp_path: Path, steps: int = 400) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "amago_pipe.cli",
            "run",
            "p.yaml",
            "--set",
            f"stages.b.steps={steps}",
            "--set",
            "stages.b.step_seconds=0.02",
        ],
        cwd=tmp_path,
        env=cli_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_sigkill_mid_stage_then_run_resumes(amago, tmp_path, pipeline):
    proc = _start_slow_run(tmp_path)
    wait_for_progress(tmp_path)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert lock(tmp_path)["b"]["status"] == "running"
    plan = amago("plan", "p.yaml", "--set", "stages.b.steps=400", "--set", "stages.b.step_seconds=0.02", check=True)
    assert "will resume b — interrupted" in plan.stdout
    resumed = _start_slow_run(tmp_path, 400)
    stdout, stderr = resumed.communicate(timeout=120)
    assert resumed.returncode == 0, stderr
    assert "resume b" in stdout
    assert lock(tmp_path)["b"]["metrics"]["started_at_step"] > 0


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_signal_marks_interrupted_and_exits(tmp_path, pipeline, sig, code):
    proc = _start_slow_run(tmp_path)
    wait_for_progress(tmp_path)
    proc.send_signal(sig)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == code, stderr
    assert "interrupted" in stderr and "Traceback" not in stderr
    assert lock(tmp_path)["b"]["status"] == "interrupted"
    assert not (tmp_path / "runs/demo/.run.lock").exists()


def test_keys_added_since_a_record_was_made_rerun_nothing_at_their_defaults(amago, tmp_path, pipeline):
    """An upgrade that adds config keys (at defaults that keep the old behaviour) re-runs nothing; a recorded
    config that differs from today's once those defaults are filled in still re-runs."""
    amago("run", "p.yaml", check=True)
    path = tmp_path / "runs/demo/pipeline.lock.json"
    data = json.loads(path.read_text())
    assert data["stages"]["a"]["config"]["stage"]["needs"] is None  # a key at its default, as if added since
    del data["stages"]["a"]["config"]["stage"]["needs"]
    assert data["stages"]["c"]["config"]["stage"]["needs"] == ["a"]  # and one that is not
    del data["stages"]["c"]["config"]["stage"]["needs"]
    path.write_text(json.dumps(data))
    out = amago("run", "p.yaml", check=True).stdout
    assert counts(tmp_path) == {"a": 1, "b": 1, "c": 2}
    assert "config changed (needs)" in out and out.count("unchanged") == 2
