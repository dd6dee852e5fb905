"""A trained artifact belongs to the model that made it (issue 70): `auto` uses one only for that model, and only
for a method that has earned its place there (none has: the tests of the first open the gate with `earned_auto`),
asking for another model's by name is a one-line error naming both, and artifacts for several models live side by
side.

Real parts: a LAIL retriever trained on a bank's real index (MiniLM), with labels from a scripted labeler that
stands in for the model only where the label scores come from; the pipeline builds its retriever as `generate`
does; a discriminator's manifest written through the artifact store.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from assistant.backends.models import encoder_dir, resolve
from assistant.config import load_settings
from assistant.core.candidates import Candidate
from assistant.errors import UsageError
from assistant.methods.artifacts import save_artifact
from assistant.methods.lail import LailConfig, train_lail
from assistant.pipeline.options import GenerationOptions
from assistant.pipeline.pipeline import Pipeline
from assistant.pipeline.registry import auto_ranker, make_rankers, make_retriever

from .conftest import ScriptedBackend, toy_project_functions
from .test_trained_retrievers import POOL

SMALL = "qwen2.5-coder-0.5b"
LARGE = "qwen2.5-coder-1.5b"
CONFIG = LailConfig(candidates=2, positives=1, soft_negatives=1, hard_negatives=4, epochs=1, batch=4)


@pytest.fixture
def bank(tmp_path: Path) -> Path:
    path = tmp_path / "bank.jsonl"
    path.write_text("".join(json.dumps({"requirement": r, "code": c}) + "\n" for r, c in POOL), encoding="utf-8")
    return path


def pipeline_for(model: str, bank: Path, tmp_path: Path, encoder) -> Pipeline:
    """The pipeline `generate` runs with `model` generating, over the bank."""
    settings = load_settings(start=tmp_path)
    backend = ScriptedBackend(model=model)
    return Pipeline(GenerationOptions(), settings, start=tmp_path, bank=bank, backend=backend, encoder=encoder)


def train_for(model: str, index, encoder, folder: Path | None = None) -> Path:
    labeler = ScriptedBackend(model=model)  # stands in for the model only where label scores come from
    where = {"directory": folder} if folder is not None else {}
    return train_lail(index, encoder, encoder_dir(resolve(None, "encoder")), labeler, CONFIG, **where)[0]


def test_auto_leaves_a_trained_method_out_until_it_has_earned_its_place(bank, tmp_path, encoder) -> None:
    """No method beat its plain counterpart at the default model: a trained one serves only when named, and
    `--explain` says so; the same for the discriminator."""
    from assistant.methods.condor.model import discriminator_dir
    from assistant.pipeline.pipeline import Request
    from assistant.pipeline.registry import served_by

    index = pipeline_for(SMALL, bank, tmp_path, encoder).source().index
    train_for(SMALL, index, encoder)
    retriever = pipeline_for(SMALL, bank, tmp_path, encoder).retriever()
    assert retriever.name == "hybrid"
    assert served_by(retriever) == (
        f"auto picked hybrid: of the trained retrievers, lail serves {SMALL} but did not beat the plain retrievers "
        "where measured, so auto leaves it out (name it to use it)"
    )
    assert make_retriever("lail", index, encoder, SMALL).name == "lail"  # named, it serves
    manifest = {"generator": SMALL, "config": {}, "data": {}, "stats": {}}
    save_artifact(discriminator_dir(None, SMALL), "condor", lambda folder: None, manifest)
    one = [Candidate("x = 1", 0, 1, logprobs=(-0.5,))]
    assert auto_ranker(ScriptedBackend(model=SMALL), one, has_tests=False) == "logprob"
    answer = pipeline_for(SMALL, bank, tmp_path, encoder).answer(Request.resolve("reverse a list", root=tmp_path))
    assert "condor" not in answer.result.rankers
    assert answer.ranker_served_by == (
        f"no trained discriminator ranked: the one that serves {SMALL} did not beat agree and log-probability "
        "where measured, so auto leaves it out (name condor to rank with it)"
    )


def test_an_artifact_trained_for_one_model_is_never_used_for_another(bank, tmp_path, encoder, earned_auto) -> None:
    index = pipeline_for(SMALL, bank, tmp_path, encoder).source().index
    train_for(SMALL, index, encoder)  # the 0.5B's labels, where earlier versions kept them
    # Through the pipeline, as `generate` builds it: the 1.5B generating gets the plain counterpart, and why.
    assert pipeline_for(LARGE, bank, tmp_path, encoder).retriever().name == "hybrid"
    assert pipeline_for(SMALL, bank, tmp_path, encoder).retriever().name == "lail"
    # Through the registry: auto, and by name a one-line error naming both models and how to train for this one.
    assert make_retriever("auto", index, encoder, LARGE).name == "hybrid"
    with pytest.raises(UsageError) as refused:
        make_retriever("lail", index, encoder, LARGE)
    message = str(refused.value)
    assert "\n" not in message and SMALL in message and LARGE in message
    assert f"`assist train retriever lail --model {LARGE}`" in message
    assert make_retriever("lail", index, encoder, SMALL).name == "lail"


def test_explain_says_which_artifact_served_or_why_none(bank, tmp_path, encoder, earned_auto) -> None:
    from assistant.pipeline.registry import served_by

    index = pipeline_for(SMALL, bank, tmp_path, encoder).source().index
    assert served_by(make_retriever("auto", index, encoder, LARGE)) == (
        "auto picked hybrid: of the trained retrievers, none is trained for this pool"
    )
    folder = train_for(SMALL, index, encoder)
    why = served_by(pipeline_for(LARGE, bank, tmp_path, encoder).retriever())
    assert why == f"auto picked hybrid: of the trained retrievers, none serves {LARGE}: lail (trained for {SMALL})"
    why = served_by(pipeline_for(SMALL, bank, tmp_path, encoder).retriever()) or ""
    assert why.startswith(f"auto picked lail: the artifact in {folder} (trained for {SMALL}; ")
    assert served_by(make_retriever("bm25", index, encoder, SMALL)) is None  # a plain one asked by name: nothing
    # What `generate --json` prints (and `--explain` shows as its Retriever line): the answer carries it.
    from assistant.pipeline.pipeline import Request

    answer = pipeline_for(LARGE, bank, tmp_path, encoder).answer(Request.resolve("reverse a list", root=tmp_path))
    assert answer.to_json()["retriever_served_by"] == answer.served_by and f"none serves {LARGE}" in answer.served_by


def test_artifacts_for_several_models_live_side_by_side(bank, tmp_path, encoder, earned_auto) -> None:
    from assistant.methods.artifacts import artifact_dir
    from assistant.pipeline.registry import served_by

    index = pipeline_for(SMALL, bank, tmp_path, encoder).source().index
    small = train_for(SMALL, index, encoder)
    large = train_for(LARGE, index, encoder, artifact_dir(index, "lail", LARGE))
    assert large == small.with_name(f"{small.name}@{LARGE}") and (large / "labels.jsonl").is_file()
    for model, folder in ((SMALL, small), (LARGE, large)):
        retriever = make_retriever("auto", index, encoder, model)
        assert retriever.name == "lail" and retriever.encoder.name == f"lail:{folder.name}"  # type: ignore[attr-defined]
        assert f"trained for {model}" in (served_by(retriever) or "")
    # Asked without a generator (no evaluation does so any more: each names the model it runs), the latest trained.
    assert make_retriever("lail", index, encoder).encoder.name == f"lail:{large.name}"  # type: ignore[attr-defined]


def test_old_manifests_count_as_the_model_their_provenance_names() -> None:
    from assistant.methods.artifacts import recorded_generator

    assert recorded_generator({"method": "lail", "labeler": {"backend": "local", "model": SMALL}}) == SMALL
    assert recorded_generator({"method": "selfracg", "model": SMALL, "precision": "bf16"}) == SMALL
    assert recorded_generator({"method": "tstr", "embedder": "all-minilm-l6-v2"}) == "none"
    assert recorded_generator({"method": "condor", "data": {"sources": {"eval": []}}, "stats": {}}) == "none"
    assert recorded_generator({"method": "condor", "data": {"sources": {"eval": ["run"]}}, "stats": {}}) is None
    assert recorded_generator({"method": "jointcom", "generator": {"backend": "local", "model": LARGE}}) == LARGE


def test_auto_ranks_with_a_discriminator_only_for_the_model_it_was_trained_for(earned_auto) -> None:
    from assistant.paths import cache_dir

    manifest = {"generator": SMALL, "config": {}, "data": {}, "stats": {}}
    save_artifact(cache_dir() / "discriminator", "condor", lambda folder: None, manifest)
    one = [Candidate("x = 1", 0, 1, logprobs=(-0.5,))]
    assert auto_ranker(ScriptedBackend(model=SMALL), one, has_tests=False) == "condor"
    assert auto_ranker(ScriptedBackend(model=LARGE), one, has_tests=False) == "logprob"
    with pytest.raises(UsageError, match=f"trained for {SMALL}, not {LARGE}"):
        make_rankers("condor", ScriptedBackend(model=LARGE))


def test_doctor_lists_which_methods_are_trained_for_which_model(scratch_repo: Path, monkeypatch) -> None:
    from assistant.backends.models import DEFAULT_GENERATOR
    from assistant.paths import cache_dir, repo_dir
    from assistant.ui.doctor import trained_checks

    monkeypatch.chdir(scratch_repo)  # the settings that apply here: the default model
    assert [c.detail for c in trained_checks(scratch_repo)] == [
        "no trained retriever or discriminator (optional: `assist train --help`)"
    ]
    retrievers = repo_dir(scratch_repo, create=True) / "retrievers"
    old = {
        "labeler": {"backend": "local", "model": SMALL},
        "pool": "repo here (9 examples)",
        "trained": "2026-11-02T10:00",
    }
    save_artifact(retrievers / "lail", "lail", lambda folder: None, old)  # from before the field: its labeler
    save_artifact(retrievers / "tstr", "tstr", lambda folder: None, {"pool": "repo here (9 examples)"})
    mine = {"generator": DEFAULT_GENERATOR, "data": {"sources": {"bank": "mbpp", "eval": ["run"]}}}
    save_artifact(cache_dir() / "discriminator", "condor", lambda folder: None, mine | {"trained": "2026-12-04T09:00"})
    # A SelfRACG branch says how it was trained (its options change what it is).
    branch = {"generator": SMALL, "pool": "corpus lib (40 examples)", "trained": "2026-12-06T12:00", "stage2": None}
    branch["config"] = {"layers": 8, "prefix": "", "synthetic": 0}
    save_artifact(cache_dir() / "retrievers" / "selfracg-generic", "selfracg", lambda folder: None, branch)
    kept = branch | {"generator": DEFAULT_GENERATOR, "config": {"synthetic": 0}}  # a two-stage training's stage 1
    save_artifact(cache_dir() / "retrievers" / "selfracg-generic-stage1", "selfracg", lambda folder: None, kept)
    checks = trained_checks(scratch_repo)
    assert all(check.ok is True for check in checks)  # training is optional: never a warning
    by_folder = [check.detail for check in checks if check.name == "trained selfracg"]
    assert by_folder[1].endswith(
        "stage 1, on corpus lib (40 examples); kept beside stage 1 + 2 (the ablation without stage 2), not served"
    )
    lines = {check.name: check.detail for check in checks}
    assert lines["trained lail"] == (
        f"for {SMALL}, 2026-11-02, on repo here (9 examples); does not serve {DEFAULT_GENERATOR}"
    )
    assert lines["trained tstr"].startswith("for any model (no generator enters it), ")
    serves = f"; serves {DEFAULT_GENERATOR} when named (--retriever tstr; auto leaves it out)"
    assert lines["trained tstr"].endswith(serves)
    assert by_folder[0] == (
        f"for {SMALL}, 2026-12-06, stage 1, first 8 layers, no candidate prefix, on corpus lib (40 examples); "
        f"does not serve {DEFAULT_GENERATOR}"
    )
    assert lines["trained condor"] == (
        f"for {DEFAULT_GENERATOR}, 2026-12-04, on mbpp, 1 eval run(s); serves {DEFAULT_GENERATOR} when named "
        "(--ranker agree+condor; auto leaves it out)"
    )


def test_doctor_lists_the_users_own_when_the_repo_ships_an_artifact(scratch_repo: Path) -> None:
    from assistant.ui.doctor import trained_checks

    from .conftest import git

    shipped = scratch_repo / ".assist" / "retrievers" / "lail" / "manifest.json"
    shipped.parent.mkdir(parents=True)
    shipped.write_text(json.dumps({"method": "lail", "generator": SMALL}))
    git(scratch_repo, "add", "-f", ".assist/retrievers/lail/manifest.json")
    checks = trained_checks(scratch_repo)  # no traceback: the repo's artifact is neither read nor listed
    assert [check.name for check in checks] == ["trained"] and checks[0].ok is True


def test_docstring_uses_a_jointcom_retriever_only_for_the_model_whose_losses_trained_it(tmp_path: Path) -> None:
    from assistant.methods.jointcom import trained_encoder

    base, trained = tmp_path / "jointcom", encoder_dir(resolve(None, "encoder"))  # the real MiniLM as its encoder
    manifest = {"generator": {"backend": "local", "model": SMALL}}  # what JOINTCOM has always recorded
    save_artifact(base, "jointcom", lambda folder: (folder / "encoder").symlink_to(trained, True), manifest)
    assert trained_encoder(base, LARGE) is None  # `assist docstring` with the 1.5B: exemplars by code tokens
    assert trained_encoder(base, SMALL).name == "jointcom:jointcom"
    assert trained_encoder(base) is not None  # without a generator: the latest trained


def test_docstring_uses_jointcom_only_when_the_config_asks_and_says_when_none_serves(scratch_repo, monkeypatch) -> None:
    """JOINTCOM did not beat plain exemplars: `assist docstring` uses it only with `docstring.exemplars =
    "jointcom"`, and then one trained for the model in use, or it stops with one line before any model loads."""
    from typer.testing import CliRunner

    from assistant.methods.artifacts import keyed_dir
    from assistant.methods.jointcom import retriever_dir
    from assistant.ui.cli import app
    from assistant.ui.docstring_cmd import _jointcom

    (scratch_repo / "work.py").write_text("def f():\n    return 1\n")
    (scratch_repo / ".assist.toml").write_text('[docstring]\nexemplars = "jointcom"\n')
    monkeypatch.chdir(scratch_repo)
    result = CliRunner().invoke(app, ["docstring", "--write", "--model", LARGE, "work.py"])
    assert result.exit_code == 2, result.output
    assert f"no JOINTCOM retriever in {scratch_repo} serves {LARGE}" in result.output
    assert "assist train docstring-retriever" in result.output and "def f():" in (scratch_repo / "work.py").read_text()
    folder = keyed_dir(retriever_dir([], scratch_repo), LARGE)
    trained = encoder_dir(resolve(None, "encoder"))
    manifest = {"generator": {"backend": "local", "model": LARGE}}
    save_artifact(folder, "jointcom", lambda f: (f / "encoder").symlink_to(trained, True), manifest)
    assert _jointcom(scratch_repo, LARGE).name == f"jointcom:{folder.name}"
    with pytest.raises(UsageError, match="trained per repository"):
        _jointcom(None, LARGE)


# -- the evaluations measure the artifact trained for the model they run (issue 70) --------------------------------

OTHER = "another-model"  # a model nothing was trained for


def refused_for(error: pytest.ExceptionInfo[UsageError], how: str) -> None:
    """The one-line error for a model nothing was trained for: both models it serves, this one, how to train."""
    message = str(error.value)
    assert "\n" not in message and SMALL in message and LARGE in message and f"not {OTHER}" in message
    assert how in message


def test_eval_docstring_measures_the_jointcom_retriever_trained_for_the_model_it_runs(bank, tmp_path, encoder) -> None:
    from assistant.code.examples import Example
    from assistant.methods.artifacts import keyed_dir
    from assistant.methods.jointcom import retriever_dir
    from assistant.ui.eval_cmd import _docstring_indexes

    words = ("parse", "merge", "split")
    pool = [Example(f"{w.title()} it.", f'def {w}(x):\n    """{w.title()} it."""\n    return x\n', w) for w in words]
    trained, base = encoder_dir(resolve(None, "encoder")), retriever_dir(pool)  # the real MiniLM as its encoder
    folders = {SMALL: base, LARGE: keyed_dir(base, LARGE)}
    for model, folder in folders.items():  # the other model's is saved last: the newer of the two
        manifest = {"generator": {"backend": "local", "model": model}}
        save_artifact(folder, "jointcom", lambda f: (f / "encoder").symlink_to(trained, True), manifest)
    for model, folder in folders.items():
        index = _docstring_indexes(["jointcom"], pool, pipeline_for(model, bank, tmp_path, encoder), 0)["jointcom"]
        assert index.encoder.name == f"jointcom:{folder.name}"  # type: ignore[union-attr]
    with pytest.raises(UsageError) as refused:
        _docstring_indexes(["jointcom"], pool, pipeline_for(OTHER, bank, tmp_path, encoder), 0)
    refused_for(refused, f"`assist train docstring-retriever --stdlib --seed 0 --model {OTHER}`")


def test_eval_likelihood_measures_the_lail_retriever_trained_for_the_model_it_runs(
    bank, tmp_path, encoder, monkeypatch
) -> None:
    import assistant.evaluate.strategies as strategies
    from assistant.datasets import Task
    from assistant.evaluate import Pool, run_likelihood
    from assistant.evaluate.report import retriever_identities
    from assistant.methods.artifacts import artifact_dir, directory_identity

    index = pipeline_for(SMALL, bank, tmp_path, encoder).source().index
    small = train_for(SMALL, index, encoder)
    large = train_for(LARGE, index, encoder, artifact_dir(index, "lail", LARGE))  # trained last: the newer
    built: list[str] = []

    def recorded(*args, **kwargs):  # the registry's own retriever, its encoder's name noted
        retriever = make_retriever(*args, **kwargs)
        built.append(retriever.encoder.name)  # type: ignore[attr-defined]
        return retriever

    monkeypatch.setattr(strategies, "make_retriever", recorded)
    pool = Pool(list(index.examples), index, encoder)
    task = Task("t/1", "Reverse a list.", "def reverse(xs):\n    return xs[::-1]", ())
    for model, folder in ((SMALL, small), (LARGE, large)):
        run_likelihood([task], pool, ["lail"], ScriptedBackend(model=model), tmp_path / model, demos=1)
        assert built[-1] == f"lail:{folder.name}"
        # What the run's folder records as the artifact its figures came from: the same one.
        assert retriever_identities(index, ["lail"], model) == {"lail": directory_identity(folder)}
    with pytest.raises(UsageError) as refused:
        run_likelihood([task], pool, ["lail"], ScriptedBackend(model=OTHER), tmp_path / OTHER, demos=1)
    refused_for(refused, f"`assist train retriever lail --model {OTHER}`")


def test_eval_repo_retrieves_with_the_generic_selfracg_adapters_trained_for_the_model_it_runs(monkeypatch) -> None:
    import numpy as np

    import assistant.methods.selfracg as selfracg
    from assistant.code.examples import Example
    from assistant.evaluate.repo.run import _retriever
    from assistant.indexing.index import Index
    from assistant.methods.artifacts import directory_identity
    from assistant.methods.selfracg import SelfRacgConfig, generic_dir
    from assistant.ui.eval_cmd import _selfracg_identity

    examples = [Example("", f"def f{i}():\n    return {i}\n", path=f"m{i}.py") for i in range(3)]
    index = Index(examples=examples, vectors=np.zeros((3, 1), "float32"), meta={"source": {"kind": "memory"}})
    folders = {SMALL: generic_dir(), LARGE: generic_dir(LARGE)}
    for model, folder in folders.items():  # the other model's is saved last: the newer of the two
        manifest = {"config": SelfRacgConfig(rank=4).to_json(), "generator": model, "model": model}
        save_artifact(folder, "selfracg", lambda f: (f / "adapter.safetensors").write_bytes(b""), manifest)
    loaded: list[str | None] = []

    def load_ine(model, precision="auto", config=None):  # the model the branch would run: noted, then stop
        loaded.append(model)
        raise RuntimeError("stop here")

    monkeypatch.setattr(selfracg, "load_ine", load_ine)
    for model, folder in folders.items():
        with pytest.raises(RuntimeError, match="stop here"):
            _retriever("selfracg", index, None, generator=model)
        assert loaded[-1] == model
        assert _selfracg_identity(["bm25", "selfracg"], model) == {"selfracg": directory_identity(folder)}
    with pytest.raises(UsageError) as refused:
        _retriever("selfracg", index, None, generator=OTHER)
    refused_for(refused, f"`assist train retriever selfracg --corpus DIR --model {OTHER}`")
    assert _selfracg_identity(["selfracg"], OTHER) == {}  # the run itself stops with that error
    with pytest.raises(RuntimeError, match="stop here"):  # the untrained branch: over the evaluated model too
        _retriever("selfracg-init", index, None, generator=SMALL)
    assert loaded[-1] == SMALL


def test_eval_repo_keeps_a_lail_retriever_for_each_model_that_labels(encoder) -> None:
    from assistant.evaluate.repo.run import heldout_lail
    from assistant.evaluate.repo.tasks import FunctionTask
    from assistant.indexing.index import build_index

    examples = toy_project_functions()
    index = build_index(examples, encoder, source={"kind": "repo-bench", "name": "toy"})
    task = FunctionTask("toy:pkg/m1.py::render", "toy", "pkg/m1.py", "render", 11, 11, 13, "Render the items.",
                        "return []", ("tests/test_m.py::test_render",))  # fmt: skip
    config = LailConfig(candidates=4, positives=1, soft_negatives=1, hard_negatives=2, epochs=1, batch=4, queries=6)
    labelers = {model: ScriptedBackend(model=model) for model in (SMALL, LARGE)}
    first = heldout_lail(index, encoder, [task], config=config, labeler=labelers[SMALL])
    second = heldout_lail(index, encoder, [task], config=config, labeler=labelers[LARGE])
    # Each in the folder of the model that labelled it, side by side.
    assert first.encoder.name.endswith(f"@{SMALL}") and second.encoder.name.endswith(f"@{LARGE}")
    again = heldout_lail(index, encoder, [task], config=config, labeler=labelers[SMALL])
    assert again.manifest == first.manifest  # the first model's is still there, not retrained over the other's


def test_eval_discriminator_retrains_a_head_read_from_another_generator() -> None:
    from assistant.evaluate.discriminator import _resumable
    from assistant.methods.condor.model import CondorConfig

    default = resolve(None).name  # the generator the `generator` backbone reads
    over = CondorConfig(backbone="generator", contrastive=False)
    saved = {"identity": "abc", "generator": default, "stats": {"backbone_model": default}}
    assert _resumable(saved, "abc", over) and not _resumable(saved, "abd", over)
    other = {**saved, "generator": OTHER, "stats": {"backbone_model": OTHER}}
    assert not _resumable(other, "abc", over)  # trained over another model (the default then): trained anew
    assert not _resumable({"identity": "abc", "stats": {"backbone_model": OTHER}}, "abc", over)  # before the field
    assert _resumable(other | {"generator": "none"}, "abc", CondorConfig())  # an encoder: no generator's states


# -- the rankers and the generation retrievers: what serves a model, what --explain says (issue 70) -----------------


@pytest.fixture(scope="module")
def tiny_encoder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 1-layer BERT (random weights) with MiniLM's tokenizer: a discriminator's backbone that loads in a blink."""
    from transformers import AutoTokenizer, BertConfig, BertModel

    tokenizer = AutoTokenizer.from_pretrained(str(encoder_dir(resolve(None, "encoder"))))
    config = BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=128)  # fmt: skip
    folder = tmp_path_factory.mktemp("tiny-encoder")
    BertModel(config).save_pretrained(str(folder), safe_serialization=True)
    tokenizer.save_pretrained(str(folder))
    return folder


