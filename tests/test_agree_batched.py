"""agree's test-writing call decoded together with a stub's samples (issue 69): the grouped sampling call of the
backends, the guess made before sampling that agree will rank, the ranker taking the tests written beside the
samples without a call of its own, the warm server's grouped route over a real Unix socket, and, with the real
engine, samples and tests byte-identical with the batching on and off."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from assistant.backends import Backend, Completion, SamplingParams, Step, Usage, row_stream, streaming
from assistant.backends.prompts import Prompt
from assistant.config import load_settings
from assistant.core.agreement import AgreementRanker
from assistant.core.candidates import Candidate
from assistant.core.rank import Problem
from assistant.errors import UsageError
from assistant.pipeline import GenerationOptions, Pipeline, Request

from .conftest import PLUMBING_MODEL, ScriptedBackend, git
from .helpers_quadruple import QUADRUPLE_MODULE, SCRIPT, WRITTEN, quadruple_repo


class Echoing(Backend):
    """Answers each prompt with its own text, its seed and its place among the call's samples: what a group's
    `sample_batch` got, told back."""

    name, model = "echoing", "echoing"

    def __init__(self) -> None:
        self.usage = Usage()
        self.calls: list[tuple[tuple[str, ...], SamplingParams, list[int | None] | None]] = []

    def sample(self, prompt: Prompt, params: SamplingParams, step: Step | None = None) -> list[Completion]:
        if step is not None:
            step(0, 2)
            step(2, 2)
        text = str(prompt.messages[0]["content"])
        return [Completion(f"{text}@{params.seed}#{i}", 1, "stop") for i in range(params.n)]

    def sample_batch(self, prompts, params, step=None, seeds=None):  # type: ignore[no-untyped-def]
        self.calls.append((tuple(str(p.messages[0]["content"]) for p in prompts), params, seeds))
        return super().sample_batch(prompts, params, step, seeds)


def _prompt(text: str) -> Prompt:
    return Prompt(messages=({"role": "user", "content": text},), answer_prefix="```python\n", stop=("```",))


def test_the_default_samples_each_group_as_its_own_batch_in_order_with_its_seeds() -> None:
    from assistant.backends import SampleGroup

    backend = Echoing()
    first = SampleGroup((_prompt("a"), _prompt("b")), SamplingParams(n=2, seed=5), (5, 9))
    second = SampleGroup((_prompt("t"),), SamplingParams(n=1, max_new_tokens=128, seed=0))
    steps: list[tuple[int, int]] = []
    got = backend.sample_groups([first, second], lambda done, total: steps.append((done, total)))
    assert [[[c.text for c in row] for row in group] for group in got] == [
        [["a@5#0", "a@5#1"], ["b@9#0", "b@9#1"]],
        [["t@0#0"]],
    ]
    # each group went to the backend as one sample_batch, with its own parameters and seeds
    assert backend.calls == [(("a", "b"), first.params, [5, 9]), (("t",), second.params, None)]
    assert not backend.batches_groups  # one after another: no reason to fold a side request in
    # progress over the whole call: the first group's half (two prompts), then the second's
    assert [done / total for done, total in steps] == [0, 0.25, 0.25, 0.5, 0.5, 1]


@pytest.mark.parametrize(
    ("spec", "has_tests", "runnable", "expected"),
    [
        ("auto", False, True, True),  # auto without tests: agree then logprob
        ("auto", True, True, False),  # tests given: exec ranks
        ("auto", False, False, False),  # a method's, or outside a git work tree
        ("agree", True, True, True),
        ("exec+agree", True, True, True),
        ("logprob", False, True, False),
        ("agree", False, False, False),  # nothing to run the tests on
    ],
)
def test_plans_agree_guesses_the_choice_before_sampling(spec: str, has_tests: bool, runnable: bool, expected) -> None:
    from assistant.pipeline.registry import plans_agree

    assert plans_agree(spec, has_tests, runnable) is expected


def test_agree_takes_the_tests_written_beside_the_samples_without_a_call_of_its_own() -> None:
    from assistant.core.agreement import prefetched_tests, tests_request

    backend = ScriptedBackend({"Tests of quadruple": [WRITTEN]})
    problem = Problem(requirement="Return x times four.", prompt=_prompt("q"))
    candidates = [
        Candidate("def quadruple(x):\n    return 4 * x\n", 0),
        Candidate("def quadruple(x):\n    return x\n", 1),
    ]
    ranker = AgreementRanker(backend)
    _, _, key = tests_request(problem.requirement, "quadruple", "def quadruple(x):", backend.model)
    with prefetched_tests({key: ["assert quadruple(5) == 20\n", "x = 1\nassert quadruple(5) == 20\n"]}):
        name, tests, examples = ranker.tests(problem, candidates)
    assert (name, tests, examples) == ("quadruple", ["assert quadruple(5) == 20"], 0)
    assert backend.calls == 0  # no model call
    # Under another key (another signature, say), or outside the block, the call is made as before.
    with prefetched_tests({"another key": ["assert quadruple(5) == 20"]}):
        assert ranker.tests(problem, candidates)[1][0] == "assert quadruple(1) == 4"
    assert backend.calls == 2  # TEST_SAMPLES samples drawn in one call


class Counted(ScriptedBackend):
    """A scripted backend that says it decodes groups together, and counts the sampling calls made to it from
    outside (a call that its own default makes through another is not counted again)."""

    batches_groups = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.outer: list[str] = []
        self._depth = 0

    def _counted(self, name: str, call: Any) -> Any:
        if self._depth == 0:
            self.outer.append(name)
        self._depth += 1
        try:
            return call()
        finally:
            self._depth -= 1

    def sample(self, prompt, params, step=None):  # type: ignore[no-untyped-def]
        return self._counted("sample", lambda: super(Counted, self).sample(prompt, params, step))

    def sample_batch(self, prompts, params, step=None, seeds=None):  # type: ignore[no-untyped-def]
        return self._counted("sample_batch", lambda: super(Counted, self).sample_batch(prompts, params, step, seeds))

    def sample_groups(self, groups, step=None):  # type: ignore[no-untyped-def]
        return self._counted("sample_groups", lambda: super(Counted, self).sample_groups(groups, step))


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return quadruple_repo(tmp_path, monkeypatch, QUADRUPLE_MODULE)


def _fill(repo: Path, **options: Any) -> tuple[Any, Counted]:
    scripted = Counted(SCRIPT)
    pipeline = Pipeline(GenerationOptions(k=0, n=3, **options), load_settings(start=repo), start=repo, backend=scripted)
    return pipeline.generate(Request(file=repo / "pkg" / "geo.py", function="quadruple")), scripted


def _shown(result: Any) -> list[tuple[int, dict[str, Any]]]:
    return [
        (r.candidate.sample, {n: (s.value, s.why, s.details) for n, s in r.scores.items()}) for r in result.candidates
    ]


def test_a_stub_fill_ranked_by_agree_makes_one_sampling_call(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASSIST_AGREE_BATCH", "on")
    batched, scripted = _fill(repo)
    assert batched.rankers == ["agree", "logprob"]
    # The samples and agree's tests in one call (two before: the samples, then the tests in the rank stage).
    assert scripted.outer == ["sample_groups"]
    monkeypatch.setenv("ASSIST_AGREE_BATCH", "off")
    apart, separate = _fill(repo)
    assert separate.outer == ["sample_batch", "sample"]
    # The same ranking, scores, reasons and tests either way; the same prompts and parameters sampled.
    assert _shown(batched) == _shown(apart) and batched.candidates[0].candidate.sample in (1, 2)
    assert sorted(map(repr, scripted.params)) == sorted(map(repr, separate.params))
    assert batched.usage["requests"] == apart.usage["requests"] == 2


def test_no_tests_are_written_beside_the_samples_where_agree_will_not_rank(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ASSIST_AGREE_BATCH", "on")
    ranked, scripted = _fill(repo, ranker="logprob")
    assert ranked.rankers == ["logprob"] and scripted.outer == ["sample_batch"]
    assert not any("Tests of" in p.answer_prefix for p in scripted.prompts)


def test_a_batching_setting_other_than_on_or_off_is_one_line(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASSIST_AGREE_BATCH", "sometimes")
    with pytest.raises(UsageError, match=r"^ASSIST_AGREE_BATCH must be on or off, not 'sometimes'$"):
        _fill(repo)


# -- the warm server's grouped route -----------------------------------------------------------------------------


class Engine(Echoing):
    """The served engine (the socket and its protocol are what is tested): `sample_groups` as the base class
    makes it, a listener hearing each sampling call's first row."""

    context = 8192

    def __init__(self) -> None:
        super().__init__()
        self.grouped = 0

    def tokenizer(self, text: str, add_special_tokens: bool = False) -> dict:
        return {"input_ids": text.split()}

    def sample_texts(self, *args: object, **kwargs: object) -> list:
        return []

    def echo(self, prompt: str) -> list:
        return []

    def sample(self, prompt: Prompt, params: SamplingParams, step: Step | None = None) -> list[Completion]:
        stream = row_stream(prompt.answer_prefix, prompt.stop)
        if stream is not None:
            stream.text(str(prompt.messages[0]["content"]))
        self.usage.add(3, params.n, 0.5)
        return super().sample(prompt, params, step)

    def sample_groups(self, groups, step=None):  # type: ignore[no-untyped-def]
        self.grouped += 1
        return super().sample_groups(groups, step)


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Engine, Any]]:
    from assistant.backends import warm
    from assistant.backends.local_server import LocalServer

    runtime = Path(tempfile.mkdtemp(prefix="aw-", dir="/tmp"))  # a socket's path may take 107 bytes
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    socket_path, _ = warm.slot(PLUMBING_MODEL)
    engine = Engine()

    class Client(warm.WarmBackend):
        """The warm client as it is, less its tokenizer: prompts fit (the engine's own check is not tested)."""

        def __init__(self) -> None:
            self.state = type("State", (), {"socket": str(socket_path)})()
            self.usage, self.context = Usage(), 8192

        def check_fits(self, prompt: Prompt, new_tokens: int) -> int:
            return 1

    with LocalServer(engine, unix_path=socket_path) as server:
        yield engine, Client(), server
    shutil.rmtree(runtime, ignore_errors=True)


