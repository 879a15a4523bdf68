"""benchmarks/RESULTS.md is generated: it must equal the rendering of benchmarks/records/*.json (so nobody edits it
by hand), and every record must fit the schema and name a section of the page."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType

import pytest

from amago_pipe.errors import DataError

REPO = Path(__file__).resolve().parents[2]


def make_results() -> ModuleType:
    spec = importlib.util.spec_from_file_location("make_results", REPO / "benchmarks" / "make_results.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_results_page_equals_the_rendering_of_the_records() -> None:
    mr = make_results()
    page = (REPO / "benchmarks" / "RESULTS.md").read_text()
    assert page == mr.render(mr.load_records()), "RESULTS.md is stale: run python benchmarks/make_results.py"


def test_the_page_answers_a_newcomer_and_keeps_its_headings() -> None:
    page = (REPO / "benchmarks" / "RESULTS.md").read_text()
    for heading in ("## T-Maze", "## Delayed recall", "## Multi-task", "## Speed", "## Not learned"):
        assert f"\n{heading}\n" in page
    row = next(
        line for line in page.splitlines() if line.startswith("| offline, corridor 100 | transformer | default | — |")
    )
    assert "success 1.00 / 1.00 / 1.00" in row and "pipelines/tmaze-memory.yaml" in row and "success 0.46" in row
    assert "[RESULTS_ARCHIVE.md](RESULTS_ARCHIVE.md)" in page


def test_a_record_in_an_unknown_section_is_refused_by_name(tmp_path: Path) -> None:
    mr = make_results()
    (tmp_path / "r.json").write_text(json.dumps({"version": 1, "family": "Metaworld", "task": "ML1"}))
    with pytest.raises(DataError, match="family 'Metaworld' is not a section of the page; did you mean 'Meta-World'"):
        mr.load_records(tmp_path)