def save_tiny_condor(tiny_encoder: Path, folder: Path, generator: str) -> Path:
    """A real (tiny, untrained) Condor discriminator over `tiny_encoder`, saved for `generator` in `folder`."""
    import dataclasses

    from assistant.methods.condor.model import Condor, CondorConfig, make_model

    config = CondorConfig(backbone=str(tiny_encoder), max_length=64)
    manifest = {"generator": generator, "config": dataclasses.asdict(config), "stats": {}, "trained": "2026-12-01"}
    Condor(make_model(config), manifest).save(folder)
    return folder


def test_explain_says_which_discriminator_ranked_or_that_none_serves_the_model(
    tmp_path: Path, monkeypatch, tiny_encoder, earned_auto
) -> None:
    from assistant.methods.condor.model import discriminator_dir
    from assistant.pipeline.registry import available_rankers, ranker_served_by

    monkeypatch.chdir(tmp_path)  # outside a repo: the user's own discriminators
    assert ranker_served_by(make_rankers("logprob", ScriptedBackend(model=LARGE)), LARGE) is None  # none trained
    folder = save_tiny_condor(tiny_encoder, discriminator_dir(None, SMALL), SMALL)
    # The 0.5B generating: auto ranks with it, and --explain names the artifact and the model it was trained for.
    one = [Candidate("x = 1", 0, 1, logprobs=(-0.5,))]
    small = ScriptedBackend(model=SMALL)
    assert auto_ranker(small, one, has_tests=False) == "condor"
    assert "condor" in available_rankers(auto_ranker(small, one, False), small, one, False)
    why = ranker_served_by(make_rankers("condor", small), SMALL) or ""
    assert why == f"condor: the artifact in {folder} (trained for {SMALL}; 2026-12-01)"
    # The 1.5B generating: never offered nor used (the TUI's list too), and --explain says why none ranked.
    large = ScriptedBackend(model=LARGE)
    assert auto_ranker(large, one, has_tests=True) == "exec+logprob"
    assert "condor" not in available_rankers(auto_ranker(large, one, True), large, one, True)
    why = ranker_served_by(make_rankers("exec+logprob", large), LARGE) or ""
    assert why.startswith(f"no trained discriminator ranked: the discriminator in {folder.parent}: ")
    assert f"trained for {SMALL}, not {LARGE}" in why and "\n" not in why


