"""Condor on the generator's backbone: the on-disk feature store that lets `eval discriminator` resume.

No model is loaded: a small stand-in backend gives each (prompt, continuation) fixed features and records what
it was asked to encode.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from assistant.backends import BackendIdentity
from assistant.backends.models import resolve
from assistant.backends.prompts import Prompt
from assistant.methods.condor.data import Dataset, Program
from assistant.methods.condor.generator import FeatureStore, GeneratorDiscriminator
from assistant.methods.condor.model import CondorConfig, make_model

HIDDEN = 3

PAIRS = [
    ("Return the sum of a and b.", "def add(a, b):\n    return a + b\n"),
    ("Return the sum of a and b.", "def add(a, b):\n    return a - b\n"),
    ("Reverse a list.", "def rev(xs):\n    return xs[::-1]\n"),
]


class FakeBackend:
    """The local model's stand-in: features from a hash of the text; `encoded` lists the continuations it encoded."""

    def __init__(self, precision: str = "bf16", model: str | None = None) -> None:
        self.model = model or resolve(None).name
        self.precision = precision
        self.lm = SimpleNamespace(config=SimpleNamespace(hidden_size=HIDDEN))
        self.encoded: list[str] = []

    @property
    def identity(self) -> BackendIdentity:
        label = self.model if self.precision == "fp32" else f"{self.model}@{self.precision}"
        return BackendIdentity("local", self.model, kind="local", label=label, details=(("precision", self.precision),))

    def continuation_states(self, pairs: Sequence[tuple[Prompt, str]], batch_tokens: int = 4096) -> list[Any]:
        states = []
        for prompt, continuation in pairs:
            self.encoded.append(continuation)
            text = json.dumps(prompt.to_json()) + continuation
            seed = int(hashlib.sha256(text.encode()).hexdigest()[:8], 16)
            states.append(torch.randn(2 * HIDDEN, generator=torch.Generator().manual_seed(seed)))
        return states


@pytest.fixture
def use_backend(monkeypatch: pytest.MonkeyPatch) -> Callable[[FakeBackend], FakeBackend]:
    """Makes the next GeneratorDiscriminators read the given stand-in instead of loading the local model."""
    import assistant.backends.local as local

    def use(backend: FakeBackend) -> FakeBackend:
        monkeypatch.setattr(local, "local_transformers", lambda model, precision, device="cpu": backend)
        return backend

    return use


def npy_files(folder: Path) -> list[Path]:
    return sorted(folder.rglob("*.npy"))


def test_features_are_written_at_once_and_read_back_by_a_later_instance(tmp_path: Path, use_backend) -> None:
    store = tmp_path / "features"
    first = use_backend(FakeBackend())
    model = GeneratorDiscriminator(features=store)
    model.train(True)
    trained = model.embed(model.batch([p for p, _ in PAIRS[:2]], [c for _, c in PAIRS[:2]], 256))
    assert len(first.encoded) == 2 and len(npy_files(store)) == 2  # written as soon as they were encoded
    model.train(False)  # ranking keeps nothing in memory, but writes what it encodes
    ranked = model.embed(PAIRS)
    assert first.encoded[2:] == [PAIRS[2][1].rstrip() + "\n```"] and len(npy_files(store)) == 3
    assert torch.equal(ranked[:2], trained)
    assert not list(store.rglob("*.partial"))

    later = use_backend(FakeBackend())
    again = GeneratorDiscriminator(features=store)
    for mode in (True, False):
        again.train(mode)
        assert torch.equal(again.embed(PAIRS), ranked)
    assert later.encoded == []  # every pair was read from disk, none encoded again


def test_another_precision_or_model_does_not_reuse_features(tmp_path: Path, use_backend) -> None:
    store = tmp_path / "features"
    use_backend(FakeBackend("bf16"))
    GeneratorDiscriminator(features=store).embed(PAIRS)
    fp32 = use_backend(FakeBackend("fp32"))
    GeneratorDiscriminator(features=store).embed(PAIRS)
    assert len(fp32.encoded) == 3 and len(npy_files(store)) == 6
    other = use_backend(FakeBackend("bf16", model="another-model"))
    GeneratorDiscriminator(features=store).embed(PAIRS)
    assert len(other.encoded) == 3 and len(npy_files(store)) == 9


