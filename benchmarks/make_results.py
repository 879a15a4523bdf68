"""Render benchmarks/RESULTS.md, the current-state results page, from the records in benchmarks/records/*.json.

To add or update a figure: put a record in benchmarks/records/ (one JSON file per run; the schema is
`amago_pipe.pipeline.records.Record`, version 1). The easiest start is the `record.json` an evaluate stage wrote:
copy `runs/<name>/stages/evaluate/record.json` to `benchmarks/records/<family>-<task>-<encoder>-s<seed>.json`,
then set `family` (a section below, e.g. "Meta-World"), a short `task` ("ML1 reach-v3, online"), `variant` (''
at the pipeline's defaults), `learned` (true / false: say when it was not learned), `source` (the run, or where the
figure was reported) and `notes`; keep the one metric per run the table should show in `metrics`. A figure that
replaces an older one replaces its file (the page shows what holds today; history stays in RESULTS_ARCHIVE.md and
git). Then run `python benchmarks/make_results.py` and commit the record with RESULTS.md;
tests/unit/test_results_page.py fails while the page differs from its rendering. Measurement tables are records of
`kind: benchmark` with a `table: {title, columns, rows}`.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import defaultdict
from pathlib import Path

from amago_pipe.errors import DataError, did_you_mean
from amago_pipe.pipeline.records import Record, read_record

HERE = Path(__file__).resolve().parent
RECORDS = HERE / "records"
PAGE = HERE / "RESULTS.md"

FAMILIES: dict[str, str] = {
    "Multi-task": "Several tasks in one agent (task sets, held-out tasks, returns of different scales).",
    "T-Maze": "Passive T-Maze (`amago_pipe/TMaze-v0`): the cue is shown at the first step only and must be carried down "
    "the corridor. Success 1.00 = always the cued arm, ~0.5 = a guess, 0 = never picks an arm.",
    "Delayed recall": "`amago_pipe/DelayedRecall-v0` offline from 800 random-policy episodes: name the cue seen `delay` "
    "steps earlier, optionally under Gaussian distractor noise. 4 cues: chance 0.25.",
    "POPGym": "POPGym tasks offline from 1,000 uniformly random episodes per task, one agent per task. Returns lie in "
    "[-1, 1]; random play is about -0.5 on the Repeat tasks.",
    "Dark Key-To-Door": "Meta-RL: one hidden layout per episode, 4 attempts; return per attempt (1 = key, 2 = key and "
    "door). Memory shows as a return that rises after the first attempt.",
    "MiniGrid Memory": "MiniGrid-MemoryS7/S9: the cue object is in the start room, the choice at the end of a corridor. "
    "Return ~0.97 = takes the match, ~0.46 = a guess.",
    "BabyAI": "BabyAI levels whose mission (read as word ids) decides what to do; per-level success.",
    "gymnax MemoryChain": "bsuite's MemoryChain through gymnax (JAX), 16 copies stepped as one batch. Return 1 = "
    "remembers the context bit, 0 = chance.",
    "Symbolic Alchemy": "Meta-RL over trials at one hidden chemistry.",
    "Meta-World": "Meta-World ML1 / ML10 through the `metaworld` adapter (k-shot attempts at one goal).",
    "Pixels": "Learning from pixels on this CPU: gymnax MinAtar games (10x10 object grids), online from scratch with a "
    "small IMPALA CNN. The `ff` control has no sequence model (MinAtar frames are nearly Markov: memory is not needed).",
    "CartPole": "CartPole-v1: return 500 = balanced for the whole episode (one row: the online recipe on Acrobot-v1, target "
    "-100).",
    "Pendulum": "Pendulum-v1: target >= -200 (random play about -1,230, the scripted energy controller -144).",
    "GoalMaze": "Hindsight relabeling (`relabel` stage) on `amago_pipe/GoalMaze-v0`; the control is the same pipeline "
    "without relabeling. Success over 100 greedy episodes.",
    "Speed": "Throughput, latency and memory, as measured; each table names its machine and command.",
    "Reliability": "Crash safety under random kills.",
}
"""The page's sections in order (one per task family; their anchors are the lower-cased names, spaces as `-`)."""
FIGURES: dict[str, list[tuple[str, str]]] = {
    "T-Maze": [("T-Maze success against corridor length (the archive's cells, 2026-11-26 to 28)", "plots/tmaze-corridor.png")],
    "CartPole": [
        ("Online CartPole from scratch, validation return", "plots/online-cartpole.png"),
        ("Offline-to-online CartPole", "plots/offline-to-online.png"),
    ],
    "Pendulum": [("Online Pendulum, validation return", "plots/online-pendulum.png")],
    "Pixels": [("Breakout-MinAtar, transformer vs ff (`amago-pipe compare ... --plot`)", "plots/minatar-breakout.png")],
    "GoalMaze": [("GoalMaze with and without relabeling", "plots/goal-maze-relabel.png")],
}  # fmt: skip
ENCODER_ORDER = ("transformer", "gru", "mamba", "ff")
LABELS = {
    "success_rate": "success",
    "return_mean": "return",
    "return_before": "return before fine-tuning",
    "train_wall_s": "train stage s",
    "wall_s_to_minus_200": "s to a validation >= -200",
}
SERIES = re.compile(r"^(attempt|trial)_(\d+)_(return|success)$")