def test_generate_explains_which_discriminator_ranked_or_why_none_did(
    tmp_path: Path, monkeypatch, capsys, tiny_encoder, earned_auto
) -> None:
    from assistant.methods.condor.model import discriminator_dir
    from assistant.pipeline.pipeline import Request
    from assistant.ui.cli import _print_answer

    from .conftest import pipeline_for

    monkeypatch.chdir(tmp_path)  # outside a repo: the user's own discriminators
    folder = save_tiny_condor(tiny_encoder, discriminator_dir(None, SMALL), SMALL)
    replies = ["def add(a, b):\n    return a + b\n"]  # one candidate: auto weighs no agreement
    request = Request.resolve("add two numbers", root=tmp_path)
    # The 0.5B generating: auto ranks with its discriminator, and the answer names it.
    answer = pipeline_for(tmp_path, ScriptedBackend(replies, model=SMALL), n=1, ranker="auto").answer(request)
    assert "condor" in answer.result.rankers
    assert answer.ranker_served_by == f"condor: the artifact in {folder} (trained for {SMALL}; 2026-12-01)"
    assert answer.to_json()["ranker_served_by"] == answer.ranker_served_by
    # The 1.5B generating: ranked without it, and the answer says why none ranked (--json and --explain too).
    answer = pipeline_for(tmp_path, ScriptedBackend(replies, model=LARGE), n=1, ranker="auto").answer(request)
    assert "condor" not in answer.result.rankers
    why = answer.to_json()["ranker_served_by"] or ""
    assert why.startswith("no trained discriminator ranked: ") and f"trained for {SMALL}, not {LARGE}" in why
    capsys.readouterr()
    _print_answer(answer, True, None, None, repo_tests=False)
    assert f"Ranker: {why}" in capsys.readouterr().out
    # A plain ranker asked for by name: nothing to explain.
    answer = pipeline_for(tmp_path, ScriptedBackend(replies, model=LARGE), n=1, ranker="logprob").answer(request)
    assert answer.ranker_served_by is None


