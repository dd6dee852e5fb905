"""The trained methods' one contract (issue 68): every registered method's trained object saves through the artifact
store and loads back as the same object, its manifest recording the generator it serves; the registry names each
method's config, train function and class; `assist train retriever` has one subcommand per registered retriever;
every manifest committed under results/ still reads as its method's.

Real parts: tiny but real models (a 1-layer BERT with MiniLM's tokenizer for the encoders LAIL, JOINTCOM and Condor
fine-tune; a 3-layer random Qwen2 under SelfRACG's branch; TST^R's own network), real safetensors files in real
folders, no training (the methods' own tests train).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from assistant.backends.models import encoder_dir, resolve
from assistant.methods import TRAINED_METHODS, TrainedMethod, trained_retrievers
from assistant.methods.artifacts import load_trained, read_manifest, recorded_generator

from .helpers_tiny_lm import ByteTokenizer, tiny_qwen2

GENERATOR = "qwen-x"  # the model each artifact says it was trained for
RESULTS = Path(__file__).resolve().parent.parent / "results"


@pytest.fixture(scope="module")
def tiny_encoder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding a 1-layer BERT (random weights) with MiniLM's tokenizer: a transformers encoder."""
    from transformers import AutoTokenizer, BertConfig, BertModel

    tokenizer = AutoTokenizer.from_pretrained(str(encoder_dir(resolve(None, "encoder"))))
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=128,
    )
    folder = tmp_path_factory.mktemp("tiny-encoder")
    BertModel(config).save_pretrained(str(folder), safe_serialization=True)
    tokenizer.save_pretrained(str(folder))
    return folder


@pytest.fixture(scope="module")
def lm() -> Any:
    """A small random Qwen2 (the real architecture) for SelfRACG's branch."""
    return tiny_qwen2()


def _encoder_method(cls: Any, generator: Any, folder: Path) -> Any:
    """LAIL's or JOINTCOM's trained object over the tiny encoder."""
    from transformers import AutoModel, AutoTokenizer

    model, tokenizer = AutoModel.from_pretrained(str(folder)), AutoTokenizer.from_pretrained(str(folder))
    return cls({"config": {}, "generator": generator, "max_tokens": 64}, model, tokenizer)


def trained(name: str, tiny_encoder: Path, lm: Any) -> Any:
    """A tiny trained object of method `name`, as its `train` function would leave it (weights not at their start)."""
    if name == "lail":
        from assistant.methods.lail import Lail

        return _encoder_method(Lail, GENERATOR, tiny_encoder)
    if name == "jointcom":
        from assistant.methods.jointcom import Jointcom

        return _encoder_method(Jointcom, {"backend": "local", "model": GENERATOR}, tiny_encoder)  # as it records
    if name == "tstr":
        from assistant.methods.tstr import Tstr, TstrConfig, _network

        config = TstrConfig(hidden=16)
        torch.manual_seed(0)
        manifest = {"config": dataclasses.asdict(config), "input_dim": 8, "generator": "none", "embedder": "e"}
        return Tstr(_network(8, config), config, manifest)
    if name == "selfracg":
        from assistant.methods.selfracg import InformationNeed, SelfRacg, SelfRacgConfig

        ine = InformationNeed(lm, ByteTokenizer(), SelfRacgConfig(rank=4, alpha=8.0))
        with torch.no_grad():  # as if trained: B is no longer zero
            for parameter in ine.parameters():
                parameter.add_(torch.randn_like(parameter) * 0.1)
        manifest = {"config": ine.config.to_json(), "generator": GENERATOR, "model": GENERATOR, "precision": "fp32"}
        return SelfRacg(ine, manifest)
    assert name == "condor", f"{name} is registered but this test builds no artifact for it"
    from assistant.methods.condor.model import Condor, CondorConfig, make_model

    config = CondorConfig(backbone=str(tiny_encoder), max_length=64)
    torch.manual_seed(0)
    manifest = {"method": "condor", "generator": GENERATOR, "config": dataclasses.asdict(config), "stats": {}}
    return Condor(make_model(config), manifest)


