"""`amago-pipe collect`: roll out a policy in an env into a store partition or a new local Minari dataset.

Parses options, builds the same CollectStageConfig a pipeline uses and calls `run_collect`; heavy imports inside.
"""

from __future__ import annotations

import json
from typing import Any

import click

from amago_pipe.cli.common import Verbosity, parse_key_values, parse_obs_keys
from amago_pipe.errors import ConfigError
from amago_pipe.progress import progress_bar


def build_config(data: dict[str, Any]) -> Any:
    """Strictly build a CollectStageConfig from plain data (ConfigError lists every problem)."""
    from amago_pipe.config.build import build_strict
    from amago_pipe.config.collect import CollectStageConfig

    return build_strict(CollectStageConfig, {"type": "collect", **data})


MODES = ["sync", "async", "already_vectorized"]
"""Values of `--mode` (the env config's `mode`)."""
BATCHED_PREFIXES = ("gymnax/",)
"""Env ids that step all their copies as one batch: `--mode` defaults to already_vectorized for them."""

OPTIONS = [
    click.option(
        "--policy",
        default="random",
        show_default=True,
        help="Short form of a policy component: random, cartpole-pd, pendulum-energy, tmaze-walker, "
        "key-door-explorer[:EPSILON], alchemy-player, reach-searcher, babyai-bot, scripted:pkg.mod:function, "
        "checkpoint:path/to/policy.safetensors, pkg.mod:Factory.",
    ),
    click.option("--episodes", type=int, help="Number of episodes to collect."),
    click.option("--store", "store_path", metavar="PATH", help="Trajectory store to append to (with --partition)."),
    click.option("--partition", default="protected", show_default=True, help="Store partition to write."),
    click.option("--minari-id", metavar="NS/NAME-vN", help="Write a new local Minari dataset with this id instead."),
    click.option(
        "--exploration",
        default="none",
        show_default=True,
        metavar="TYPE[:VALUE]",
        help="none, egreedy:EPSILON (any action space), gaussian:STD (continuous, [-1, 1] units), bilevel:HORIZON.",
    ),
    click.option("--n-envs", type=int, help="Parallel environments (default 8; with --follow: the stage's)."),
    click.option(
        "--mode",
        type=click.Choice(MODES),
        help="sync: one process; async: one subprocess per env; already_vectorized: the env steps the whole batch "
        "itself (default for gymnax/ ids, else sync).",
    ),
    click.option("--max-episode-steps", type=int, help="Time limit per episode (default: the env's own)."),
    click.option(
        "--obs-keys",
        metavar="KEY,KEY",
        help="Keep only these keys of a Dict observation (e.g. image,direction for MiniGrid).",
    ),
    click.option(
        "--wrapper",
        "wrappers",
        multiple=True,
        metavar="TYPE|{type: TYPE, ...}",
        help="Env wrapper, applied in order (repeatable): a type (atari, grayscale, pkg.mod:Name) or a YAML mapping, "
        "e.g. --wrapper atari --wrapper '{type: frame_stack, k: 4}'. What they return is what is stored.",
    ),
    click.option(
        "--env-kwarg",
        "env_kwargs",
        multiple=True,
        metavar="KEY=VALUE",
        help="Env constructor argument (repeatable; YAML values).",
    ),
    click.option(
        "--seed",
        type=int,
        help="Seed of env resets and the policy (default 0; with --follow: a fresh one per actor, printed, so that "
        "actors never collect the same episodes).",
    ),
    click.option("--overwrite", is_flag=True, help="Replace an existing Minari dataset made by amago-pipe collect."),
    click.option(
        "--follow",
        "follow_dir",
        metavar="RUN_DIR",
        type=click.Path(file_okay=False),
        help="Act with the newest policy of RUN_DIR's running online train stage until it finishes (decoupled actor).",
    ),
    click.option("--stage", help="With --follow: the online train stage (default: the only one)."),
]
"""Options of `amago-pipe collect`."""


def _with_options(func: Any) -> Any:
    for option in reversed(OPTIONS):
        func = option(func)
    return func