def test_a_damaged_feature_file_is_encoded_again(tmp_path: Path, use_backend) -> None:
    store = tmp_path / "features"
    use_backend(FakeBackend())
    expected = GeneratorDiscriminator(features=store).embed(PAIRS)
    files = npy_files(store)
    files[0].write_bytes(files[0].read_bytes()[:-5])  # truncated
    files[1].write_bytes(b"not an array")
    damaged = {files[0], files[1]}
    later = use_backend(FakeBackend())
    model = GeneratorDiscriminator(features=store)
    assert torch.equal(model.embed(PAIRS), expected)
    assert len(later.encoded) == 2  # only the two damaged ones
    assert all(FeatureStore(store).get(path.stem, 2 * HIDDEN) is not None for path in damaged)  # written anew
    assert FeatureStore(store).get(files[2].stem, 2 * HIDDEN + 1) is None  # another width: not these features


def test_without_a_store_nothing_is_written(tmp_path: Path, use_backend, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    backend = use_backend(FakeBackend())
    model = make_model(CondorConfig(backbone="generator", contrastive=False))
    assert isinstance(model, GeneratorDiscriminator) and model.store is None
    for mode in (True, False):
        model.train(mode)
        model.embed(PAIRS)
    assert len(backend.encoded) == 6  # training's memory is dropped when it ends: ranking encodes again
    assert list(tmp_path.iterdir()) == []


def toy_data() -> Dataset:
    """Six problems, a correct and a wrong program each (no sandbox needed)."""
    problems = {f"p{i}": f"Return {i} plus x." for i in range(6)}
    programs = [
        Program(problem, f"def f(x):\n    return x {op} {i}\n", op == "+", "reference" if op == "+" else "mutant:arith")
        for i, problem in enumerate(problems)
        for op in ("+", "-")
    ]
    return Dataset(problems=problems, programs=programs, pairs=[], partials=[])


def test_eval_discriminator_resumes_the_generator_variant_from_its_features(tmp_path: Path, use_backend) -> None:
    from assistant.evaluate.discriminator import run_discriminator_eval

    records = [
        {
            "task_id": "t1",
            "samples": [
                {"code": "def f(x):\n    return x * 1\n", "parsed": True, "passed": False},
                {"code": "def f(x):\n    return x + 1\n", "parsed": True, "passed": True},
            ],
            "picks": {"first": 0, "random": 1, "oracle": 1},
        }
    ]
    runs = [("toy", records, {"t1": "Return 1 plus x."})]
    config = CondorConfig(epochs=1, batch=4, seed=0)
    first = use_backend(FakeBackend())
    done = run_discriminator_eval(toy_data(), ["generator"], config, runs, tmp_path, holdout=0.34)
    store = tmp_path / "models" / "generator-features"
    assert len(first.encoded) == 13 and len(npy_files(store)) == 13  # 12 programs and 1 new candidate
    assert (tmp_path / "models" / "generator" / "head.safetensors").exists()  # saving the variant kept the store

    # A run stopped before its model was saved, with part of its features written: the next one encodes the rest.
    import shutil

    shutil.rmtree(tmp_path / "models" / "generator")
    for path in npy_files(store)[:5]:
        path.unlink()
    later = use_backend(FakeBackend())
    again = run_discriminator_eval(toy_data(), ["generator"], config, runs, tmp_path, holdout=0.34)
    assert len(later.encoded) == 5 and len(npy_files(store)) == 13
    assert again["variants"]["generator"]["held_out"] == done["variants"]["generator"]["held_out"]
    assert again["variants"]["generator"]["ranking"] == done["variants"]["generator"]["ranking"]
