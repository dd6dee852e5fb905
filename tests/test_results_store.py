"""results/ keeps its records compressed (`*.jsonl.gz`): every reader must score a run from them as from plain files.

These tests copy committed run folders (real records, not made-up ones) and rebuild their tables both ways.
"""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import pytest

from assistant.cache import JsonlCache

RESULTS = Path(__file__).resolve().parents[1] / "results"


def _copies(tmp_path: Path, name: str) -> tuple[Path, Path]:
    """The committed folder as kept (compressed) and the same folder with every store decompressed."""
    kept, plain = tmp_path / "kept" / name, tmp_path / "plain" / name
    shutil.copytree(RESULTS / name, kept)
    shutil.copytree(RESULTS / name, plain)
    for packed in plain.glob("*.jsonl.gz"):
        packed.with_suffix("").write_bytes(gzip.decompress(packed.read_bytes()))
        packed.unlink()
    return kept, plain


def test_jsonl_exists_sees_a_store_plain_or_compressed(tmp_path):
    from assistant.cache import jsonl_exists

    assert not jsonl_exists(tmp_path / "records.jsonl")
    (tmp_path / "records.jsonl.gz").write_bytes(gzip.compress(b'{"key": "a", "value": 1}\n'))
    assert jsonl_exists(tmp_path / "records.jsonl")
    (tmp_path / "records.jsonl.gz").unlink()
    (tmp_path / "records.jsonl").write_text('{"key": "a", "value": 1}\n')
    assert jsonl_exists(tmp_path / "records.jsonl")
    (tmp_path / "records.jsonl").unlink()
    (tmp_path / "records.jsonl").mkdir()  # a folder of that name is no store
    assert not jsonl_exists(tmp_path / "records.jsonl")


def test_results_keeps_records_compressed_and_no_plain_jsonl():
    import subprocess

    tracked = subprocess.run(
        ["git", "ls-files", "results"], cwd=RESULTS.parent, capture_output=True, text=True, check=True
    ).stdout.split()
    assert "results/repo-redraw-n5-seed0/function.jsonl.gz" in tracked
    assert not [name for name in tracked if name.endswith(".jsonl")], "results/ keeps its JSONL stores gzip-compressed"
    samples = [name for name in tracked if name.endswith(("samples.jsonl.gz", "continuations.jsonl.gz"))]
    assert not samples, "the model-sample caches left the tree (git history keeps them)"


@pytest.mark.parametrize("name", ["codegen-humaneval-40-n5-seed0", "repo-heldout-n5-seed0"])
def test_a_run_rescores_the_same_from_its_compressed_records(tmp_path, name):
    from assistant.evaluate.report import write_report

    kept, plain = _copies(tmp_path, name)
    from_plain = write_report(plain)
    assert "pass@1" in from_plain
    assert write_report(kept) == from_plain.replace(f"plain/{name}", f"kept/{name}")


def test_a_codegen_run_read_for_training_from_its_compressed_records(tmp_path):
    from assistant.datasets import read_run

    kept, plain = _copies(tmp_path, "codegen-humaneval-40-n5-seed0")
    config, records = read_run(kept)
    assert config["command"] == "codegen" and len(records) == 120  # 40 tasks x 3 strategies
    assert records == read_run(plain)[1]


def test_pooling_repo_runs_reads_compressed_records(tmp_path):
    from assistant.evaluate.repo.pool import pooled_records

    kept, plain = _copies(tmp_path, "repo-heldout-n5-seed0")
    records, counts = pooled_records([kept], ["zero", "hybrid"])
    assert counts == {str(kept): 87}
    assert records == pooled_records([plain], ["zero", "hybrid"])[0]


def test_a_resumed_run_appends_to_its_compressed_store(tmp_path):
    """Resuming appends each new record to the `.gz` as its own gzip member (no plain file appears) and the report
    counts it; `tests/test_evaluate.py` checks the member format and a torn member."""
    kept, _ = _copies(tmp_path, "codegen-humaneval-40-n5-seed0")
    store = JsonlCache(kept / "records.jsonl")
    first_key, first = next(iter(store.entries.items()))
    store.put("resumed", {**first, "task_id": "HumanEval/extra"})
    assert not (kept / "records.jsonl").exists()
    again = JsonlCache(kept / "records.jsonl")
    assert list(again.entries)[-1] == "resumed" and again.get(first_key) == first
    assert len(gzip.decompress((kept / "records.jsonl.gz").read_bytes()).splitlines()) == 121


def test_the_discriminator_results_read_the_same_compressed_or_plain(tmp_path, monkeypatch):
    """`eval discriminator`'s results.json is kept as results.json.gz; rankers_by_n.py reads either alike."""
    import importlib.util
    import sys

    path = RESULTS.parent / "benchmarks" / "rankers_by_n.py"
    spec = importlib.util.spec_from_file_location("benchmark_rankers_by_n", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)
    spec.loader.exec_module(module)
    kept = RESULTS / "discriminator-mbpp-ov-seed0"
    assert not (kept / "results.json").exists()
    plain = tmp_path / kept.name
    plain.mkdir()
    (plain / "results.json").write_bytes(gzip.decompress((kept / "results.json.gz").read_bytes()))
    results = module.read_results(kept)
    assert results == module.read_results(plain) and set(results["variants"]) == {"generator", "condor"}


def test_a_docstring_run_rescores_to_the_table_its_run_printed(tmp_path):
    from assistant.evaluate.report import write_report

    name = "docstring-stdlib-1.5b-s0"
    kept, plain = _copies(tmp_path, name)
    printed = (RESULTS / name / "report-docstring.md").read_text(encoding="utf-8")
    table = printed.split("\n\n", 1)[1].strip()  # below the run's title
    for folder in (kept, plain):
        assert table in write_report(folder)  # the metrics and the paired table, as printed