@click.command()
@click.argument("env_id", required=False)
@_with_options
@click.pass_obj
def collect(obj: Verbosity | None, **opts: Any) -> None:
    """Collect EPISODES episodes of POLICY in gymnasium env ENV_ID (e.g. CartPole-v1).

    \b
    amago-pipe collect CartPole-v1 --policy random --episodes 100 --minari-id cartpole/random-v0
    amago-pipe collect CartPole-v1 --policy cartpole-pd --exploration egreedy:0.3 --episodes 100 --store runs/s.zarr
    amago-pipe collect --follow runs/online-cartpole     # one more actor for a running online train stage
    """
    if opts["follow_dir"] is not None:
        _check_follow_options(opts)
        _follow(
            obj,
            opts["follow_dir"],
            stage=opts["stage"],
            store=opts["store_path"],
            n_envs=opts["n_envs"],
            seed=opts["seed"] if opts["seed"] is not None else fresh_seed(),
        )
        return
    opts["seed"] = opts["seed"] or 0
    env_id, store_path, minari_id = opts["env_id"], opts["store_path"], opts["minari_id"]
    if env_id is None or opts["episodes"] is None:
        raise ConfigError("collect: give ENV_ID and --episodes N (or --follow RUN_DIR to act for a running learner)")
    if (store_path is None) == (minari_id is None):
        raise ConfigError("collect: give exactly one output: --store PATH (with --partition) or --minari-id NS/NAME-v0")
    env = {
        "id": env_id,
        "n_envs": opts["n_envs"] or 8,
        "mode": env_mode(env_id, opts["mode"]),
        "max_episode_steps": opts["max_episode_steps"],
    }
    if opts["obs_keys"]:
        env["obs_keys"] = parse_obs_keys(opts["obs_keys"])
    if opts["env_kwargs"]:
        env["kwargs"] = parse_key_values(opts["env_kwargs"], "--env-kwarg", "render_mode=rgb_array")
    if opts["wrappers"]:
        env["wrappers"] = [parse_wrapper(text) for text in opts["wrappers"]]
    data: dict[str, Any] = {
        "env": env,
        "policies": [{"policy": _policy(opts["policy"], opts["exploration"]), "episodes": opts["episodes"]}],
        "seed": opts["seed"],
        **({"output": "store", "partition": opts["partition"], "replace": False} if store_path else {}),  # appends
        **({"output": "minari", "dataset_id": minari_id, "replace": opts["overwrite"]} if minari_id else {}),
    }
    cfg = build_config(data)
    report = _run_with_progress(cfg, store_path, opts["seed"], quiet=bool(obj and obj.level < 0))
    _print_report(report, level=obj.level if obj else 0)


FOLLOW_IGNORES = {
    "env_id": "ENV_ID",
    "episodes": "--episodes",
    "minari_id": "--minari-id",
    "env_kwargs": "--env-kwarg",
    "obs_keys": "--obs-keys",
    "max_episode_steps": "--max-episode-steps",
    "wrappers": "--wrapper",
}
"""Options a follower takes from the followed stage's config instead (refused beside --follow)."""


def _check_follow_options(opts: dict[str, Any]) -> None:
    """ConfigError naming the options that --follow would ignore (the stage's config decides them)."""
    given = [flag for key, flag in FOLLOW_IGNORES.items() if opts.get(key)]
    given += [
        f"--{k}" for k, default in (("policy", "random"), ("exploration", "none"), ("mode", None)) if opts[k] != default
    ]
    if opts["partition"] != "protected":
        given.append("--partition")
    if given:
        raise ConfigError(
            f"collect --follow: {', '.join(given)} cannot be used with --follow: a follower acts with the followed "
            "stage's policy, env and exploration and writes its online partition (only --stage, --store, --n-envs "
            "and --seed apply); drop them"
        )


def parse_wrapper(text: str) -> dict[str, Any]:
    """`--wrapper` value: a bare type (`atari`, `pkg.mod:Name`) or a YAML mapping with `type`."""
    from amago_pipe.config.yaml_io import parse_scalar

    value = parse_scalar(text) if text.lstrip().startswith("{") else {"type": text.strip()}
    if not isinstance(value, dict) or not value.get("type"):
        raise ConfigError(
            f"collect --wrapper: '{text}' is neither a wrapper type nor a mapping with `type`; write e.g. "
            "--wrapper atari or --wrapper '{type: frame_stack, k: 4}'"
        )
    return value


def env_mode(env_id: str, mode: str | None) -> str:
    """`--mode`, or its default for `env_id`: already_vectorized for batched ids (gymnax/...), else sync."""
    batched = env_id.startswith(BATCHED_PREFIXES)
    if mode is None:
        return "already_vectorized" if batched else "sync"
    if batched and mode != "already_vectorized":
        raise ConfigError(
            f"collect --mode {mode}: env '{env_id}' steps all its copies as one batch; drop --mode (it defaults to "
            "already_vectorized for this env) or give --mode already_vectorized"
        )
    return mode


def fresh_seed() -> int:
    """A seed from the OS's entropy (decoupled actors each get their own stream)."""
    import secrets

    return secrets.randbelow(2**31)


def _follow(obj: Verbosity | None, run_dir: str, **options: Any) -> None:
    """`collect --follow`: a decoupled actor of a running online train stage; prints one line per chunk."""
    from pathlib import Path

    from amago_pipe.pipeline.follow import follow

    level = obj.level if obj else 0

    def start() -> None:
        if level >= 0:
            click.echo(f"follower seed {options['seed']} (pass --seed {options['seed']} to repeat it)")

    def show(row: dict[str, Any]) -> None:
        if level >= 0:
            ret = row.get("online/return_mean")
            click.echo(
                f"policy v{row['policy_version']}: {row['online/env_steps']} env steps, {row['online/episodes']} "
                f"episodes" + (f", return mean {ret:.2f}" if ret is not None else "")
            )

    totals = follow(Path(run_dir), store_url=options.pop("store"), on_start=start, on_chunk=show, **options)
    if level < 0:
        return
    if totals.get("already_finished"):
        click.echo(f"stage '{totals['stage']}' of {run_dir} has already finished: nothing to follow")
    else:
        click.echo(
            f"stage '{totals['stage']}' finished: {totals['env_steps']} env steps, {totals['episodes']} episodes"
        )


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
