"""`amago-pipe export RUN_DIR --out DIR` and `amago-pipe play EXPORT_DIR --env ID`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from amago_pipe.cli.common import Verbosity, parse_key_values, parse_obs_keys
from amago_pipe.progress import progress_bar


def _which(value: str) -> str | int:
    return int(value) if value.isdigit() else value


@click.command("export")
@click.argument("run_dir", type=click.Path(file_okay=False, path_type=Path))
@click.option(
    "--out", "out", required=True, type=click.Path(path_type=Path),
    help="Export directory to write: a new or empty folder, or an earlier export (replaced whole). Not inside the "
    "run directory or the store.",
)  # fmt: skip
@click.option("--stage", help="Train stage to export (default: the run's one train stage).")
@click.option("--checkpoint", default="latest", show_default=True, help="latest, best or an epoch number.")
@click.option("--form", "forms", multiple=True, type=click.Choice(["torchscript", "torch_export", "onnx"]),
              help="Portable programs to write (default: torchscript and torch_export, plus onnx when installed).")  # fmt: skip
@click.option("--store", help="Store to read verification episodes from (default: the stage's).")
@click.option("--verify-episodes", default=4, show_default=True, help="Recorded episodes replayed through every form.")
@click.option("--tolerance", default=1e-3, show_default=True, help="Largest relative action difference allowed.")
@click.pass_obj
def export(
    obj: Verbosity | None, run_dir: Path, out: Path, stage: str | None, checkpoint: str, forms: tuple[str, ...],
    store: str | None, verify_episodes: int, tolerance: float,
) -> None:  # fmt: skip
    """Export a trained policy of RUN_DIR as a verified, self-contained folder (see `Policy.load`)."""
    from amago_pipe.export.build import resolve_forms
    from amago_pipe.pipeline.export_run import export_run

    quiet = bool(obj and obj.level < 0)
    chosen = resolve_forms(list(forms) or None, where="--form")
    with progress_bar("export", total=None, unit="", quiet=quiet) as task:
        manifest = export_run(
            run_dir, out, stage=stage, which=_which(checkpoint), forms=chosen, tolerance=tolerance,
            episodes=verify_episodes, store_url=store, progress=lambda message: task.update(step=message),
        )  # fmt: skip
    if not quiet:
        errors = ", ".join(f"{k} {v:.2g}" for k, v in manifest["verification"]["max_error"].items())
        click.echo(f"exported {manifest['source']['train_stage']} ({checkpoint}) -> {out}: {', '.join(manifest['forms'])}; "
                   f"verified on {manifest['verification']['episodes']} episodes (max error {errors})")  # fmt: skip


@click.command("play")
@click.argument("export_dir", type=click.Path(file_okay=False, path_type=Path))
@click.option(
    "--env", "env_id",
    help="Gymnasium id, e.g. CartPole-v1 (default: the env the export's evaluate stage ran, with its obs_keys).",
)  # fmt: skip
@click.option("--env-kwarg", "env_kwargs", multiple=True, metavar="KEY=VALUE", help="Env constructor argument.")
@click.option(
    "--obs-keys", metavar="KEY,KEY", help="Keep only these keys of a Dict observation (as the env's obs_keys)."
)
@click.option("--episodes", default=10, show_default=True, help="Episodes to play.")
@click.option("--seed", default=0, show_default=True, help="Seed of the first reset (episode i gets seed + i).")
@click.option(
    "--sample/--greedy", default=None,
    help="Sample actions, or take the most likely (default: as the export's evaluation did; greedy if none recorded).",
)  # fmt: skip
@click.option("--video", type=click.Path(dir_okay=False, path_type=Path), help="Write the first episode as MP4.")
@click.pass_obj
def play(
    obj: Verbosity | None, export_dir: Path, env_id: str | None, env_kwargs: tuple[str, ...], obs_keys: str | None,
    episodes: int, seed: int, sample: bool | None, video: Path | None,
) -> None:  # fmt: skip
    """Run an exported policy in an environment and score it."""
    from amago_pipe.export.play import play_policy

    kwargs = parse_key_values(env_kwargs, "--env-kwarg", "size=9")
    result: dict[str, Any] = play_policy(
        export_dir, env_id, kwargs=kwargs, obs_keys=parse_obs_keys(obs_keys), episodes=episodes, seed=seed,
        sample=sample, video=video,
    )  # fmt: skip
    if obj is None or obj.level >= 0:
        for i, (ret, length) in enumerate(zip(result["returns"], result["lengths"], strict=True)):
            click.echo(f"episode {i}: return {ret:.3f}, {length} steps")
        for task, mean in result["per_task"].items():
            click.echo(f"task {task}: mean return {mean:.3f}")
        mode = "sampled" if result["sampled"] else "greedy"
        click.echo(f"mean return {result['return_mean']:.3f} over {episodes} episodes of {result['env']} ({mode} actions)" +
                   (f"; success rate {result['success_rate']:.2f}" if result.get("success_rate") is not None else "") +
                   (f"; video -> {video}" if video else ""))  # fmt: skip


COMMANDS = [export, play]
"""Commands this module adds to the `amago-pipe` group."""
