"""The one pipeline: its options (defaults < config files < env < flags), its registries, and what it loads."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from assistant.config import DEFAULT_TOP_P, load_settings
from assistant.core.agreement import entry_point
from assistant.core.candidates import Candidate
from assistant.errors import UsageError
from assistant.indexing.index import index_bank
from assistant.pipeline import GenerationOptions, Pipeline, Request
from assistant.pipeline.pipeline import encoder_name
from assistant.pipeline.registry import (
    RANKERS,
    RETRIEVER_CHOICES,
    auto_ranker,
    available_rankers,
    make_rankers,
    parse_rankers,
)

from .conftest import ScriptedBackend

PROGRAMS = ["def add(a, b):\n    return a + b\n", "def add(a, b):\n    return b + a\n"]


def tiny_backend() -> ScriptedBackend:
    """The conftest's scripted backend playing PROGRAMS in turn with fixed log-probabilities, unable to score other
    text; it records the sampling parameters it was given (`params`)."""
    return ScriptedBackend([(PROGRAMS[0], -0.1), (PROGRAMS[1], -0.2)], tokens=5, scores=False)


class FakeEncoder:
    """Deterministic vectors under the default encoder's name (so an index it built opens as the real one's)."""

    dim = 4

    def __init__(self) -> None:
        self.name = encoder_name()
        self.calls = 0

    def encode(self, texts, progress=None):
        self.calls += 1
        rng = np.random.default_rng(len(texts))
        vectors = rng.normal(size=(len(texts), self.dim)).astype("float32")
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def refuse_to_load():
    raise AssertionError("the encoder was loaded")


@pytest.fixture
def bank(tmp_path: Path) -> Path:
    path = tmp_path / "bank.jsonl"
    rows = [
        {"requirement": "add two numbers", "code": "def add(a, b):\n    return a + b\n"},
        {"requirement": "multiply two numbers", "code": "def mul(a, b):\n    return a * b\n"},
        {"requirement": "reverse a string", "code": "def rev(s):\n    return s[::-1]\n"},
    ]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    index_bank(path, FakeEncoder())  # built once, as `assist index --bank` would
    return path


# -- options -------------------------------------------------------------------------------------------------------


def test_options_come_from_the_config_file_then_env_then_flags(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / ".assist.toml").write_text('[generate]\nn = 3\nk = 1\ntop_p = 0.5\nretriever = "bm25"\n')
    settings = load_settings(start=tmp_path)  # no trust needed: these decide nothing about where code goes
    options = GenerationOptions.from_settings(settings)
    assert (options.n, options.k, options.top_p, options.retriever, options.ranker) == (3, 1, 0.5, "bm25", "auto")
    assert options.max_new_tokens is None and options.params().max_new_tokens == 256

    monkeypatch.setenv("ASSIST_GENERATE_N", "7")
    monkeypatch.setenv("ASSIST_GENERATE_TEMPERATURE", "0.2")
    settings = load_settings(start=tmp_path)
    options = GenerationOptions.from_settings(settings, n=2, k=None, top_p=None)  # None: not given on the command line
    assert (options.n, options.k, options.temperature, options.top_p) == (2, 1, 0.2, 0.5)
    rows = {row["key"]: row for row in settings.describe()}
    assert rows["generate.n"]["value"] == 7 and rows["generate.n"]["source"] == "env ASSIST_GENERATE_N"
    assert rows["generate.k"]["source"].endswith(".assist.toml")


def test_bad_generate_settings_are_one_line_errors(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / ".assist.toml").write_text("[generate]\ntop_p = 1.5\n")
    with pytest.raises(UsageError, match=r"bad value for generate\.top_p"):
        load_settings(start=tmp_path)
    (tmp_path / ".assist.toml").write_text("[generate]\nn = 0\n")
    with pytest.raises(UsageError, match=r"bad value for generate\.n"):
        load_settings(start=tmp_path)
    with pytest.raises(UsageError, match="unknown retriever"):
        GenerationOptions(retriever="magic").check()
    with pytest.raises(UsageError, match="unknown ranker"):
        GenerationOptions(ranker="exec+magic").check()


def test_top_p_reaches_the_sampler(tmp_path: Path) -> None:
    options = GenerationOptions(n=2, k=0, ranker="first", top_p=0.42, temperature=0.3, seed=9)
    params = options.params()
    assert (params.n, params.top_p, params.temperature, params.seed) == (2, 0.42, 0.3, 9)
    assert GenerationOptions().params().top_p == DEFAULT_TOP_P
    backend = tiny_backend()
    pipeline = Pipeline(options, load_settings(start=tmp_path), start=tmp_path, backend=backend)
    pipeline.generate(Request("add two numbers", root=tmp_path))
    assert backend.params[0].top_p == 0.42


def test_generate_help_names_the_defaults_and_the_settings() -> None:
    from assistant.ui.cli import app

    result = CliRunner().invoke(app, ["generate", "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    text = " ".join(result.output.split())
    assert "generate.n, else 5" in text and "generate.k, else 4; filling a stub 2" in text and "else 0.95" in text


# -- registry ------------------------------------------------------------------------------------------------------


def test_ranker_registry_parses_builds_and_chooses() -> None:
    backend = tiny_backend()
    assert parse_rankers(" exec + logprob ") == ["exec", "logprob"]
    assert [r.name for r in make_rankers("exec+first", None)] == ["exec", "first"]
    with pytest.raises(UsageError, match="unknown ranker 'condr'"):
        parse_rankers("exec+condr")
    with pytest.raises(UsageError, match="needs a backend"):
        make_rankers("logprob", None)
    assert set(RANKERS) == {
        *("first", "random", "logprob", "exec", "agree", "reviewer", "coder-reviewer", "condor", "repo-tests")
    }
    assert RETRIEVER_CHOICES[0] == "auto" and "bm25" in RETRIEVER_CHOICES
    scored = [Candidate("x = 1", 0, 1, logprobs=(-0.5,))]
    unscored = [Candidate("x = 1", 0, 1)]
    assert auto_ranker(backend, scored, has_tests=False) == "logprob"  # log-probabilities came with the samples
    assert auto_ranker(backend, unscored, has_tests=False) == "first"  # and this backend cannot compute them
    assert auto_ranker(backend, unscored, has_tests=True) == "exec+first"
    assert available_rankers("first", backend, scored, has_tests=True) == ["first", "exec", "logprob"]
    # Without tests, candidates that define a function are told apart by the tests the model writes, unless
    # they cannot run (a stub's bodies outside their module, a method's); one candidate has nothing to agree with.
    functions = [Candidate(f"def f():\n    return {i}\n", i, 1, logprobs=(-0.5,)) for i in range(2)]
    assert auto_ranker(backend, functions, has_tests=False) == "agree+logprob"
    assert auto_ranker(backend, functions, has_tests=False, runnable=False) == "logprob"
    assert auto_ranker(backend, functions[:1], has_tests=False) == "logprob"
    assert auto_ranker(backend, functions, has_tests=True) == "exec+logprob"
    assert "agree" not in available_rankers("first", backend, functions, has_tests=False)  # costs a model call


def test_pipeline_reuses_ranker_objects(tmp_path: Path) -> None:
    pipeline = Pipeline(GenerationOptions(), load_settings(start=tmp_path), start=tmp_path, backend=tiny_backend())
    scored = [Candidate("x = 1", 0, 1, logprobs=(-0.5,))]
    first = pipeline.rankers("auto", scored, has_tests=True)
    assert [r.name for r in first] == ["exec", "logprob"]
    assert pipeline.rankers("exec+logprob", scored)[1] is first[1]


# -- what loads ----------------------------------------------------------------------------------------------------


def test_zero_shot_never_loads_the_encoder(tmp_path: Path, bank: Path) -> None:
    statuses: list[str] = []
    backend = tiny_backend()
    pipeline = Pipeline(
        GenerationOptions(n=2, k=0),
        load_settings(start=tmp_path),
        start=tmp_path,
        bank=bank,
        backend=backend,
        encoder_factory=refuse_to_load,
    )
    result = pipeline.generate(Request("add two numbers"), status=statuses.append)
    assert result.retriever == "none" and result.demonstrations == []
    # auto: the samples carried log-probabilities; agree first when two candidates define a function.
    functions = len(result.candidates) > 1 and entry_point([r.candidate for r in result.candidates]) is not None
    assert result.rankers == (["agree", "logprob"] if functions else ["logprob"])
    assert not pipeline.encoder_loaded and pipeline.loaded_retriever is None
    assert pipeline.source().description.startswith("bank ")  # opened by the encoder's name alone
    assert not any(line.startswith("Retrieving") for line in statuses)


def test_bm25_on_a_built_index_needs_no_encoder_and_says_when_it_retrieves(tmp_path: Path, bank: Path) -> None:
    statuses: list[str] = []
    backend = tiny_backend()
    pipeline = Pipeline(
        GenerationOptions(n=1, k=2, retriever="bm25", ranker="first"),
        load_settings(start=tmp_path),
        start=tmp_path,
        bank=bank,
        backend=None,
        encoder_factory=refuse_to_load,
    )
    pipeline.loaded_backend = backend  # as if loaded: the status line is said only when it loads
    result = pipeline.generate(Request("add two numbers"), status=statuses.append)
    assert result.retriever == "bm25" and result.demonstrations[0].example.requirement == "add two numbers"
    assert not pipeline.encoder_loaded
    assert statuses == [f"Retrieving from the {pipeline.source().description}"]


def test_dense_retrieval_loads_the_encoder_once(tmp_path: Path, bank: Path) -> None:
    made: list[FakeEncoder] = []

    def factory() -> FakeEncoder:
        made.append(FakeEncoder())
        return made[-1]

    pipeline = Pipeline(
        GenerationOptions(n=1, k=1, retriever="dense", ranker="first"),
        load_settings(start=tmp_path),
        start=tmp_path,
        bank=bank,
        backend=tiny_backend(),
        encoder_factory=factory,
    )
    assert pipeline.retrieve("add two numbers") and pipeline.retrieve("reverse")
    assert len(made) == 1 and pipeline.encoder() is made[0]


def test_a_stub_gets_two_demonstrations_and_a_requirement_four_unless_k_is_set(tmp_path: Path) -> None:
    bank = tmp_path / "bank.jsonl"
    words = ("add", "multiply", "divide", "subtract", "negate", "square")
    rows = [
        {"requirement": f"{word} numbers", "code": f"def f{i}(a, b):\n    return a\n"} for i, word in enumerate(words)
    ]
    bank.write_text("".join(json.dumps(row) + "\n" for row in rows))
    index_bank(bank, FakeEncoder())
    stub = tmp_path / "calc.py"
    stub.write_text('def add(a, b):\n    """Add two numbers."""\n    ...\n')

    def shown(options: GenerationOptions) -> tuple[int, int]:
        pipeline = Pipeline(options, load_settings(start=tmp_path), start=tmp_path, bank=bank, backend=tiny_backend())
        free = pipeline.generate(Request("add two numbers"))
        filled = pipeline.generate(Request(file=stub, function="add", root=tmp_path))
        return len(free.demonstrations), len(filled.demonstrations)

    assert shown(GenerationOptions(n=1, retriever="bm25", ranker="first")) == (4, 2)
    assert shown(GenerationOptions(n=1, k=3, retriever="bm25", ranker="first")) == (3, 3)


def test_the_target_file_is_read_once_per_request(tmp_path: Path, monkeypatch) -> None:
    from assistant.core import target as target_module

    path = tmp_path / "calc.py"
    path.write_text('def sub(a, b):\n    """Subtract."""\n    return a - b\n')
    reads: list[Path] = []
    original = target_module.Target.read.__func__

    def counting(cls, file):
        reads.append(Path(file))
        return original(cls, file)

    monkeypatch.setattr(target_module.Target, "read", classmethod(counting))
    pipeline = Pipeline(GenerationOptions(n=2, k=0, ranker="first"), load_settings(start=tmp_path), start=tmp_path)
    pipeline.loaded_backend = tiny_backend()
    result = pipeline.generate(Request("add two numbers", file=path, root=tmp_path))
    assert len(reads) == 1
    assert result.edits[0] is not None and "insert add" in result.edits[0].actions[0]


def test_stub_filling_goes_through_the_pipeline(tmp_path: Path) -> None:
    path = tmp_path / "calc.py"
    path.write_text('def add(a, b):\n    """Add two numbers."""\n    ...\n')
    pipeline = Pipeline(GenerationOptions(n=2, k=0), load_settings(start=tmp_path), start=tmp_path)
    pipeline.loaded_backend = tiny_backend()
    result = pipeline.generate(Request(file=path, function="add", root=tmp_path))
    assert result.function["function"] == "add" and result.requirement == "Add two numbers."
    assert result.rankers == ["logprob"]
    assert result.edits[0].diff.count("\n-    ...") == 1


def test_zero_shot_opens_no_index_even_when_the_default_bank_is_cold(tmp_path: Path) -> None:
    """-k 0 in a repo with no index: the embedded default bank would be embedded (seconds) just to learn the repo's
    root; it is not opened at all, and display paths are still relative to the repo."""
    from .conftest import git

    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / "mod.py").write_text("def f():\n    return 1\n")
    pipeline = Pipeline(
        GenerationOptions(n=1, k=0, ranker="first"),
        load_settings(start=repo),
        start=repo,
        backend=tiny_backend(),
        encoder_factory=refuse_to_load,
    )
    result = pipeline.generate(Request("add two numbers", file=repo / "mod.py"))
    assert pipeline.loaded_source is None and not pipeline.encoder_loaded
    assert all(edit is None or edit.display_path == "mod.py" for edit in result.edits)


def test_an_unknown_ranker_from_the_settings_fails_before_any_sampling(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ASSIST_GENERATE_RANKER", "bogus")
    backend = tiny_backend()
    pipeline = Pipeline(settings=load_settings(start=tmp_path), start=tmp_path, backend=backend)
    with pytest.raises(UsageError, match="unknown ranker 'bogus'"):
        pipeline.generate(Request("add two numbers"))
    assert backend.params == []  # nothing was sampled


def test_fragments_embedded_by_another_encoder_are_a_one_line_error(scratch_repo: Path) -> None:
    from assistant.indexing.index import index_repo

    index_repo(scratch_repo, FakeEncoder())
    meta = scratch_repo / ".assist" / "fragments" / "meta.json"  # as a run killed after the functions' save left it
    meta.write_text(json.dumps({**json.loads(meta.read_text()), "encoder": "another-encoder"}))
    options = GenerationOptions(n=1, k=2, retriever="bm25", ranker="first")
    pipeline = Pipeline(options, load_settings(start=scratch_repo), start=scratch_repo, encoder_factory=refuse_to_load)
    assert pipeline.source().kind == "repo"
    with pytest.raises(UsageError, match=r"embedded with another-encoder, not .*; run `assist index` again"):
        pipeline.fragment_retriever()


# -- who writes agree's tests ----------------------------------------------------------------------------------------


def test_agree_tests_come_from_the_model_local_tests_model_names(tmp_path: Path, monkeypatch) -> None:
    """`local.tests_model` names the model that writes agree's tests: it loads only when agree asks for tests (with
    the generator's settings), the generator is asked for the candidates alone, and `same` keeps the generator."""
    import assistant.pipeline.pipeline as pipeline_module
    from assistant.backends import LazyBackend

    generator = ScriptedBackend(PROGRAMS, model="qwen2.5-coder-1.5b", scores=False)
    writer = ScriptedBackend(["assert add(2, 3) == 5\nassert add(0, 0) == 0\n"], model="qwen2.5-coder-0.5b")
    loads: list[tuple[str, str | None, dict]] = []

    def load_generator(name: str, model: str | None = None, progress=None, **options):
        loads.append((name, model, options))
        return writer

    monkeypatch.setattr(pipeline_module, "load_generator", load_generator)
    monkeypatch.setenv("ASSIST_LOCAL_TESTS_MODEL", "0.5b")
    options = GenerationOptions(n=2, k=0, ranker="agree")
    pipeline = Pipeline(options, load_settings(start=tmp_path), start=tmp_path, backend=generator)
    agree = pipeline.rankers("agree")[0]
    assert isinstance(agree.backend, LazyBackend) and agree.backend.model == "qwen2.5-coder-0.5b"
    assert not agree.backend.loaded and loads == []  # nothing loads until tests are written

    result = pipeline.generate(Request("add two numbers", root=tmp_path))
    assert [(name, model) for name, model, _ in loads] == [("local", "qwen2.5-coder-0.5b")]
    assert loads[0][2]["tests_model"] == "0.5b" and "warm" in loads[0][2]  # the generator's settings, as read
    assert writer.calls == 2 and generator.calls == 2  # two test rows from the writer; the two candidates
    assert [item.scores["agree"].value > 0 for item in result.candidates] == [True, True]  # both pass both tests

    monkeypatch.setenv("ASSIST_LOCAL_TESTS_MODEL", "same")  # the writer changes; the generator stays loaded
    pipeline.configure(settings=load_settings(start=tmp_path))
    assert pipeline.loaded_backend is generator and pipeline.rankers("agree")[0].backend is generator
    monkeypatch.setenv("ASSIST_LOCAL_TESTS_MODEL", "gpt-7")  # a bad value fails before sampling, as the setting's
    pipeline.configure(settings=load_settings(start=tmp_path))
    with pytest.raises(UsageError, match=r"bad value for local\.tests_model: unknown model 'gpt-7'"):
        pipeline.generate(Request("add two numbers", root=tmp_path))
    assert generator.calls == 2


