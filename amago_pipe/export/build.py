"""Make an export directory from a policy file: weights, TorchScript and ONNX step programs, verification, model
card and manifest, written to a temporary folder and moved into place only when every form acts like the
original agent on the replayed episodes (nothing is left half-written). Programs are serialised in memory and
written by Python: torch's own file writer aborts the process when the disk fills.
"""

from __future__ import annotations

import datetime as dt
import io
import shutil
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from amago_pipe import __version__
from amago_pipe.agents.loading import agent_from_weights
from amago_pipe.errors import AmagoPipeError, ConfigError, DataError, out_of_space, out_of_space_error
from amago_pipe.export.artifact import (
    CARD,
    FORM_FILES,
    FORMAT,
    WEIGHTS,
    WRITER,
    check_replaceable,
    move_into_place,
    partial_path,
    start_partial,
    write_manifest,
)
from amago_pipe.export.card import model_card
from amago_pipe.export.program import StepProgram, state_contract
from amago_pipe.export.replay import StepFn, action_error, build_replay, replay_agent, replay_program
from amago_pipe.store import Episode
from amago_pipe.train.policy_loading import read_meta

FORMS = ("torchscript", "torch_export", "onnx")


class ExportVerificationError(DataError):
    """An exported form acts differently from the original agent on the replayed episodes."""


def onnx_available() -> bool:
    """Whether the `onnx` extra (onnx and onnxruntime) is installed."""
    try:
        import onnx  # noqa: F401
        import onnxruntime  # noqa: F401
    except ImportError:
        return False
    return True


def resolve_forms(forms: Sequence[str] | None, *, where: str) -> list[str]:
    """The program forms to write: `None` means TorchScript and torch.export, plus ONNX when the `onnx` extra is
    installed."""
    if forms is None:
        return ["torchscript", "torch_export", *(["onnx"] if onnx_available() else [])]
    unknown = [f for f in forms if f not in FORMS]
    if unknown:
        raise ConfigError(f"{where}: unknown form '{unknown[0]}'; expected {' or '.join(FORMS)}", path=where)
    if "onnx" in forms and not onnx_available():
        raise ConfigError(
            f"{where}: ONNX export needs the onnx extra: pip install 'amago-pipe[onnx]' (or drop 'onnx')", path=where
        )
    return list(forms)


def export_policy(
    policy_file: Path,
    out: Path,
    *,
    episodes: Sequence[Episode],
    forms: Sequence[str],
    tolerance: float,
    steps: int | None = None,
    source: dict[str, Any] | None = None,
    evaluation: dict[str, Any] | None = None,
    progress: Callable[[str], None] = lambda message: None,
    where: str = "export to",
) -> dict[str, Any]:
    """Export the policy in `policy_file` to the directory `out`; returns the manifest.

    `out` must be new, an empty folder or an earlier export (replaced whole, in one step); ConfigError (naming
    `where` and `out`) otherwise, before anything is written. The episodes are replayed through the original agent
    and every written form (`steps`: default twice the context, at least the longest episode, at most 2,000);
    ExportVerificationError when one differs by more than `tolerance` (relative, env-space actions), and
    OutOfSpaceError when the disk fills: in both cases nothing is written."""
    if not episodes:
        raise DataError(f"export: no episodes to verify {policy_file} with; give a store partition or an env")
    out = Path(out)
    check_replaceable(out, where=where)
    meta = read_meta(policy_file)
    agent = agent_from_weights(policy_file, meta)
    max_seq_len, longest = int(meta["max_seq_len"]), max(ep.length for ep in episodes)
    steps = steps or min(max(2 * max_seq_len + 1, longest), 2000)
    had_export = out.is_dir() and any(out.iterdir())
    tmp = partial_path(out)
    try:
        start_partial(out)
        shutil.copyfile(policy_file, tmp / WEIGHTS)
        program = StepProgram(agent)
        contract = state_contract(agent)
        for form in forms:
            progress(f"writing {form}")
            _write_form(form, program, contract, tmp / FORM_FILES[form])
        progress(f"verifying on {len(episodes)} episodes x {steps} steps")
        errors = _verify(agent, program, contract, tmp, meta, episodes, forms, steps)
        _check_errors(errors, tolerance, policy_file, len(episodes))
        verification = {
            "episodes": len(episodes), "steps": steps, "longest_episode": longest,
            "past_max_seq_len": longest > max_seq_len, "tolerance": tolerance,
            "max_error": {f: float(f"{e:.3g}") for f, e in errors.items()},
        }  # fmt: skip
        manifest = _manifest(meta, program, contract, forms, verification, source, evaluation)
        (tmp / CARD).write_text(model_card(manifest))
        (tmp / WRITER).unlink()
        manifest = write_manifest(tmp, manifest)
        move_into_place(tmp, out, where=where)
    except BaseException as e:
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(e, Exception) and not isinstance(e, AmagoPipeError) and out_of_space(e) is not None:
            kept = "the earlier export there is unchanged" if had_export else "nothing was written"
            raise out_of_space_error(out, e, kept=kept) from e
        raise
    return manifest


def _verify(
    agent: Any, program: StepProgram, contract: list[dict[str, Any]], folder: Path, meta: dict[str, Any],
    episodes: Sequence[Episode], forms: Sequence[str], steps: int,
) -> dict[str, float]:  # fmt: skip
    """The largest action error of the weights file and of every written form against the agent (replayed)."""
    replay = build_replay(episodes, steps)
    reference = replay_agent(agent, replay)
    errors = {"weights": action_error(reference, replay_agent(agent_from_weights(folder / WEIGHTS, meta), replay))}
    initial = [t.numpy() for t in program.example_inputs(len(episodes))[len(program.obs_keys) + 3 :]]
    axes = [c["batch_axis"] for c in contract]
    for form in forms:
        step = _load_form(form, folder / FORM_FILES[form], program.input_names())
        errors[form] = action_error(reference, replay_program(step, replay, program.obs_keys, initial, axes))
    return errors


