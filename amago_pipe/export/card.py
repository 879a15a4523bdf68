"""The model card (README.md) of an export directory, written from its manifest. Standard library only."""

from __future__ import annotations

from typing import Any


def action_mode(evaluation: dict[str, Any]) -> str:
    """The line saying whether the scores were measured with greedy or sampled actions (and what acts greedily)."""
    where = f"evaluate stage `{evaluation.get('stage', '?')}`"
    if evaluation.get("greedy") is False:
        return (
            f"Measured with **sampled** actions ({where}). The exported step programs act greedily (the most likely "
            "action); sample with `Policy.act(obs, sample=True)`, and `amago-pipe play` samples by default for "
            "this export."
        )
    if evaluation.get("greedy") is None:
        return f"Measured by {where} (greedy or sampled actions: not recorded)."
    return f"Measured with **greedy** actions ({where}), as the exported step programs act."


def model_card(manifest: dict[str, Any]) -> str:
    """Markdown: what the policy was trained on and how, its scores, its verification and how to load it."""
    policy, source = manifest["policy"], manifest.get("source") or {}
    spec = policy["spec"]
    model = policy.get("model", {})
    traj, tstep = model.get("traj_encoder", {}), model.get("tstep_encoder", {})
    observations = ", ".join(f"`{k}` {tuple(v['shape'])} {v['dtype']}" for k, v in spec["observations"].items())
    action = spec["action"]
    action_text = f"{action['kind']} " + (
        f"({action['n']})" if action["kind"] == "discrete" else str(tuple(action["shape"]))
    )
    lines = [
        f"# {source.get('pipeline', 'amago-pipe')} / {source.get('train_stage', 'train')} policy",
        "",
        f"Exported by amago-pipe {manifest['amago_pipe_version']} (format {manifest['format']}) on {manifest['created']}.",
        "",
        "## What it was trained on, and how",
        "",
        f"- Environment: {source.get('env') or 'see the pipeline'}; observations {observations}; action {action_text}.",
        *_wrappers_line(spec),
        f"- Data: {', '.join(f'{k} ({v:g})' for k, v in (source.get('partitions') or {}).items()) or 'n/a'}.",
        f"- Network: `{tstep.get('type', '?')}` timestep encoder, `{traj.get('type', '?')}` trajectory encoder "
        f"(d_model {traj.get('d_model', '?')}), context {policy['max_seq_len']} steps; agent `{policy.get('agent', {}).get('type', '?')}`.",
        f"- Checkpoint: `{source.get('checkpoint', '?')}` (epoch {policy.get('epoch', '?')}) of run "
        f"`{source.get('run', '?')}` (train config {str(source.get('train_config_hash', '?'))[:12]}).",
        "",
        "## Scores",
        "",
    ]
    evaluation = manifest.get("evaluation")
    if evaluation:
        keys = ("episodes", "return_mean", "return_std", "return_min", "return_max", "success_rate", "length_mean")
        lines += [action_mode(evaluation), ""]
        lines += [
            "| " + " | ".join(k for k in keys if k in evaluation) + " |",
            "|" + "---|" * sum(k in evaluation for k in keys),
        ]
        lines.append("| " + " | ".join(_fmt(evaluation[k]) for k in keys if k in evaluation) + " |")
    else:
        lines.append("No evaluation was recorded with this export (run an evaluate stage before the export stage).")
    check = manifest["verification"]
    errors = ", ".join(f"{k} {v:.2g}" for k, v in check["max_error"].items())
    lines += [
        "",
        "## Verification",
        "",
        f"{check['episodes']} recorded episodes were replayed for {check['steps']} steps through the original agent "
        f"and every exported form; largest action difference: {errors} (tolerance {check['tolerance']:g}).",
        "",
        "## How to load it",
        "",
        "```python",
        "from amago_pipe import Policy",
        "",
        'policy = Policy.load("path/to/this/folder")',
        "policy.reset(n_envs=1)",
        "action = policy.act(obs)                     # first step of an episode",
        "action = policy.act(obs, reward=reward)      # later steps",
        "```",
        "",
        'Without amago-pipe: `torch.jit.load("policy.pt")` or `onnxruntime.InferenceSession("policy.onnx")` run one '
        "step with the memory as explicit inputs and outputs:",
        "",
        "| memory tensor | shape (N = envs) | dtype | batch axis | initial value |",
        "|---|---|---|---|---|",
        *(
            f"| `{s['name']}` | {tuple(s['shape'])} | {s['dtype']} | {s['batch_axis']} | {s['init']} |"
            for s in manifest["program"]["state"]
        ),
        *(["| (none: no memory) | | | | |"] if not manifest["program"]["state"] else []),
        "",
        manifest["program"]["usage"],
        "",
    ]
    return "\n".join(lines)


def _fmt(value: Any) -> str:
    return f"{value:.3g}" if isinstance(value, float) else str(value)


def _wrappers_line(spec: dict[str, Any]) -> list[str]:
    """The card's line on the env wrappers the observations came through (none when there were none)."""
    records = spec.get("transforms")
    if not records:
        return []
    shown = [
        f"{r.get('type')}({', '.join(f'{k}={v}' for k, v in r.items() if k != 'type' and v is not None)})"
        for r in records
    ]
    return [
        f"- Env wrappers, in order: {', '.join(shown)}; build the env with them: `policy.make_env(env_id)` or "
        "`policy.wrap_env(env)` (`play` does)."
    ]