def test_a_writer_first_loaded_by_a_rerank_reports_to_the_rerank(tmp_path: Path, monkeypatch) -> None:
    """The writer loads where agree first asks for tests: in a rerank after a request ranked by logprob, its load
    reports to the rerank's progress, not to the earlier request's (a cancelled one would stop it)."""
    import assistant.pipeline.pipeline as pipeline_module

    generator = ScriptedBackend(PROGRAMS, model="qwen2.5-coder-1.5b")
    writer = ScriptedBackend(["assert add(2, 3) == 5\n"], model="qwen2.5-coder-0.5b")
    told: list = []

    def load_generator(name: str, model: str | None = None, progress=None, **options):
        told.append(progress)
        return writer

    monkeypatch.setattr(pipeline_module, "load_generator", load_generator)
    monkeypatch.setenv("ASSIST_LOCAL_TESTS_MODEL", "0.5b")
    options = GenerationOptions(n=2, k=0, ranker="logprob")
    pipeline = Pipeline(options, load_settings(start=tmp_path), start=tmp_path, backend=generator)

    def first(stage: str, done: int, total: int) -> None: ...

    def rerank(stage: str, done: int, total: int) -> None: ...

    result = pipeline.generate(Request("add two numbers", root=tmp_path), progress=first)
    assert told == []  # ranked by logprob: no tests written, nothing loaded
    reranked = pipeline.rank(result, spec="agree", progress=rerank)
    assert told == [rerank] and writer.calls == 2 and "agree" in reranked.candidates[0].scores  # its two rows