def test_groups_cross_the_socket_in_one_request_and_come_back_as_the_engine_gave_them(served) -> None:
    from assistant.backends import SampleGroup

    engine, client, _ = served
    groups = [
        SampleGroup((_prompt("stub a"), _prompt("stub b")), SamplingParams(n=2, seed=3), (3, 4)),
        SampleGroup((_prompt("tests"),), SamplingParams(n=2, max_new_tokens=128, seed=0)),
    ]
    heard: list[tuple[int, str]] = []
    with streaming(lambda call, text: heard.append((call, text))):
        got = client.sample_groups(groups)
    assert got == Echoing().sample_groups(groups)  # every field, each group in its place
    assert engine.grouped == 1 and engine.calls[0][2] == [3, 4] and engine.calls[1][2] is None
    assert client.usage.requests == 3 and client.usage.prompt_tokens == 9
    # the terminal hears the first group's first row, as call 0 of this command, and nothing of the tests
    assert heard == [(0, "```python\nstub a")]


def test_a_server_without_the_grouped_route_gets_the_groups_one_after_another(served) -> None:
    from assistant.backends import SampleGroup

    engine, client, server = served
    del server.httpd.RequestHandlerClass.streamed["/v1/assist/sample-groups"]  # as an older assist's server
    groups = [
        SampleGroup((_prompt("stub"),), SamplingParams(n=2, seed=3)),
        SampleGroup((_prompt("t"),), SamplingParams(n=1)),
    ]
    assert client.sample_groups(groups) == Echoing().sample_groups(groups)
    assert engine.grouped == 0 and len(engine.calls) == 2