def load_records(folder: Path = RECORDS) -> list[Record]:
    """Every record in `folder`, checked against the schema and the page's families."""
    records = []
    for path in sorted(folder.glob("*.json")):
        record = read_record(path)
        if record.family not in FAMILIES:
            raise DataError(
                f"{path}: family '{record.family}' is not a section of the page{did_you_mean(record.family, list(FAMILIES))}"
                f" (sections: {', '.join(FAMILIES)}; add one to FAMILIES in {Path(__file__).name})"
            )
        records.append(record)
    return records


def anchor(heading: str) -> str:
    """GitHub's anchor of a heading."""
    return re.sub(r"[^a-z0-9 -]", "", heading.lower()).replace(" ", "-")


def natural(text: str) -> list[object]:
    """Sort key that orders `corridor 30` before `corridor 100`."""
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", text)]


def num(value: object) -> str:
    """A figure as the page shows it: 2 decimals (3 where they matter), 1 decimal from 100, thousands separated."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return "—" if value is None else str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if abs(value) >= 100:
        return f"{value:,.1f}"
    text = f"{value:.3f}"
    return text[:-1] if text.endswith("0") else text


def _row_key(r: Record) -> tuple[object, ...]:
    return (r.task, r.variant, r.encoder.get("traj", ""), r.encoder.get("tstep", ""), r.agent.get("recipe", ""),
            r.agent.get("type", ""), r.machine)  # fmt: skip


def group_rows(records: list[Record]) -> list[list[Record]]:
    """Records of one setting (task, variant, encoders, agent, machine) together, seeds in order; rows sorted by
    task, then the pipeline's own setting before variants, then encoder (the `ff` control last)."""
    groups: dict[tuple[object, ...], list[Record]] = defaultdict(list)
    for r in records:
        groups[_row_key(r)].append(r)

    def order(rows: list[Record]) -> tuple[object, ...]:
        r = rows[0]
        traj = r.encoder.get("traj", "")
        rank = ENCODER_ORDER.index(traj) if traj in ENCODER_ORDER else len(ENCODER_ORDER)
        return (
            natural(r.task),
            r.variant != "",
            natural(r.variant),
            r.machine != "2-core CPU",
            rank,
            r.agent.get("type", ""),
        )

    return [sorted(g, key=lambda r: (r.seed is None, r.seed or 0)) for g in sorted(groups.values(), key=order)]