def test_the_tests_model_setting_resolves_names_and_refuses_unknown_ones() -> None:
    from assistant.backends import models

    assert models.tests_model_for("qwen2.5-coder-1.5b", "same") == "qwen2.5-coder-1.5b"
    assert models.tests_model_for("qwen2.5-coder-1.5b", "0.5b") == "qwen2.5-coder-0.5b"
    expected = models.AUTO_TESTS_MODEL.get("qwen2.5-coder-1.5b", "qwen2.5-coder-1.5b")
    assert models.tests_model_for("qwen2.5-coder-1.5b", "auto") == expected
    assert models.tests_model_for("qwen2.5-coder-0.5b", "auto") == "qwen2.5-coder-0.5b"  # none smaller
    with pytest.raises(UsageError, match="unknown"):
        models.tests_model_for("qwen2.5-coder-1.5b", "gpt-7")


@pytest.mark.model
def test_the_real_0_5b_loads_and_writes_agrees_tests_for_another_generator(tmp_path: Path, monkeypatch) -> None:
    """The 0.5B (OpenVINO, in-process), named by `local.tests_model`, loads when agree asks for tests and writes
    them for a generator under the 1.5B's name (scripted here: the tests never load the 1.5B, see conftest), whose
    candidates are ranked on them; the generator is asked for the candidates alone."""
    from assistant.backends import LazyBackend
    from assistant.config import backend_settings

    monkeypatch.setenv("ASSIST_LOCAL_TESTS_MODEL", "0.5b")
    programs = ["def bigger(a, b):\n    return max(a, b)\n", "def bigger(a, b):\n    return min(a, b)\n"]
    generator = ScriptedBackend(programs, model="qwen2.5-coder-1.5b", scores=False)
    options = GenerationOptions(n=2, k=0, ranker="agree", seed=0)
    settings = backend_settings("local", "qwen2.5-coder-1.5b")
    pipeline = Pipeline(options, settings, start=tmp_path, backend=generator)
    result = pipeline.generate(Request("Return the larger of two integers a and b.", root=tmp_path))

    writer = pipeline.test_writer()
    assert isinstance(writer, LazyBackend) and writer.loaded and writer.get().model == "qwen2.5-coder-0.5b"
    assert writer.get().usage.requests == 1 and writer.get().usage.completion_tokens > 0  # agree's one test call
    assert generator.calls == 2  # the two candidates; no test rows
    agree = {item.candidate.code: item.scores["agree"] for item in result.candidates}
    assert all("model-written tests" in score.why for score in agree.values()), agree
    assert result.candidates[0].candidate.code.strip() == programs[0].strip()  # its tests expect the larger more often