def test_a_repos_discriminator_for_another_model_does_not_hide_the_users_own_for_this_one(
    scratch_repo: Path, monkeypatch, tiny_encoder
) -> None:
    from assistant.methods.condor.model import discriminator_dir, find_discriminator

    mine = save_tiny_condor(tiny_encoder, discriminator_dir(None, LARGE), LARGE)  # the user's, for the 1.5B
    repos = save_tiny_condor(tiny_encoder, discriminator_dir(scratch_repo, SMALL), SMALL)  # the repo's, the 0.5B's
    assert find_discriminator(scratch_repo, SMALL) == repos  # the repo's own first, for its model
    assert find_discriminator(scratch_repo, LARGE) == mine
    monkeypatch.chdir(scratch_repo)
    ranker = make_rankers("condor", ScriptedBackend(model=LARGE))[0]
    assert ranker.model.directory == mine  # type: ignore[attr-defined]


def test_generate_uses_selfracg_adapters_only_for_the_model_they_extend(tmp_path: Path) -> None:
    import numpy as np

    from assistant.code.examples import Example
    from assistant.indexing.index import Index
    from assistant.methods.selfracg import SelfRacgConfig, generic_dir
    from assistant.pipeline.registry import trained_folder

    examples = [Example("", f"def f{i}():\n    return {i}\n", path=f"m{i}.py") for i in range(3)]
    index = Index(examples=examples, vectors=np.zeros((3, 1), "float32"), meta={"source": {"kind": "memory"}})
    manifest = {"config": SelfRacgConfig(rank=4).to_json(), "generator": SMALL, "model": SMALL}
    save_artifact(generic_dir(SMALL), "selfracg", lambda f: (f / "adapter.safetensors").write_bytes(b""), manifest)
    assert trained_folder("selfracg", index, SMALL) == generic_dir(SMALL)  # the generic adapters serve any pool
    with pytest.raises(UsageError) as refused:  # `generate --retriever selfracg` with the 1.5B: before any model loads
        make_retriever("selfracg", index, None, LARGE)  # type: ignore[arg-type]
    message = str(refused.value)
    assert "\n" not in message and f"trained for {SMALL}, not {LARGE}" in message
    assert f"`assist train retriever selfracg --model {LARGE}`" in message
    assert make_retriever("auto", index, None, SMALL).name == "hybrid"  # type: ignore[arg-type]  # not in auto


