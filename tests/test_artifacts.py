"""The trained methods' one artifact store: files swapped in, manifest last, provenance recorded."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from assistant.errors import UsageError
from assistant.methods.artifacts import artifact_identity, load_manifest, read_manifest, save_artifact


def write_weights(text: str):
    def write(folder: Path) -> None:
        (folder / "encoder").mkdir()
        (folder / "encoder" / "model.safetensors").write_text(text)
        (folder / "head.safetensors").write_text(text + "-head")

    return write


def test_save_swaps_the_files_in_keeps_other_files_and_records_provenance(tmp_path: Path) -> None:
    directory = tmp_path / "lail"
    directory.mkdir()
    (directory / "labels.jsonl").write_text('{"resumable": true}\n')  # a cache the method keeps beside its weights
    save_artifact(directory, "lail", write_weights("one"), {"config": {"epochs": 1}})
    manifest = save_artifact(directory, "lail", write_weights("two"), {"config": {"epochs": 2}})

    assert (directory / "encoder" / "model.safetensors").read_text() == "two"
    assert (directory / "labels.jsonl").read_text() == '{"resumable": true}\n'
    assert not (directory / ".partial").exists()
    assert read_manifest(directory) == manifest
    assert manifest["method"] == "lail" and manifest["config"] == {"epochs": 2}
    sha = hashlib.sha256(b"two").hexdigest()
    assert manifest["provenance"]["files_sha256"]["encoder/model.safetensors"] == sha
    assert manifest["provenance"]["python"] and manifest["provenance"]["saved"]


def test_a_failed_save_leaves_the_previous_artifact_whole(tmp_path: Path) -> None:
    directory = tmp_path / "condor"
    before = save_artifact(directory, "condor", write_weights("good"), {"config": {}})

    def broken(folder: Path) -> None:
        (folder / "head.safetensors").write_text("half")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError):
        save_artifact(directory, "condor", broken, {"config": {}})
    assert read_manifest(directory) == before
    assert (directory / "head.safetensors").read_text() == "good-head"
    assert not (directory / ".partial").exists()


def test_load_refuses_a_missing_or_foreign_artifact_in_one_line(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"no trained TST\^R model in .*; run `assist train"):
        load_manifest(tmp_path, "tstr", "TST^R model", "run `assist train retriever --method tstr`")
    save_artifact(tmp_path, "lail", write_weights("x"), {})
    with pytest.raises(UsageError, match="no trained discriminator"):
        load_manifest(tmp_path, "condor", "discriminator", "run `assist train discriminator`")
    assert load_manifest(tmp_path, "lail", "LAIL retriever", "")["method"] == "lail"


def test_identity_leaves_out_the_provenance_and_stats(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import assistant.methods.artifacts as artifacts

    monkeypatch.setattr(artifacts, "artifact_dir", lambda index, method: tmp_path)
    save_artifact(tmp_path, "lail", write_weights("w"), {"config": {"a": 1}, "stats": {"loss": 1.0}})
    identity = artifact_identity(None, "lail")  # type: ignore[arg-type]
    assert identity is not None
    assert "provenance" not in identity and "stats" not in identity
    assert identity["weights_sha256"] == {
        "encoder/model.safetensors": hashlib.sha256(b"w").hexdigest(),
        "head.safetensors": hashlib.sha256(b"w-head").hexdigest(),
    }
