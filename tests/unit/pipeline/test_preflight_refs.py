"""Load-time checks (`amago-pipe validate`) of what names another stage or conflicts within a train stage, and of env
ids against gymnasium's registry: each used to surface only after the stages before it ran."""

from __future__ import annotations

from pathlib import Path

import pytest

from amago_pipe.config.loader import load_pipeline
from amago_pipe.errors import ConfigError
from amago_pipe.pipeline.preflight import check_env_ids

TRAIN = "{type: train, epochs: 3, updates_per_epoch: 2}"
BASE = f"""\
version: 1
name: refs
store: store.zarr
stages:
  collect: {{type: collect, env: {{id: CartPole-v1, n_envs: 2}}, policies: [{{policy: {{type: random}}, episodes: 2}}]}}
  pre: {TRAIN}
  train: {TRAIN[:-1]}, needs: [collect]}}
  eval: {{type: evaluate, env: {{id: CartPole-v1, n_envs: 2}}, episodes: 2}}
  export: {{type: export}}
"""


def load(tmp_path: Path, *overrides: str) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(BASE)
    load_pipeline(path, overrides, checks=(check_env_ids,))


@pytest.mark.parametrize(
    "overrides",
    [
        [],
        ["stages.train.init_from={stage: pre, which: 3}", "stages.train.needs=[collect, pre]"],
        ["stages.eval.train_stage=train", "stages.eval.checkpoint=3"],
        ["stages.eval.needs=[pre, train]", "stages.eval.train_stage=pre"],
        ["stages.export.train_stage=train"],  # upstream behind eval
        ["stages.export.needs=[train, eval]"],  # the same train stage, directly and behind eval
        ["stages.train.agent={type: agent, conservative_coeff: 1.0}"],  # the action kind is told by `plan`
    ],
)
def test_valid_references_load(tmp_path: Path, overrides: list[str]) -> None:
    load(tmp_path, *overrides)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            ["stages.train.init_from={stage: pr}"],
            "stages.train.init_from.stage: unknown stage 'pr' (stages: collect, pre, train, eval, export); "
            "did you mean 'pre'?",
        ),
        (["stages.train.init_from={stage: train}"], "stages.train.init_from.stage: 'train' is this stage itself"),
        (
            ["stages.train.init_from={stage: collect}"],
            "stages.train.init_from.stage: 'collect' is a collect stage, not a train stage (train stages: pre, train)",
        ),
        (
            ["stages.train.init_from={stage: pre}"],
            "stages.train.init_from.stage: 'pre' is not among the needs of this stage (needs: collect), so it could "
            "start before 'pre' has trained and would not re-run when 'pre' changes; add it: `needs: [collect, pre]`",
        ),
        (
            ["stages.train.init_from={stage: pre, which: best}", "stages.train.needs=[pre]"],
            "stages.train.init_from.which: stage 'pre' has no best checkpoint: `best` is the validation-best epoch",
        ),
        (
            ["stages.train.init_from={stage: pre, which: 7}", "stages.train.needs=[pre]"],
            "stages.train.init_from.which: epoch 7 does not exist: train stage 'pre' trains 3 epochs",
        ),
        (
            ["stages.eval.train_stage=trian"],
            "stages.eval.train_stage: unknown stage 'trian' (stages: collect, pre, train, eval, export); "
            "did you mean 'train'?",
        ),
        (["stages.eval.train_stage=collect"], "stages.eval.train_stage: 'collect' is a collect stage, not a train"),
        (
            ["stages.eval.needs=[collect]"],
            "stages.eval.train_stage: null picks the one train stage among `needs` (needs: collect; train stages "
            "among them: none); set `train_stage:`",
        ),
        (["stages.eval.baseline=eval"], "stages.eval.baseline: 'eval' is this stage itself"),
        (["stages.eval.baseline=train"], "stages.eval.baseline: 'train' is a train stage; baseline compares with"),
        (["stages.eval.checkpoint=9"], "stages.eval.checkpoint: epoch 9 does not exist: train stage 'train' trains 3"),
        (["stages.export.train_stage=trian"], "stages.export.train_stage: unknown stage 'trian'"),
        (
            ["stages.export.train_stage=pre"],
            "stages.export.train_stage: 'pre' is not upstream of this stage (needs: eval)",
        ),
        (
            ["stages.export.needs=[pre, eval]"],
            "stages.export.train_stage: null picks the one train stage upstream (in `needs`, or the one an evaluate "
            "stage in `needs` evaluates); found pre, train (needs: pre, eval); set `train_stage:`",
        ),
        (
            ["stages.train.agent={type: agent, conservative_coeff: 1.0, critic: {discrete_as_continuous: true}}"],
            "stages.train.agent.conservative_coeff: 1.0 needs a critic with one output per discrete action, but "
            "agent.critic.discrete_as_continuous is true",
        ),
        (
            ["stages.train.model.traj_encoder={type: transformer, attention: flash}"],
            "stages.train.model.traj_encoder.attention: 'flash' runs in bfloat16 on a CUDA GPU, but this stage "
            "trains with mixed_precision: 'no' (float32); set `mixed_precision: bf16`",
        ),
        (
            ["stages.eval.env.id=CartPol-v1"],
            "stages.eval.env.id: unknown gymnasium env 'CartPol-v1'; did you mean 'CartPole-v1'?",
        ),
        (
            ["stages.collect.env.id=amago_pipe/TMze-v0"],
            "stages.collect.env.id: unknown gymnasium env 'amago_pipe/TMze-v0'; did you mean 'amago_pipe/TMaze-v0'?",
        ),
        (
            ["stages.eval.env={tasks: [{id: CartPole-v1}, {id: Acrobt-v1}]}"],
            "stages.eval.env.tasks.1.id: unknown gymnasium env 'Acrobt-v1'; did you mean 'Acrobot-v1'?",
        ),
    ],
)
def test_a_wrong_reference_is_refused_at_load_time(tmp_path: Path, overrides: list[str], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        load(tmp_path, *overrides)
    assert any(message in line for line in info.value.problems), info.value.problems


def test_ids_of_optional_packages_are_left_to_plan(tmp_path: Path) -> None:
    load(tmp_path, "stages.collect.env.id=popgym/NoSuchTask-v0", "stages.eval.env.id=nosuchmodule:Env-v0")
