"""The Backend base class (capabilities, the default `sample_batch`, identities), the registry, and the scripted
backend of conftest that the other tests use. No model is loaded here."""

from __future__ import annotations

import subprocess
import sys

import pytest

from assistant.backends import (
    BACKENDS,
    Backend,
    BackendIdentity,
    Completion,
    SamplingParams,
    Usage,
    describe_backends,
    load_backend,
)
from assistant.backends.local import LocalBackend
from assistant.backends.openai_api import OpenAIBackend
from assistant.backends.prompts import Prompt, build_prompt
from assistant.cache import cache_key
from assistant.errors import ModelError, UsageError

from .conftest import ScriptedBackend, register_scripted, scripted_logprob, scripted_tokens

ONE = build_prompt("return the sum of two numbers")
TWO = build_prompt("return the product of two numbers")
THREE = build_prompt("reverse a string")


class Echo(Backend):
    """The least a backend implements: `sample` (each call is recorded)."""

    name = "echo"

    def __init__(self) -> None:
        self.model = "echo-1"
        self.usage = Usage()
        self.calls: list[tuple[Prompt, SamplingParams]] = []

    def count_tokens(self, prompt: Prompt) -> int:
        return 1

    def sample(self, prompt, params, step=None):
        self.calls.append((prompt, params))
        for done in range(params.n):
            if step is not None:
                step(done, params.n)
        return [
            Completion(f"{prompt.messages[-1]['content'][:12]} #{i} seed {params.seed}", 1, "stop")
            for i in range(params.n)
        ]


# -- the base class ------------------------------------------------------------------------------------------


def test_the_default_sample_batch_samples_each_prompt_in_turn_with_its_own_seed() -> None:
    backend = Echo()
    params = SamplingParams(n=2, seed=5)
    together = backend.sample_batch([ONE, TWO], params)
    assert [[c.text for c in group] for group in together] == [
        [c.text for c in backend.sample(ONE, params)],
        [c.text for c in backend.sample(TWO, params)],
    ]
    backend.calls.clear()
    seeded = backend.sample_batch([ONE, TWO], params, seeds=[7, None])
    assert [call[1].seed for call in backend.calls] == [7, None]
    assert [call[0] for call in backend.calls] == [ONE, TWO]
    assert all(call[1].n == 2 and call[1].temperature == params.temperature for call in backend.calls)
    assert seeded[0][1].text.endswith("#1 seed 7")
    assert backend.sample_batch([], params) == []
    with pytest.raises(ValueError, match="one seed per prompt"):
        backend.sample_batch([ONE, TWO], params, seeds=[1])


@pytest.mark.parametrize("engine", ["ov", "warm"])
def test_the_engines_that_decode_prompts_together_refuse_seeds_that_are_not_one_per_prompt(engine: str) -> None:
    # Their own sample_batch (and the warm client's sample_groups) refuse before any model or server is asked,
    # so an engine with nothing loaded isolates the check.
    from assistant.backends import SampleGroup
    from assistant.backends.ov import OpenVINOBackend
    from assistant.backends.warm import WarmBackend

    backend = object.__new__(OpenVINOBackend if engine == "ov" else WarmBackend)
    with pytest.raises(ValueError, match="one seed per prompt"):
        backend.sample_batch([ONE, TWO], SamplingParams(), seeds=[1])
    if engine == "warm":
        with pytest.raises(ValueError, match="one seed per prompt"):
            backend.sample_groups([SampleGroup((ONE, TWO), SamplingParams(), (1,))])


def test_the_default_sample_batch_reports_progress_over_the_whole_call_and_stops_when_a_step_raises() -> None:
    backend = Echo()
    seen: list[tuple[int, int]] = []
    backend.sample_batch([ONE, TWO, THREE], SamplingParams(n=2), step=lambda done, total: seen.append((done, total)))
    assert seen == [(0, 6), (1, 6), (2, 6), (3, 6), (4, 6), (5, 6)]

    class Cancelled(Exception):
        pass

    def cancel(done: int, total: int) -> None:
        if done == 2:
            raise Cancelled

    backend.calls.clear()
    with pytest.raises(Cancelled):
        backend.sample_batch([ONE, TWO, THREE], SamplingParams(n=2), step=cancel)
    assert [call[0] for call in backend.calls] == [ONE, TWO]  # stopped inside the second prompt