def result_cell(rows: list[Record]) -> str:
    """The metrics of a row: each metric's values over the seeds (`a / b / c`), series per seed, per-task values."""
    parts: list[str] = []
    keys = list(dict.fromkeys(k for r in rows for k in r.metrics))
    series = [k for k in keys if SERIES.match(k)]
    for what in dict.fromkeys(SERIES.match(k).group(3) for k in series):  # type: ignore[union-attr]
        of_what = [k for k in series if k.endswith(f"_{what}")]
        kind = SERIES.match(of_what[0]).group(1)  # type: ignore[union-attr]
        per_seed = [" / ".join(num(r.metrics.get(k)) for k in of_what) for r in rows]
        label = f"by {kind}" if what == "return" else f"{LABELS.get(what + '_rate', what)} by {kind}"
        parts.append(f"{label}: " + "; ".join(per_seed))
    for key in (k for k in keys if k not in series):
        label = LABELS.get(key, key.replace("task_mean_", "mean over tasks, ").replace("_", " "))
        label = label.replace("success rate", "success").replace("return mean", "return")
        parts.append(f"{label} {' / '.join(num(r.metrics.get(key)) for r in rows)}")
    for group, prefix in (("tasks", ""), ("held_out", "held out: ")):
        names = list(dict.fromkeys(n for r in rows for n in getattr(r, group)))
        for name in names:
            values = [getattr(r, group).get(name, {}) for r in rows]
            metric_keys = list(dict.fromkeys(k for v in values for k in v))
            shown = ", ".join(
                f"{LABELS.get(k, k.replace('_', ' '))} {' / '.join(num(v.get(k)) for v in values)}" if len(metric_keys) > 1
                else " / ".join(num(v.get(k)) for v in values)
                for k in metric_keys
            )  # fmt: skip
            parts.append(f"{prefix}{name} {shown}")
    return "; ".join(parts) if parts else "no figure yet"


def learned_cell(rows: list[Record]) -> str:
    judged = [r.learned for r in rows if r.learned is not None]
    if not judged:
        return "—"
    if all(judged):
        return "yes"
    if not any(judged):
        return "**no**"
    return f"{sum(judged)} of {len(judged)} seeds"


def control_cell(row: list[Record], rows: list[list[Record]]) -> str:
    """The memory-free `ff` control on the same task and variant (else the task's own setting)."""
    first = row[0]
    if first.encoder.get("traj") == "ff":
        return "(the control)"
    for variant in (first.variant, ""):
        for other in rows:
            o = other[0]
            if (
                o.encoder.get("traj") == "ff"
                and o.task == first.task
                and o.variant == variant
                and o.machine == first.machine
            ):
                suffix = "" if variant == first.variant else " (at the pipeline's setting)"
                return result_cell(other) + suffix
    return "not measured"


def code(text: str) -> str:
    return f"`{text}`".replace("|", "\\|") if text else "—"


def result_table(records: list[Record]) -> list[str]:
    """A family's results: one row per setting, the `ff` control beside it, the command in the row; notes below."""
    rows = group_rows(records)
    lines = [
        "| task | encoder | recipe | variant | seeds | result | `ff` control, same task | learned | updates | measured | command |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    notes: list[str] = []
    for row in rows:
        r = row[0]
        encoder = r.encoder.get("traj", "—") + (
            f" ({r.encoder['tstep']} tstep)" if r.encoder.get("tstep") not in (None, "ff") else ""
        )
        recipe, kind = r.agent.get("recipe", "—"), r.agent.get("type")
        agent = recipe + (f" (`{kind}`)" if kind not in (None, "agent", recipe) else "")
        seeds = ", ".join("—" if x.seed is None else str(x.seed) for x in row)
        updates = " / ".join(dict.fromkeys(num(x.updates) for x in row))
        dates = max(x.date for x in row) + (f", {r.machine}" if r.machine and r.machine != "2-core CPU" else "")
        commands = list(dict.fromkeys(re.sub(r" --set seed=\d+", "", x.command) for x in row))
        if any(x.seed for x in row) and all(c.startswith("amago-pipe run") for c in commands):
            commands = [f"{c} --set seed=S" for c in commands]
        lines.append(
            f"| {r.task} | {encoder} | {agent} | {r.variant or '—'} | {seeds} | {result_cell(row)} | "
            f"{control_cell(row, rows)} | {learned_cell(row)} | {updates} | {dates} | {' ; '.join(code(c) for c in commands)} |"
        )
        notes += [f"- {r.task}, {r.encoder.get('traj', '')}{', ' + r.variant if r.variant else ''}: {n}"
                  for n in dict.fromkeys(x.notes for x in row if x.notes)]  # fmt: skip
    sources = sorted({r.source for r in records if r.source})
    if notes:
        lines += ["", *notes]
    lines += ["", "Sources: " + "; ".join(sources) + "."] if sources else []
    return lines


def bench_section(record: Record) -> list[str]:
    table = record.table
    where = f"Measured {record.date} on {record.machine or 'the 2-core CPU'}: {code(record.command)}."
    lines = [f"### {table.get('title', 'benchmark')}", "", where + (f" {record.notes}" if record.notes else ""), ""]
    lines.append("| " + " | ".join(table["columns"]) + " |")
    lines.append("|" + "---|" * len(table["columns"]))
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in table["rows"]]
    return [*lines, "", f"Source: {record.source}."]


