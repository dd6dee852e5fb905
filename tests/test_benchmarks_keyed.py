"""The benchmarks measure the trained artifact of the model they name (issue 70), found as the product finds it:
one trained for another model only ends the run with the product's one-line error and exit status 2, never a
figure of the other model's artifact (before, each took whichever was trained last).

Real parts: the benchmark scripts themselves (loaded from `benchmarks/`), a small MBPP-format pool embedded by the
real MiniLM, artifacts' manifests written through the artifact store, the discriminator looked up from a real
working directory. Nothing is trained: a refusal comes before any artifact is loaded.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import pytest

from assistant.methods.artifacts import artifact_dir, save_artifact
from assistant.methods.lail import LailConfig

from .test_benchmarks import _load

ROOT = Path(__file__).resolve().parent.parent
SMALL, LARGE = "qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b"  # LARGE: assist's default, what they measure unasked
WORDS = ("reverse", "double", "count", "first")


@pytest.fixture
def pool(tmp_path: Path) -> str:
    """A tiny MBPP file (its train split: task ids 601 on), as `--pool` / `--trained` take it."""
    path = tmp_path / "mbpp.jsonl"
    records = [
        {"task_id": 601 + i, "text": f"Write a function to {w} a list.", "code": f"def {w}(xs):\n    return xs\n",
         "test_list": [f"assert {w}([1]) == [1]"]}
        for i, w in enumerate(WORDS)
    ]  # fmt: skip
    path.write_text("".join(json.dumps(record) + "\n" for record in records), encoding="utf-8")
    return f"mbpp:{path}"


def lail_for(model: str, pool: str, encoder) -> Path:
    """A LAIL artifact's manifest for `pool` labelled by `model`, in the unkeyed folder earlier versions used."""
    from assistant.evaluate import load_pool

    folder = artifact_dir(load_pool(pool, encoder).index, "lail")
    manifest = {
        "pool": "benchmark", "config": dataclasses.asdict(LailConfig()), "labeler": {"backend": "local", "model": model}
    }  # fmt: skip
    save_artifact(folder, "lail", lambda staging: None, manifest)
    return folder


def one_line_refusal(stderr: str) -> None:
    """The product's error for an artifact trained for another model only: one line naming both models."""
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), stderr
    assert f"trained for {SMALL}, not {LARGE}" in lines[0]


def test_lail_headroom_refuses_the_labels_of_another_model(monkeypatch, capsys, pool, encoder) -> None:
    headroom = _load(ROOT / "benchmarks" / "lail_headroom.py", monkeypatch)
    lail_for(SMALL, pool, encoder)
    assert headroom.main(["--pool", pool]) == 2  # the default model's: none (before: the 0.5B's, measured)
    err = capsys.readouterr().err
    one_line_refusal(err)
    assert f"`assist train retriever lail --model {LARGE}`" in err
    with pytest.raises(SystemExit, match="labels are not in the cache"):  # the 0.5B's own: taken, on to its labels
        headroom.main(["--pool", pool, "--model", SMALL])


def test_index_speed_refuses_before_indexing_when_the_retriever_serves_another_model(
    monkeypatch, capsys, tmp_path, pool, encoder
) -> None:
    speed = _load(ROOT / "benchmarks" / "index_speed.py", monkeypatch)
    folder = lail_for(SMALL, pool, encoder)
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "m.py").write_text("def f():\n    return 1\n", encoding="utf-8")
    argv = ["index_speed.py", "--root", str(tree), "--trained", pool, "--encoder-engine", "torch", "--queries", "1"]
    monkeypatch.setattr(sys, "argv", argv)
    with pytest.raises(SystemExit) as ended:
        speed.main()
    assert ended.value.code == 2
    err = capsys.readouterr().err
    one_line_refusal(err)
    assert f"`assist train retriever lail --model {LARGE}`" in err
    assert "encode (" not in err  # refused before the tree was indexed
    assert speed.trained_folders(pool, encoder, SMALL) == {"lail": folder}  # the 0.5B's own; TST^R never trained
    assert "no TST^R retriever trained for" in capsys.readouterr().err


def test_discriminator_speed_refuses_a_discriminator_of_another_model(monkeypatch, capsys, tmp_path) -> None:
    from assistant.methods.condor.model import discriminator_dir

    speed = _load(ROOT / "benchmarks" / "discriminator_speed.py", monkeypatch)
    folder = discriminator_dir(None)  # the user's own, outside a repo
    save_artifact(folder, "condor", lambda staging: None, {"generator": SMALL, "config": {}, "data": {}, "stats": {}})
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["discriminator_speed.py"])  # the default model's: none fits
    with pytest.raises(SystemExit) as ended:
        speed.main()
    assert ended.value.code == 2
    err = capsys.readouterr().err
    one_line_refusal(err)
    assert "`assist train discriminator --from-eval RUN`" in err
    assert speed.trained_for(SMALL) == folder  # the 0.5B's own is found