def test_the_base_class_declares_no_capability_and_refuses_to_score() -> None:
    backend = Echo()
    assert (backend.batches_prompts, backend.logprobs, backend.can_score, backend.prefills_answer) == (
        False,
        False,
        False,
        False,
    )
    with pytest.raises(ModelError, match="the echo backend cannot score given text: this backend does not score"):
        backend.logprob([(ONE, "x")])
    assert backend.identity == BackendIdentity("echo", "echo-1", kind="echo", label="echo:echo-1")


# -- the real backends' capabilities and identities (built without a model or a server) -----------------------


def local(precision: str = "fp32", model: str = "qwen2.5-coder-0.5b", **attributes) -> LocalBackend:
    """A LocalBackend with only the attributes identities read: no model is loaded."""
    backend = object.__new__(LocalBackend)
    backend.model, backend.precision = model, precision
    backend.__dict__.update(attributes)
    return backend


def openai(api: str = "chat", logprobs: bool = True, **options) -> OpenAIBackend:
    return OpenAIBackend(None, "qwen-coder", base_url="http://127.0.0.1:1/v1", api=api, logprobs=logprobs, **options)


def test_the_local_backend_batches_prompts_scores_and_prefills() -> None:
    assert issubclass(LocalBackend, Backend)
    assert LocalBackend.batches_prompts and LocalBackend.logprobs and LocalBackend.can_score
    assert LocalBackend.prefills_answer and LocalBackend.scoring_unavailable == ""
    assert LocalBackend.sample_batch is not Backend.sample_batch  # its own, batched


def test_the_openai_backend_capabilities_follow_its_endpoint_and_settings() -> None:
    chat = openai("chat")
    assert isinstance(chat, Backend) and not chat.batches_prompts
    assert OpenAIBackend.sample_batch is Backend.sample_batch  # one prompt after another
    assert chat.logprobs and not chat.can_score and not chat.prefills_answer
    assert "chat endpoints cannot score given text" in chat.scoring_unavailable
    assert not openai("chat", logprobs=False).logprobs  # nothing reports them: the logprob ranker cannot work
    completions = openai("completions", logprobs=False)
    assert completions.can_score and completions.prefills_answer and completions.scoring_unavailable == ""
    assert completions.logprobs and not completions.sample_logprobs  # it scores, though samples do not carry them


def test_identities_name_the_model_and_what_changes_its_outputs_and_nothing_else() -> None:
    fp32 = local()
    assert fp32.identity == local(threads=1, context=2048).identity  # equal and hashable: a cache key part
    assert len({fp32.identity, local().identity}) == 1
    assert fp32.identity.manifest() == {"backend": "local", "model": "qwen2.5-coder-0.5b", "precision": "fp32"}
    bf16 = local("bf16")
    assert bf16.identity != fp32.identity
    # The strings caches already hold, so committed caches stay valid: `eval codegen` keys samples by `kind`, LAIL
    # its labels by `label` (the plain model name in fp32).
    assert (fp32.identity.kind, fp32.identity.label) == ("local", "qwen2.5-coder-0.5b")
    assert (bf16.identity.kind, bf16.identity.label) == ("local", "qwen2.5-coder-0.5b@bf16")
    assert str(bf16.identity) == "qwen2.5-coder-0.5b@bf16"
    assert cache_key(backend=fp32.identity.kind, model=fp32.model) == cache_key(backend="local", model=fp32.model)

    chat = openai("chat")
    assert chat.identity == openai("chat", concurrency=1, timeout=5, context=4096).identity
    assert (chat.identity.kind, chat.identity.label) == ("openai-chat", "openai:qwen-coder")
    assert openai("completions").identity.kind == "openai-completions"
    assert openai("completions").identity != chat.identity
    assert chat.identity.manifest() == {"backend": "openai", "model": "qwen-coder"}