def behaves_the_same(name: str, before: Any, after: Any) -> None:
    """The loaded object does what the saved one did."""
    if name in ("lail", "jointcom"):
        from assistant.backends.encoder import Encoder

        texts = ["def add(a, b): return a + b", "reverse a list"]
        original = Encoder(Path(before.model.name_or_path), name="original", max_length=64).encode(texts)
        assert after.encoder.name == f"{name}:{name}" and np.allclose(after.encoder.encode(texts), original, atol=1e-6)
    elif name == "tstr":
        vectors = np.random.default_rng(0).normal(size=(3, 8)).astype("float32")
        assert np.allclose(after.transform(vectors), before.transform(vectors), atol=1e-6)
    elif name == "selfracg":
        assert after.ine is not before.ine and after.ine.fingerprint() == before.ine.fingerprint()
    else:
        codes = ["def f(x):\n    return x + 1\n", "def f(x):\n    return x - 1\n"]
        probabilities = after.probabilities("Add one to x.", codes)
        assert probabilities == pytest.approx(before.probabilities("Add one to x.", codes), abs=1e-6)


def test_the_registry_names_each_methods_config_train_function_and_class() -> None:
    assert list(TRAINED_METHODS) == ["lail", "tstr", "selfracg", "jointcom", "condor"]
    for name, entry in TRAINED_METHODS.items():
        assert entry.name == name and dataclasses.is_dataclass(entry.config_class())
        assert callable(entry.train_function()) and entry.trained_class().method == name
    assert trained_retrievers() == ["lail", "tstr", "selfracg"]


def test_assist_train_retriever_has_one_subcommand_per_registered_retriever() -> None:
    import typer

    from assistant.ui.train_cmd import retriever_app

    commands = typer.main.get_command(retriever_app).commands  # type: ignore[attr-defined]
    assert sorted(commands) == sorted(trained_retrievers())


@pytest.mark.parametrize("name", list(TRAINED_METHODS))
def test_every_method_round_trips_through_the_store(name: str, tmp_path: Path, tiny_encoder, lm, monkeypatch) -> None:
    import assistant.methods.selfracg as selfracg

    asked: list[tuple] = []

    def load_ine(model, precision="auto", config=None, device="cpu"):  # SelfRACG's branch over the tiny model
        asked.append((model, precision))
        return selfracg.InformationNeed(lm, ByteTokenizer(), config), {"model": model, "precision": precision}

    monkeypatch.setattr(selfracg, "load_ine", load_ine)
    before = trained(name, tiny_encoder, lm)
    assert isinstance(before, TrainedMethod) and isinstance(before, TRAINED_METHODS[name].trained_class())
    folder = tmp_path / name
    written = before.save(folder)
    assert written == before.manifest == read_manifest(folder) and written["method"] == name
    assert set(written["provenance"]["files_sha256"])  # every file it wrote, with its digest
    after = load_trained(folder)  # by the method its manifest names
    assert type(after) is type(before) and after.manifest == written
    assert recorded_generator(after.manifest) == ("none" if name == "tstr" else GENERATOR)
    behaves_the_same(name, before, after)
    assert asked == ([(GENERATOR, "fp32")] if name == "selfracg" else [])  # the model its manifest names
    # Saved again from what was loaded: the same weights and the same manifest, less when it was saved.
    again = after.save(tmp_path / "again")
    weights = [
        {k: v for k, v in m["provenance"]["files_sha256"].items() if k.endswith(".safetensors")}
        for m in (written, again)
    ]
    assert weights[0] and weights[0] == weights[1]
    drop = {"provenance"}
    assert {k: v for k, v in again.items() if k not in drop} == {k: v for k, v in written.items() if k not in drop}


def test_a_folder_of_no_registered_method_is_a_one_line_error(tmp_path: Path) -> None:
    from assistant.errors import UsageError
    from assistant.methods.artifacts import save_artifact

    with pytest.raises(UsageError, match="no trained method's artifact in"):
        load_trained(tmp_path)
    save_artifact(tmp_path, "something-else", lambda folder: None, {})
    with pytest.raises(UsageError, match="no trained method's artifact in"):
        load_trained(tmp_path)


def test_every_committed_manifest_still_reads_as_its_methods() -> None:
    manifests = sorted(RESULTS.rglob("manifest.json"))
    assert manifests, "results/ holds trained artifacts' manifests"
    for path in manifests:
        manifest = json.loads(path.read_text(encoding="utf-8"))
        entry = TRAINED_METHODS[manifest["method"]]
        config = entry.config_class()
        known = {field.name for field in dataclasses.fields(config)}
        config(**{key: value for key, value in manifest["config"].items() if key in known})
        assert set(manifest["config"]) <= known, f"{path}: fields this version no longer has"
        assert recorded_generator(manifest) is not None, path
