"""The `evaluate` stage: roll out a train stage's policy (latest, best or an epoch) over parallel envs.

Writes report.json (summary + every episode), summary.md, record.json (a result record, see pipeline/records.py)
and returns.png in the stage folder.
"""

from __future__ import annotations

import json
from typing import Any

from amago_pipe.config.evaluate import EvaluateStageConfig
from amago_pipe.config.stages import seed_from
from amago_pipe.errors import ConfigError
from amago_pipe.pipeline.evaluation_report import attempt_returns, evaluation_record, summary_markdown
from amago_pipe.pipeline.preflight import Preflight
from amago_pipe.pipeline.records import RECORD_FILE, write_record
from amago_pipe.pipeline.stage import Stage

REPORT_FORMAT = 1


class EvaluateStage(Stage):
    """Evaluates a trained policy; the first metric is `mean_return`."""

    Config = EvaluateStageConfig
    config: EvaluateStageConfig

    def preflight(self, checks: Preflight) -> None:
        """The env's spaces equal the training data's (with its held-out tasks, as evaluation runs them)."""
        checks.match_data(self.config.env, f"stages.{self.ctx.name}.env", held_out=True)

    def run(self) -> dict[str, Any]:
        from amago_pipe.envs.stats import summarize
        from amago_pipe.train.policy_loading import load_agent, policy_path
        from amago_pipe.train.runtime import pick_device
        from amago_pipe.train.validation import run_episodes

        cfg, ctx = self.config, self.ctx
        where = f"stages.{ctx.name}"
        train_name = ctx.train_stage()
        train_dir = ctx.run_dir / "stages" / train_name
        path = policy_path(train_dir, cfg.checkpoint, where=f"{where}.checkpoint")
        device = pick_device(cfg.device, f"{where}.device")
        agent, meta = load_agent(path, device=device)
        seed = seed_from(cfg.seed, cfg.env.seed, ctx.seed)
        with ctx.progress(f"evaluate {ctx.name}", total=cfg.episodes, unit="episodes") as task:
            result = run_episodes(
                agent,
                cfg.env,
                cfg.episodes,
                spec=agent.spec,
                greedy=cfg.greedy,
                seed=seed,
                device=device,
                where=where,
                check_stop=ctx.check_stop,
                on_episode=lambda episode, stats: task.advance(1),
            )
        summary = summarize(result.stats, held_out=result.held_out)
        report = {
            "format": REPORT_FORMAT,
            "env": cfg.env.env_name,
            "policy": {
                "train_stage": train_name,
                "which": cfg.checkpoint,
                "file": path.name,
                "epoch": meta.get("epoch"),
            },
            "greedy": cfg.greedy,
            "seed": seed,
            "summary": summary,
            "throughput": {"env_steps": result.env_steps, "seconds": round(result.seconds, 3)},
            "task_spaces": list(result.task_notes),
            "episodes": [s.to_json() for s in result.stats],
        }
        baseline = self.baseline_summary(cfg.baseline) if cfg.baseline is not None else None
        if baseline is not None:
            report["baseline"] = baseline
        (ctx.out_dir / "report.json").write_text(json.dumps(report, indent=1))
        (ctx.out_dir / "summary.md").write_text(summary_markdown(report))
        record = evaluation_record(
            report,
            stage=ctx.name,
            run_dir=ctx.run_dir,
            out_dir=ctx.out_dir,
            train_dir=train_dir,
            train_cfg=ctx.pipeline.stages[train_name],
            seed=ctx.pipeline.seed,
            machine=str(device),
        )
        write_record(ctx.out_dir / RECORD_FILE, record)
        if cfg.plots:
            self.write_plots(result.stats)
        out: dict[str, Any] = {
            "mean_return": summary.get("return_mean"),
            "median_return": summary.get("return_median"),
            "std_return": summary.get("return_std"),
            "bottom_quintile_return": summary.get("return_bottom_quintile"),
            "mean_length": summary.get("length_mean"),
            "episodes": summary.get("episodes"),
        }
        if "success_rate" in summary:
            out["success_rate"] = summary["success_rate"]
        if baseline is not None:
            out["baseline_return"] = baseline["return_mean"]
        return out

    def write_plots(self, stats: list[Any]) -> None:
        """returns.png (per env) and, for k-shot envs, attempts.png in the stage folder."""
        from amago_pipe.train.plots import plot_attempts, plot_returns

        name, out_dir = self.config.env.env_name, self.ctx.out_dir
        by_env: dict[str, list[float]] = {}
        for s in stats:
            by_env.setdefault(s.env_name, []).append(s.episode_return)
        plot_returns(by_env, out_dir / "returns.png", title=f"{name}: {len(stats)} episodes")
        attempts = attempt_returns(stats)
        if attempts:
            plot_attempts(attempts, out_dir / "attempts.png", title=f"{name}: return per attempt")

    def baseline_summary(self, name: str) -> dict[str, Any]:
        """Stage name, policy and mean return of the evaluate stage `name` (in `needs`) this one is compared with."""
        where = f"stages.{self.ctx.name}.baseline"
        folder = self.ctx.upstream.get(name)
        if folder is None or not isinstance(self.ctx.pipeline.stages[name], EvaluateStageConfig):
            raise ConfigError(f"{where}: '{name}' is not an evaluate stage among this stage's needs", path=where)
        earlier = json.loads((folder / "report.json").read_text())
        return {
            "stage": name,
            "policy": earlier["policy"],
            "return_mean": earlier["summary"].get("return_mean"),
            "success_rate": earlier["summary"].get("success_rate"),
        }
