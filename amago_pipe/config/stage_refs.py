"""Load-time checks across stages: `init_from`, `train_stage` and `baseline` name the right kind of stage upstream,
and a train stage's options fit each other (`conservative_coeff`, `attention: flash`).

Config only (no torch, no gymnasium): what needs an env, the store or an optional package is checked when a run is
planned (`amago_pipe.pipeline.preflight`).
"""

from __future__ import annotations

from typing import cast

from amago_pipe.config.build import Problems
from amago_pipe.config.evaluate import EvaluateStageConfig
from amago_pipe.config.export import ExportStageConfig
from amago_pipe.config.pipeline import PipelineConfig
from amago_pipe.config.train import TrainStageConfig
from amago_pipe.errors import did_you_mean

Needs = dict[str, list[str]]


def check_stage_references(cfg: PipelineConfig, needs: Needs, problems: Problems) -> None:
    """Every reference of a stage to another stage, and the train stages' option conflicts."""
    for name, stage in cfg.stages.items():
        if isinstance(stage, TrainStageConfig):
            _check_init_from(cfg, name, stage, needs, problems)
            _check_train_options(name, stage, problems)
        elif isinstance(stage, EvaluateStageConfig):
            _check_evaluate(cfg, name, stage, needs, problems)
        elif isinstance(stage, ExportStageConfig):
            _check_export(cfg, name, stage, needs, problems)


def upstream_of(needs: Needs, name: str) -> set[str]:
    """Every stage `name` needs, directly or through others."""
    out: set[str] = set()
    frontier = [name]
    while frontier:
        for dep in needs.get(frontier.pop(), []):
            if dep not in out:
                out.add(dep)
                frontier.append(dep)
    return out


def _trains(cfg: PipelineConfig) -> str:
    return ", ".join(n for n, s in cfg.stages.items() if isinstance(s, TrainStageConfig)) or "none"


def _needs_fix(needs: Needs, name: str, target: str) -> str:
    return f"add it: `needs: [{', '.join([*needs.get(name, []), target])}]`"


def _train_ref_problem(cfg: PipelineConfig, needs: Needs, name: str, ref: str, *, upstream: bool) -> str:
    """Why `ref` cannot be the train stage stage `name` reads ('' when it can); `upstream`: directly or not."""
    names = list(cfg.stages)
    if ref == name:
        return f"'{ref}' is this stage itself; name another, earlier train stage (train stages: {_trains(cfg)})"
    if ref not in cfg.stages:
        return f"unknown stage '{ref}' (stages: {', '.join(names)}){did_you_mean(ref, names)}"
    if not isinstance(cfg.stages[ref], TrainStageConfig):
        return f"'{ref}' is a {cfg.stages[ref].type} stage, not a train stage (train stages: {_trains(cfg)})"
    reachable = upstream_of(needs, name) if upstream else set(needs.get(name, []))
    if ref not in reachable:
        deps = ", ".join(needs.get(name, [])) or "none"
        return (
            f"'{ref}' is not {'upstream of' if upstream else 'among the needs of'} this stage (needs: {deps}), so "
            f"it could start before '{ref}' has trained and would not re-run when '{ref}' changes; "
            + _needs_fix(needs, name, ref)
        )
    return ""


def _epoch_problem(cfg: PipelineConfig, ref: str, which: object) -> str:
    """Why epoch `which` of train stage `ref` can never exist ('' when it may)."""
    train = cfg.stages.get(ref)
    if isinstance(which, int) and isinstance(train, TrainStageConfig) and which > train.epochs:
        return f"epoch {which} does not exist: train stage '{ref}' trains {train.epochs} epochs; pick one of 1..{train.epochs}, latest or best"
    return ""


def _check_init_from(cfg: PipelineConfig, name: str, stage: TrainStageConfig, needs: Needs, problems: Problems) -> None:
    init = stage.init_from
    if init is None:
        return
    where = f"stages.{name}.init_from"
    problem = _train_ref_problem(cfg, needs, name, init.stage, upstream=False)
    if problem:
        problems.add(f"{where}.stage", problem)
        return
    source = cast(TrainStageConfig, cfg.stages[init.stage])  # a train stage: checked above
    if init.which == "best" and source.validate is None:
        problems.add(
            f"{where}.which",
            f"stage '{init.stage}' has no best checkpoint: `best` is the validation-best epoch, and '{init.stage}' "
            "has no `validate:`; add a `validate:` block there or use `which: latest`",
        )
    elif problem := _epoch_problem(cfg, init.stage, init.which):
        problems.add(f"{where}.which", problem)


