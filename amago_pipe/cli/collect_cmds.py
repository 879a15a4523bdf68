"""`amago-pipe collect`: roll out a policy in an env into a store partition or a new local Minari dataset.

Parses options, builds the same CollectStageConfig a pipeline uses and calls `run_collect`; heavy imports inside.
"""

from __future__ import annotations

import json
from typing import Any

import click

from amago_pipe.cli.common import Verbosity, parse_key_values
from amago_pipe.errors import ConfigError
from amago_pipe.progress import progress_bar


def build_config(data: dict[str, Any]) -> Any:
    """Strictly build a CollectStageConfig from plain data (ConfigError lists every problem)."""
    from amago_pipe.config.build import Problems, build
    from amago_pipe.config.collect import CollectStageConfig

    problems = Problems()
    cfg = build(CollectStageConfig, {"type": "collect", **data}, problems)
    problems.raise_if_any()
    return cfg


@click.command()
@click.argument("env_id")
@click.option(
    "--policy",
    default="random",
    show_default=True,
    help="Short form of a policy component: random, cartpole-pd, pendulum-energy, tmaze-walker, "
    "key-door-explorer[:EPSILON], scripted:pkg.mod:function, checkpoint:path/to/policy.safetensors, pkg.mod:Factory.",
)
@click.option("--episodes", type=int, required=True, help="Number of episodes to collect.")
@click.option("--store", "store_path", metavar="PATH", help="Trajectory store to append to (with --partition).")
@click.option("--partition", default="protected", show_default=True, help="Store partition to write.")
@click.option("--minari-id", metavar="NS/NAME-vN", help="Write a new local Minari dataset with this id instead.")
@click.option(
    "--exploration",
    default="none",
    show_default=True,
    metavar="TYPE[:VALUE]",
    help="none, egreedy:EPSILON (any action space), gaussian:STD (continuous, [-1, 1] units), bilevel:HORIZON.",
)
@click.option("--n-envs", type=int, default=8, show_default=True, help="Parallel environments.")
@click.option(
    "--mode",
    type=click.Choice(["sync", "async"]),
    default="sync",
    show_default=True,
    help="sync: one process; async: one subprocess per env.",
)
@click.option("--max-episode-steps", type=int, help="Time limit per episode (default: the env's own).")
@click.option(
    "--env-kwarg",
    "env_kwargs",
    multiple=True,
    metavar="KEY=VALUE",
    help="Env constructor argument (repeatable; YAML values).",
)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of env resets and the policy.")
@click.option("--overwrite", is_flag=True, help="Replace an existing Minari dataset made by amago-pipe collect.")
@click.pass_obj
def collect(
    obj: Verbosity | None,
    env_id: str,
    policy: str,
    episodes: int,
    store_path: str | None,
    partition: str,
    minari_id: str | None,
    exploration: str,
    n_envs: int,
    mode: str,
    max_episode_steps: int | None,
    env_kwargs: tuple[str, ...],
    seed: int,
    overwrite: bool,
) -> None:
    """Collect EPISODES episodes of POLICY in gymnasium env ENV_ID (e.g. CartPole-v1).

    \b
    amago-pipe collect CartPole-v1 --policy random --episodes 100 --minari-id cartpole/random-v0
    amago-pipe collect CartPole-v1 --policy cartpole-pd --exploration egreedy:0.3 --episodes 100 --store runs/s.zarr
    """
    if (store_path is None) == (minari_id is None):
        raise ConfigError("collect: give exactly one output: --store PATH (with --partition) or --minari-id NS/NAME-v0")
    env = {"id": env_id, "n_envs": n_envs, "mode": mode, "max_episode_steps": max_episode_steps}
    if env_kwargs:
        env["kwargs"] = parse_key_values(env_kwargs, "--env-kwarg", "render_mode=rgb_array")
    data: dict[str, Any] = {
        "env": env,
        "policies": [{"policy": _policy(policy, exploration), "episodes": episodes}],
        "seed": seed,
        **({"output": "store", "partition": partition, "replace": False} if store_path else {}),  # CLI appends
        **({"output": "minari", "dataset_id": minari_id, "replace": overwrite} if minari_id else {}),
    }
    cfg = build_config(data)
    report = _run_with_progress(cfg, store_path, seed, quiet=bool(obj and obj.level < 0))
    _print_report(report, level=obj.level if obj else 0)


def _policy(policy: str, exploration: str) -> dict[str, Any]:
    """The policy component the short forms of `--policy` and `--exploration` stand for."""
    from amago_pipe.config.policies import exploration_from_text, policy_from_text

    return {**policy_from_text(policy), "exploration": exploration_from_text(exploration)}


def _run_with_progress(cfg: Any, store_path: str | None, seed: int, *, quiet: bool) -> dict[str, Any]:
    from amago_pipe.envs.collect import run_collect

    with progress_bar(f"collect {cfg.env.env_name}", total=cfg.total_episodes, unit="episodes", quiet=quiet) as task:
        return run_collect(  # type: ignore[no-any-return]
            cfg, store_url=store_path, seed=seed, tag="cli", where="collect",
            on_episode=lambda _ep, _st: task.advance(),
        )  # fmt: skip


def _print_report(report: dict[str, Any], *, level: int) -> None:
    out = report["output"]
    total = report["total"]
    where = (
        f"{out['store']} [{out['partition']}]"
        if out["kind"] == "store"
        else f"minari:{out['dataset_id']} ({out['path']})"
    )
    if level < 0:
        return
    click.echo(
        f"collected {total['episodes']} episodes, {report['timesteps']} steps in {report['seconds']:.1f}s -> {where}\n"
        f"return mean {total['return_mean']:.2f} (median {total['return_median']:.2f}, "
        f"min {total['return_min']:.2f}, max {total['return_max']:.2f}); mean length {total['length_mean']:.1f}"
    )
    if level > 0:
        click.echo(json.dumps(report, indent=2))


COMMANDS = [collect]
"""Commands this module adds to the `amago-pipe` group."""