def not_learned(records: list[Record]) -> list[str]:
    """The settings measured and not learned (the `ff` controls, which should not learn memory, left out)."""
    lines = []
    for family in FAMILIES:
        for row in group_rows([r for r in records if r.family == family and r.kind == "result"]):
            r = row[0]
            cell = learned_cell(row)
            if r.encoder.get("traj") == "ff" and family not in ("CartPole", "Pendulum", "GoalMaze"):
                continue
            if cell == "**no**" or cell.endswith("seeds"):
                how = "not learned" if cell == "**no**" else f"learned on {cell}"
                variant = f", {r.variant}" if r.variant else ""
                lines.append(f"- [{family}](#{anchor(family)}): {r.task}, {r.encoder.get('traj')}{variant}: {how} "
                             f"({result_cell(row)}).")  # fmt: skip
    return lines


def render(records: list[Record]) -> str:
    """The whole page."""
    by_family: dict[str, list[Record]] = defaultdict(list)
    for r in records:
        by_family[r.family].append(r)
    families = [f for f in FAMILIES if f in by_family]
    out = [
        "# Results: what amago-pipe reaches today",
        "",
        "Generated by `python benchmarks/make_results.py` from the records in `benchmarks/records/` (one JSON file per "
        "run; schema: `amago_pipe/pipeline/records.py`). Do not edit this page by hand: add or change a record and "
        "re-run the script (a test checks the page equals its rendering). The dated notebook these figures were "
        "taken from, with the experiments that led to today's defaults, is [RESULTS_ARCHIVE.md](RESULTS_ARCHIVE.md).",
        "",
        "How to read a row: one setting at today's defaults unless `variant` says otherwise; `result` lists each "
        "metric's values over the seeds in `seeds` order; `ff` control is the memory-free model on the same task, "
        "beside every memory claim; `learned` judges whether the task is solved at that budget; `command` reproduces "
        "one seed (`--set seed=S` for the others). Unless a row says so, runs used the 2-core CPU, shared with other jobs.",
        "",
        "## Contents",
        "",
        *[f"- [{f}](#{anchor(f)})" for f in families],
        "- [Not learned](#not-learned)",
    ]
    for family in families:
        out += ["", f"## {family}", "", FAMILIES[family]]
        results = [r for r in by_family[family] if r.kind == "result"]
        if results:
            out += ["", *result_table(results)]
        for caption, path in FIGURES.get(family, []):
            out += ["", f"![{caption}]({path})"]
        for record in (r for r in by_family[family] if r.kind == "benchmark"):
            out += ["", *bench_section(record)]
    out += [
        "",
        "## Not learned",
        "",
        "Measured and not learned at the budget stated (the rows above have the commands):",
        "",
    ]
    out += not_learned(records)
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when RESULTS.md differs from the rendering")
    args = parser.parse_args(argv)
    try:
        text = render(load_records())
    except DataError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.check:
        same = PAGE.exists() and PAGE.read_text() == text
        print("RESULTS.md is up to date" if same else "RESULTS.md is stale: run python benchmarks/make_results.py")
        return 0 if same else 1
    PAGE.write_text(text)
    print(f"wrote {PAGE} from {len(list(RECORDS.glob('*.json')))} records")
    return 0


if __name__ == "__main__":
    sys.exit(main())