def _check_train_options(name: str, stage: TrainStageConfig, problems: Problems) -> None:
    where = f"stages.{name}"
    if stage.agent.conservative_coeff > 0 and stage.agent.critic.discrete_as_continuous:
        problems.add(
            f"{where}.agent.conservative_coeff",
            f"{stage.agent.conservative_coeff} needs a critic with one output per discrete action, but "
            "agent.critic.discrete_as_continuous is true (the action is a critic input); set conservative_coeff: 0 "
            "or discrete_as_continuous: false",
        )
    if getattr(stage.model.traj_encoder, "attention", None) == "flash":
        why = "device: cpu" if stage.device == "cpu" else "mixed_precision: 'no' (float32)"
        if stage.device == "cpu" or stage.mixed_precision == "no":
            problems.add(
                f"{where}.model.traj_encoder.attention",
                f"'flash' runs in bfloat16 on a CUDA GPU, but this stage trains with {why}; set "
                "`mixed_precision: bf16` (with device auto or cuda), or `attention: sdpa`",
            )


def train_stage_candidates(cfg: PipelineConfig, needs: Needs, name: str) -> list[str]:
    """The train stages an evaluate or export stage `name` may load: its `train_stage:`, else the train stages
    among its needs — for an export stage also those its upstream evaluate stages load. The one place that
    answers "which train stage" for evaluate, export, their load-time checks and their runs."""
    stage = cfg.stages[name]
    ref = getattr(stage, "train_stage", None)
    if ref is not None:
        return [ref]
    deps = needs.get(name, [])
    found = [d for d in deps if isinstance(cfg.stages.get(d), TrainStageConfig)]
    if isinstance(stage, ExportStageConfig):
        for d in deps:
            if isinstance(cfg.stages.get(d), EvaluateStageConfig):
                found += [t for t in train_stage_candidates(cfg, needs, d) if t not in found]
    return found


def _check_evaluate(
    cfg: PipelineConfig, name: str, stage: EvaluateStageConfig, needs: Needs, problems: Problems
) -> None:
    where = f"stages.{name}"
    deps = needs.get(name, [])
    if stage.train_stage is not None:
        if problem := _train_ref_problem(cfg, needs, name, stage.train_stage, upstream=True):
            problems.add(f"{where}.train_stage", problem)
        elif problem := _epoch_problem(cfg, stage.train_stage, stage.checkpoint):
            problems.add(f"{where}.checkpoint", problem)
    else:
        trains = train_stage_candidates(cfg, needs, name)
        if len(trains) != 1:
            problems.add(
                f"{where}.train_stage",
                f"null picks the one train stage among `needs` (needs: {', '.join(deps) or 'none'}; train stages "
                f"among them: {', '.join(trains) or 'none'}); set `train_stage:` or list one train stage in `needs:`",
            )
        elif problem := _epoch_problem(cfg, trains[0], stage.checkpoint):
            problems.add(f"{where}.checkpoint", problem)
    if stage.baseline is not None and (problem := _baseline_problem(cfg, needs, name, stage.baseline)):
        problems.add(f"{where}.baseline", problem)


def _baseline_problem(cfg: PipelineConfig, needs: Needs, name: str, baseline: str) -> str:
    """Why `baseline` cannot be the evaluate stage evaluate stage `name` compares with ('' when it can)."""
    names, deps = list(cfg.stages), needs.get(name, [])
    evaluates = ", ".join(n for n, s in cfg.stages.items() if isinstance(s, EvaluateStageConfig) and n != name)
    if baseline == name:
        return f"'{baseline}' is this stage itself; name an earlier evaluate stage to compare with"
    if baseline not in cfg.stages:
        return f"unknown stage '{baseline}' (stages: {', '.join(names)}){did_you_mean(baseline, names)}"
    if not isinstance(cfg.stages[baseline], EvaluateStageConfig):
        return (
            f"'{baseline}' is a {cfg.stages[baseline].type} stage; baseline compares with an earlier evaluate "
            f"stage's report (evaluate stages: {evaluates or 'none'})"
        )
    if baseline not in deps:
        fix = _needs_fix(needs, name, baseline)
        return f"'{baseline}' is not among this stage's needs ({', '.join(deps) or 'none'}); {fix}"
    return ""


def _check_export(cfg: PipelineConfig, name: str, stage: ExportStageConfig, needs: Needs, problems: Problems) -> None:
    where = f"stages.{name}"
    if stage.train_stage is not None:
        if problem := _train_ref_problem(cfg, needs, name, stage.train_stage, upstream=True):
            problems.add(f"{where}.train_stage", problem)
        elif problem := _epoch_problem(cfg, stage.train_stage, stage.checkpoint):
            problems.add(f"{where}.checkpoint", problem)
        return
    deps = needs.get(name, [])
    found = train_stage_candidates(cfg, needs, name)
    if len(found) != 1:
        problems.add(
            f"{where}.train_stage",
            f"null picks the one train stage upstream (in `needs`, or the one an evaluate stage in `needs` "
            f"evaluates); found {', '.join(sorted(found)) or 'none'} (needs: {', '.join(deps) or 'none'}); set "
            "`train_stage:`",
        )
    elif problem := _epoch_problem(cfg, found[0], stage.checkpoint):
        problems.add(f"{where}.checkpoint", problem)