def _check_errors(errors: dict[str, float], tolerance: float, policy_file: Path, episodes: int) -> None:
    """ExportVerificationError naming every form whose actions differ from the agent's by more than `tolerance`."""
    failed = {f: e for f, e in errors.items() if e > tolerance}
    if failed:
        raise ExportVerificationError(
            f"export of {policy_file}: {', '.join(f'{f} actions differ by {e:.3g}' for f, e in failed.items())} "
            f"(tolerance {tolerance:g}) on {episodes} replayed episodes; nothing was written"
        )


def _manifest(
    meta: dict[str, Any], program: StepProgram, contract: list[dict[str, Any]], forms: Sequence[str],
    verification: dict[str, Any], source: dict[str, Any] | None, evaluation: dict[str, Any] | None,
) -> dict[str, Any]:  # fmt: skip
    """The manifest of an export, without its file checksums (`write_manifest` adds them)."""
    return {
        "format": FORMAT,
        "amago_pipe_version": __version__,
        "torch_version": torch.__version__,
        "created": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "policy": meta,
        "program": program_contract(program, contract),
        "forms": {form: FORM_FILES[form] for form in forms},
        "verification": verification,
        "source": source or {},
        "evaluation": evaluation,
    }


def program_contract(program: StepProgram, state: list[dict[str, Any]]) -> dict[str, Any]:
    """The inputs and outputs of the step program, in order, with shapes (`N` = envs) and dtypes."""
    spec = program.spec
    action = {"shape": ["N", *spec.action.shape], "dtype": spec.action.dtype}
    inputs = [{"name": f"obs/{k}", "shape": ["N", *spec.observations[k].shape], "dtype": spec.observations[k].dtype}
              for k in program.obs_keys]  # fmt: skip
    inputs += [
        {
            "name": "prev_action",
            **action,
            "doc": "env-space action taken before this observation (any value at time 0)",
        },
        {
            "name": "prev_reward",
            "shape": ["N"],
            "dtype": "float32",
            "doc": "reward of that action (any value at time 0)",
        },
        {
            "name": "time",
            "shape": ["N"],
            "dtype": "int64",
            "doc": "step within the episode, 0 at its first observation",
        },
        *({"name": s["name"], "shape": s["shape"], "dtype": s["dtype"]} for s in state),
    ]
    outputs = [{"name": "action", **action, "doc": "greedy env-space action"}]
    outputs += [{"name": f"next/{s['name']}", "shape": s["shape"], "dtype": s["dtype"]} for s in state]
    return {
        "inputs": inputs,
        "outputs": outputs,
        "state": state,
        "usage": (
            "Call once per step with the memory tensors returned by the previous call. Memory starts at `init` for "
            "every env; when an env starts a new episode, set its slice (along `batch_axis`) back to `init` and pass "
            "time 0. ONNX graphs drop inputs they do not use: feed the inputs the session lists."
        ),
    }


def _write_form(form: str, program: StepProgram, state: list[dict[str, Any]], path: Path) -> None:
    """Write one program form to `path`. TorchScript and torch.export programs are serialised in memory and written
    by Python, so a full disk is an OSError: torch's zip writer, given the file, throws from its destructor and the
    process aborts. The ONNX exporter writes its file from Python already."""
    buffer = io.BytesIO()
    example = program.example_inputs(2)
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")  # tracer warnings about Python-side shape checks, which hold for every N
        if form == "torchscript":
            torch.jit.save(torch.jit.trace(program, example, check_trace=False), buffer)
        elif form == "torch_export":
            n = torch.export.Dim("N", min=1)
            shapes = [{0: n} for _ in range(len(program.obs_keys) + 3)] + [{s["batch_axis"]: n} for s in state]
            exported = torch.export.export(program, example, dynamic_shapes=(tuple(shapes),), strict=False)
            torch.export.save(exported, buffer)
        else:
            names_in, names_out = program.input_names(), program.output_names()
            n_fixed = len(program.obs_keys) + 3
            dynamic: dict[str, dict[int, str]] = {name: {0: "N"} for name in names_in[:n_fixed]}
            dynamic["action"] = {0: "N"}
            for s in state:
                dynamic[s["name"]] = {s["batch_axis"]: "N"}
                dynamic[f"next/{s['name']}"] = {s["batch_axis"]: "N"}
            torch.onnx.export(
                program, example, str(path), dynamo=False, input_names=names_in, output_names=names_out,
                dynamic_axes=dynamic, opset_version=17,
            )  # fmt: skip
            return
    with open(path, "wb") as f:
        f.write(buffer.getbuffer())


def _load_form(form: str, path: Path, input_names: list[str]) -> StepFn:
    """A numpy step function running the written program file (positional inputs named `input_names`)."""
    if form in ("torchscript", "torch_export"):
        module = torch.jit.load(str(path)) if form == "torchscript" else torch.export.load(path).module()

        def step_torch(*args: np.ndarray) -> list[np.ndarray]:
            with torch.no_grad():
                return [o.numpy() for o in module(*(torch.as_tensor(np.asarray(a)) for a in args))]

        return step_torch
    import onnxruntime as ort

    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    used = {i.name for i in session.get_inputs()}

    def step_onnx(*args: np.ndarray) -> list[np.ndarray]:
        feed = {n: np.asarray(a) for n, a in zip(input_names, args, strict=True) if n in used}
        return list(session.run(None, feed))

    return step_onnx