# -- the registry -------------------------------------------------------------------------------------------


def test_every_registered_backend_is_described_in_one_line_without_loading_a_model() -> None:
    code = (
        "import sys; from assistant.backends import describe_backends; d = describe_backends(); "
        "assert 'torch' not in sys.modules and 'transformers' not in sys.modules, 'a model library was imported'; "
        "print(d)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    described = describe_backends()
    assert list(described) == list(BACKENDS)
    assert all(line and "\n" not in line for line in described.values())
    assert "CPU" in described["local"] and "OpenAI-compatible" in described["openai"]


def test_a_backend_whose_module_is_missing_is_listed_as_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(BACKENDS, "gone", "assistant.backends.no_such_module:Gone")
    assert describe_backends()["gone"].startswith("unavailable: No module named")
    assert list(describe_backends())[:2] == ["local", "openai"]


def test_unknown_backends_are_a_one_line_error() -> None:
    with pytest.raises(UsageError, match=r"^unknown backend 'magic'; available: local, openai$"):
        load_backend("magic")


# -- the scripted backend (tests/conftest.py) -----------------------------------------------------------------


def test_the_scripted_backend_is_registered_like_any_backend(scripted_backend: ScriptedBackend) -> None:
    assert isinstance(scripted_backend, Backend)
    assert load_backend("scripted") is scripted_backend
    assert load_backend("scripted", "tiny", progress=None, temperature=0.1) is scripted_backend
    assert scripted_backend.loads == [{"model": None}, {"model": "tiny", "temperature": 0.1}]
    assert scripted_backend.model == "tiny"
    assert describe_backends()["scripted"] == "scripted replies for tests, no model"
    assert scripted_backend.identity == BackendIdentity("scripted", "tiny", kind="scripted", label="scripted:tiny")


def test_scripted_replies_come_in_order_per_prompt_or_from_a_function(scripted_backend: ScriptedBackend) -> None:
    scripted_backend.script(["a = 1", ("b = 2", -0.25)])
    first = scripted_backend.sample(ONE, SamplingParams(n=3))
    assert [c.text for c in first] == ["a = 1", "b = 2", "a = 1"]
    assert [c.text for c in scripted_backend.sample(TWO, SamplingParams(n=1))] == ["b = 2"]  # the order goes on
    assert scripted_backend.calls == 4 and scripted_backend.prompts == [ONE, TWO]

    per_prompt = ScriptedBackend({"sum": ["x + y", "y + x"], "product": ["x * y"]})
    assert [c.text for c in per_prompt.sample(TWO, SamplingParams(n=2))] == ["x * y", "x * y"]
    assert [c.text for c in per_prompt.sample(ONE, SamplingParams(n=1))] == ["x + y"]
    with pytest.raises(AssertionError, match="no scripted reply"):
        per_prompt.sample(THREE, SamplingParams(n=1))

    computed = ScriptedBackend(lambda prompt, number: f"# {number}: {prompt.messages[-1]['content'][-7:]}")
    assert [c.text for c in computed.sample(ONE, SamplingParams(n=2))] == ["# 0: numbers", "# 1: numbers"]


def test_scripted_tokens_and_logprobs_are_deterministic() -> None:
    backend = ScriptedBackend(["def f(x):\n    return x", ("return 1", -0.5)])
    plain, meant = backend.sample(ONE, SamplingParams(n=2))
    assert scripted_tokens("def f(x):") == ["def ", "f(x)", ":"]
    assert plain.tokens == 6 and plain.logprobs == tuple(scripted_logprob(t) for t in scripted_tokens(plain.text))
    assert all(-1 <= v <= -0.001 for v in plain.logprobs)
    assert meant.tokens == 2 and meant.logprobs == (-0.5, -0.5) and meant.finish_reason == "stop"
    # Scoring agrees with sampling, for scripted means and for other texts alike.
    scored_plain, scored_meant = backend.logprob([(ONE, plain.text), (ONE, meant.text)])
    assert tuple(scored_plain.logprobs) == plain.logprobs and scored_plain.tokens == scripted_tokens(plain.text)
    assert scored_meant.mean == -0.5
    assert backend.scored == [(ONE, plain.text), (ONE, meant.text)]
    assert backend.count_tokens(ONE) == sum(len(m["content"]) for m in ONE.messages) // 4
    assert backend.usage.requests == 1 and backend.usage.completion_tokens == 8

    fixed = ScriptedBackend([("code", -0.3)], tokens=5)  # test_tui's old double: 5 tokens a sample
    assert fixed.sample(ONE, SamplingParams(n=1))[0].logprobs == (-0.3,) * 5


def test_scripted_samples_are_cut_like_real_ones_and_capabilities_can_be_turned_off() -> None:
    backend = ScriptedBackend(["x = 1\n```\nprose after the fence", "y" * 40])
    fenced, long = backend.sample(ONE, SamplingParams(n=2, max_new_tokens=3))
    assert (fenced.text, fenced.finish_reason) == ("x = 1\n", "stop")
    assert (long.text, long.tokens, long.finish_reason) == ("y" * 12, 3, "length")

    silent = ScriptedBackend(["a"], scores=False, sample_logprobs=False)
    assert not (silent.can_score or silent.logprobs or silent.prefills_answer)
    assert silent.sample(ONE, SamplingParams(n=1))[0].logprobs is None
    with pytest.raises(ModelError, match="cannot score given text: it is a script"):
        silent.logprob([(ONE, "a")])
    assert ScriptedBackend(["a"], scores=False).logprobs  # its samples still carry them
    assert ScriptedBackend(["a"], prefills_answer=True).prefills_answer

    tight = ScriptedBackend(["a"], context=10)
    with pytest.raises(UsageError, match="context of 10"):
        tight.sample(ONE, SamplingParams(n=1, max_new_tokens=8))


def test_scripted_sampling_steps_delays_fails_and_stops_when_a_step_raises() -> None:
    backend = ScriptedBackend(["a", "b"], steps=2)
    seen: list[tuple[int, int]] = []
    backend.sample(ONE, SamplingParams(n=2), step=lambda done, total: seen.append((done, total)))
    assert seen == [(0, 4), (1, 4), (2, 4), (3, 4)]

    def cancel(done: int, total: int) -> None:
        if done == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        backend.sample(ONE, SamplingParams(n=2), step=cancel)
    assert backend.calls == 2  # the cancelled call drew nothing

    with pytest.raises(ModelError, match="went away"):
        ScriptedBackend(fail=ModelError("the model server went away")).sample(ONE, SamplingParams(n=1))


def test_scripted_batches_are_recorded_and_keep_each_prompts_seed(monkeypatch: pytest.MonkeyPatch) -> None:
    backend = register_scripted(monkeypatch, ScriptedBackend(["a"], batches_prompts=True))
    assert load_backend("scripted").batches_prompts
    groups = backend.sample_batch([ONE, TWO], SamplingParams(n=1, seed=0), seeds=[3, 4])
    assert [len(group) for group in groups] == [1, 1] and backend.batches == [2]
    assert [params.seed for params in backend.params] == [3, 4] and backend.prompts == [ONE, TWO]


def test_the_cli_runs_in_process_with_the_scripted_backend(
    scripted_backend: ScriptedBackend, scratch_repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    import json

    from typer.testing import CliRunner

    from assistant.ui.cli import app

    scripted_backend.script([("def square_all(values):\n    return [v * v for v in values]", -0.1)])
    monkeypatch.chdir(scratch_repo)
    requirement = "return the squares of the numbers in a list"
    result = CliRunner().invoke(
        app, ["generate", requirement, "--backend", "scripted", "-k", "0", "-n", "2", "--json", "--model", "m"]
    )
    assert result.exit_code == 0, (result.output, result.exception)
    assert scripted_backend.loads and scripted_backend.loads[0]["model"] == "m"
    assert requirement in json.dumps([m["content"] for m in scripted_backend.prompts[0].messages])
    assert "v * v" in result.stdout