def test_a_model_independent_artifact_serves_every_model(tmp_path: Path) -> None:
    import numpy as np

    from assistant.code.examples import Example
    from assistant.indexing.index import Index
    from assistant.methods.artifacts import artifact_dir
    from assistant.pipeline.registry import trained_folder

    examples = [Example(f"Return {i}.", f"def f{i}():\n    return {i}\n") for i in range(3)]
    index = Index(examples=examples, vectors=np.zeros((3, 1), "float32"), meta={"source": {"kind": "memory"}})
    folder = artifact_dir(index, "tstr")
    save_artifact(folder, "tstr", lambda f: None, {"generator": "none", "embedder": "all-minilm-l6-v2"})
    assert trained_folder("tstr", index, SMALL) == trained_folder("tstr", index, LARGE) == folder  # TST^R: no generator


def test_doctor_names_no_model_when_the_settings_do_not_load(scratch_repo: Path, monkeypatch) -> None:
    from assistant.config import config_dir
    from assistant.paths import cache_dir
    from assistant.ui.doctor import trained_checks

    monkeypatch.chdir(scratch_repo)
    mine = {"generator": SMALL, "trained": "2026-12-04"}
    save_artifact(cache_dir() / "discriminator", "condor", lambda f: None, mine)
    config_dir().mkdir(parents=True, exist_ok=True)
    (config_dir() / "config.toml").write_text("model = \n", encoding="utf-8")  # not TOML: the config line says so
    assert [check.detail for check in trained_checks(scratch_repo)] == [f"for {SMALL}, 2026-12-04, on ?"]
