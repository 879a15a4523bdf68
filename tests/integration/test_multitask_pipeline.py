"""A task set through collect -> train (validate) -> evaluate -> export -> play: the task name travels with every
episode, into the validation metrics, the evaluate report (held-out tasks apart) and the export manifest; the export
says how its scores were measured and `play` reproduces that by default (the recorded env, sampled actions); an
edited manifest is refused."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from amago_pipe.store import TrajectoryStore

REPO = Path(__file__).resolve().parents[2]
PIPELINE = REPO / "pipelines/multitask-tmaze.yaml"
VALIDATE = (
    "stages.train.validate={env: {tasks: [{id: amago_pipe/TMaze-v0, name: corridor-10, kwargs: {corridor_length: 3, "
    "max_steps: 6}}], held_out: [{id: amago_pipe/TMaze-v0, name: corridor-20, kwargs: {corridor_length: 4, "
    "max_steps: 8}}], n_envs: 2}, episodes: 4, every: 1}"
)


def test_task_names_reach_store_metrics_report_and_export(amago, tmp_path: Path) -> None:
    smoke = yaml.safe_load((REPO / "tests/smoke/smoke_overrides.yaml").read_text())[PIPELINE.name]
    args = [a for item in [*smoke, VALIDATE, "stages.evaluate.greedy=false"] for a in ("--set", item)]
    proc = amago("run", str(PIPELINE), *args, "--run-dir", "run", timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    store = TrajectoryStore.open(tmp_path / "runs/multitask-tmaze/store.zarr")
    names = {ep.env_name for ep in store.iter_episodes("protected")}
    assert names == {"corridor-10", "corridor-30"}  # never the held-out task
    rows = [json.loads(line) for line in (tmp_path / "run/stages/train/metrics.jsonl").read_text().splitlines()]
    val = next(r for r in rows if "val/return_mean" in r)
    assert {"val/task/corridor-10/return_mean", "val/held_out/return_mean", "val/training/return_mean"} <= set(val)
    report = json.loads((tmp_path / "run/stages/evaluate/report.json").read_text())
    summary = report["summary"]
    assert set(summary["per_env"]) == {"corridor-10", "corridor-30", "corridor-20"}
    assert summary["held_out"]["tasks"] == ["corridor-20"] and summary["held_out"]["episodes"] == 1
    assert "| corridor-20 | held-out |" in (tmp_path / "run/stages/evaluate/summary.md").read_text()
    manifest = json.loads((tmp_path / "run/stages/export/artifact/manifest.json").read_text())
    assert manifest["source"]["tasks"] == ["corridor-10", "corridor-30"]
    assert set(manifest["evaluation"]["per_env"]) == {"corridor-10", "corridor-30", "corridor-20"}
    export = tmp_path / "run/stages/export/artifact"
    assert "Measured with **sampled** actions" in (export / "README.md").read_text()
    played = amago("play", str(export), "--episodes", "4", timeout=300)
    assert "over 4 episodes of corridor-10+corridor-30 (sampled actions)" in played.stdout, (
        played.stdout + played.stderr
    )
    greedy = amago("play", str(export), "--episodes", "1", "--greedy", timeout=300)
    assert "(greedy actions)" in greedy.stdout, greedy.stdout + greedy.stderr
    manifest["program"]["state"] = []  # a hand edit of the step-program contract
    (export / "manifest.json").write_text(json.dumps(manifest))
    edited = amago("play", str(export), "--episodes", "1", timeout=300)
    assert edited.returncode == 3 and "the manifest was edited after export" in edited.stderr, edited.stderr
    assert "Traceback" not in edited.stderr