def test_a_malformed_group_is_refused_in_one_line(served) -> None:
    from assistant.backends import warm
    from assistant.errors import ModelError

    _, client, _ = served
    with pytest.raises(ModelError, match="refused the request: each group must be an object"):
        warm.ask(client.state.socket, "/v1/assist/sample-groups", {"groups": ["no"]})
    with pytest.raises(ModelError, match="refused the request: groups must be a non-empty list"):
        warm.ask(client.state.socket, "/v1/assist/sample-groups", {"groups": []})


# -- the real engine ---------------------------------------------------------------------------------------------


STUBS = '''"""Small helpers."""


def running_max(values: list[int]) -> list[int]:
    """The largest value seen so far at each position.

    >>> running_max([1, 3, 2, 5])
    [1, 3, 3, 5]
    """
    ...
'''


@pytest.mark.model
def test_samples_and_tests_are_the_same_with_the_batching_on_and_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The 0.5B on the OpenVINO engine, a fresh engine for each way (as two commands): agree's test request is
    built for the candidates drawn and written in both ways (not byte-identical: see below)."""
    monkeypatch.setenv("ASSIST_AGREE_BATCH", "on")
    from assistant.backends.ov import OpenVINOBackend
    from assistant.core.agreement import entry_point, signature, tests_request
    from assistant.core.stubs import prepare_stub
    from assistant.core.stubs.fill import agree_beside, draw_stub
    from assistant.core.target import Target

    (tmp_path / "helpers.py").write_text(STUBS, encoding="utf-8")
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", ".")
    target = Target.read(tmp_path / "helpers.py")
    params = SamplingParams(n=5, temperature=0.8, top_p=0.95, seed=0)
    runs: dict[str, Any] = {}
    for way in ("apart", "beside"):
        engine = OpenVINOBackend.load(PLUMBING_MODEL)
        request = prepare_stub("running_max", engine, target, k=0)
        side = agree_beside(request, engine, target, lambda problem: True)
        assert side is not None
        if way == "apart":
            drawn = draw_stub(request, engine, params)
            tests = engine.sample(side.prompt, side.group.params)  # the call agree makes after sampling
        else:
            drawn = draw_stub(request, engine, params, beside=[side.group])
            [[tests]] = drawn.beside
        # the request written beside the samples is the one agree asks for, for the candidates drawn
        candidates = [candidate for candidate, _ in drawn.kept]
        name = entry_point(candidates)
        assert name == "running_max" and len(candidates) > 1
        assert side.key == tests_request(request.query, name, signature(candidates, name), engine.model)[2]
        runs[way] = (drawn.completions, tests, engine.usage.requests)
    apart, beside = runs["apart"][0], runs["beside"][0]
    # Rows decoded beside other rows may part by float noise, and a sampled token can then differ: neither the
    # samples nor agree's tests are byte-identical between the two ways (measured: 3 of 8 stubs identical; this
    # test saw them equal in one session and a sample part in the next). That is why the batching is off by
    # default until `benchmarks/agree_cost.py` decides it. What holds: as many samples, each with its
    # log-probabilities, and agree's tests written for the same request (asserted above) in both ways.
    assert len(beside) == len(apart) == params.n
    assert all(c.logprobs for c in (*beside, *apart))
    assert runs["beside"][1] and runs["apart"][1]
    assert all("running_max" in c.text for c in (*runs["beside"][1], *runs["apart"][1]))
    assert runs["apart"][2] == runs["beside"][2] == 2


def test_the_batching_is_off_unless_asked_for(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Off by default until an idle-machine run shows it faster (the module docstring of assistant.core.agreement).
    monkeypatch.delenv("ASSIST_AGREE_BATCH", raising=False)
    _, scripted = _fill(repo)
    assert scripted.outer == ["sample_batch", "sample"]
