"""Shared fixtures: a hermetic cache per test, one encoder and one generator loaded per session, scratch repos, and
a scripted backend (registered as `scripted`) for tests that exercise everything but the model."""

from __future__ import annotations

import atexit
import ctypes
import faulthandler
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import pytest

from assistant.backends import BACKENDS, Backend, Completion, SamplingParams, Step, TokenLogprobs, Usage
from assistant.backends.prompts import Prompt
from assistant.errors import UsageError

if TYPE_CHECKING:
    from assistant.pipeline import Pipeline

# The helper modules' asserts say what they compared when they fail, as a test's own do.
pytest.register_assert_rewrite("tests.helpers_engines", "tests.helpers_quadruple", "tests.helpers_tiny_lm")

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

# Converted models are shared with the user's cache (converting takes minutes); everything else is per test.
os.environ.setdefault(
    "ASSIST_MODELS_DIR", str(Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "assist" / "models")
)

# The model-backed tests test plumbing, so they run the 0.5B (about half the 1.5B's time; CI's model step has
# its minutes counted): the `backend` fixtures load it by name, and a `model` test's settings name it (see
# `model_tests_run_the_plumbing_model`). No test loads the default 1.5B: see `_models_view`.
PLUMBING_MODEL = "qwen2.5-coder-0.5b"
UNLOADED_MODEL = "qwen2.5-coder-1.5b"


def _models_view(shared: Path, excluded: str) -> Path:
    """A models folder for the session: a link to the user's folder of every model but `excluded`, whose place
    holds a plain file, so that converting or loading it fails at once (FileExistsError or NotADirectoryError
    naming its folder) instead of spending minutes and gigabytes where no test means to."""
    from assistant.backends.models import REGISTRY

    view = Path(tempfile.mkdtemp(prefix="assist-test-models-"))
    atexit.register(shutil.rmtree, view, True)
    for spec in REGISTRY.values():
        folder = f"{spec.name}-{spec.sha256[:12] or 'pkg'}"  # ModelSpec.cache_dir's name
        if spec.name == excluded:
            (view / folder).write_text(f"{excluded} is not for the tests (tests/conftest.py)\n")
        else:
            (shared / folder).mkdir(parents=True, exist_ok=True)
            (view / folder).symlink_to(shared / folder, target_is_directory=True)
    return view


os.environ["ASSIST_MODELS_DIR"] = str(_models_view(Path(os.environ["ASSIST_MODELS_DIR"]), UNLOADED_MODEL))


# A model-backed test that runs this long is stuck, not slow (all of them take 14-15 minutes on 2 cores): every
# thread's stack is printed and the run exits, so a hang inside an engine costs minutes and says where, rather
# than holding CI until its own limit. The timer is faulthandler's, which fires even while a C call holds the GIL.
MODEL_TEST_LIMIT_S = float(os.environ.get("ASSIST_MODEL_TEST_LIMIT_S", "1200"))
_STDERR_FD: int | None = None


def pytest_configure(config: pytest.Config) -> None:
    global _STDERR_FD
    _STDERR_FD = os.dup(2)  # the terminal's stderr, taken before a test's output capture replaces fd 2


@pytest.fixture(autouse=True)
def stuck_model_test_exits(request: pytest.FixtureRequest) -> Iterator[None]:
    """Arm the hang watchdog for the length of a `model` test (see MODEL_TEST_LIMIT_S)."""
    if request.node.get_closest_marker("model") is None or _STDERR_FD is None:
        yield
        return
    os.write(_STDERR_FD, b"")  # fails here, not at the timeout, if the descriptor is unusable
    faulthandler.dump_traceback_later(MODEL_TEST_LIMIT_S, exit=True, file=_STDERR_FD)
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()


@pytest.fixture(autouse=True)
def fixture_repos_count_as_walled(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the kernel has no Landlock, assist runs no repo's own code unasked (`core.home.unwalled`); the repos
    these tests build are ours, so in-process tests still exercise the flows that run them there. The gate
    itself is tested by patching the probe back (test_repo_tests)."""
    if landlock_abi() > 0:
        return
    from assistant.sandbox import boundary

    probed = boundary.probe
    monkeypatch.setattr(boundary, "probe", lambda: {**probed(), "landlock": (True, "assumed for the tests' own repos")})


def assist(*args: object, cwd: Path, env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`assist ARGS` run as a user runs it, in its own Python process, in `cwd`, with `env` added."""
    return subprocess.run(
        [sys.executable, "-m", "assistant", *(str(a) for a in args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=900,
    )


@pytest.fixture(autouse=True)
def hermetic_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Bank indexes and other cache files go to a temp dir, never the user's cache."""
    path = tmp_path_factory.mktemp("cache")
    monkeypatch.setenv("ASSIST_CACHE_DIR", str(path))
    # No user config, and no settings leaking in from the developer's environment.
    monkeypatch.setenv("ASSIST_CONFIG_DIR", str(tmp_path_factory.mktemp("config")))
    for name in list(os.environ):
        if name.startswith(("OPENAI_", "ASSIST_")) and name not in (
            "ASSIST_CACHE_DIR",
            "ASSIST_CONFIG_DIR",
            "ASSIST_MODELS_DIR",
        ):
            monkeypatch.delenv(name)
    # No test starts a warm model server by the default (`start`): one would outlive the test by 15 minutes.
    monkeypatch.setenv("ASSIST_LOCAL_WARM", "off")
    return path


@pytest.fixture(scope="session")
def encoder():
    from assistant.backends.encoder import Encoder

    return Encoder.load()


@pytest.fixture(autouse=True)
def model_tests_run_the_plumbing_model(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, hermetic_cache: Path
) -> None:
    """A test that runs a real generator (a `model` test, or one given the `backend` fixture) runs PLUMBING_MODEL
    wherever it would run the default: in its own process (the default, and the settings' model, which a --model
    flag still overrides) and in the `assist` commands it starts (the environment)."""
    if request.node.get_closest_marker("model") is None and "backend" not in request.fixturenames:
        return
    from assistant.backends import models

    monkeypatch.setattr(models, "DEFAULT_GENERATOR", PLUMBING_MODEL)
    monkeypatch.setenv("ASSIST_MODEL", PLUMBING_MODEL)


@pytest.fixture(scope="session")
def backend():
    """The local generator the model-backed tests run (PLUMBING_MODEL, Qwen2.5-Coder-0.5B-Instruct), loaded once
    for the whole run."""
    from assistant.backends.local import LocalBackend

    return LocalBackend.load(PLUMBING_MODEL)


@pytest.fixture(scope="module")
def fp32():
    """The transformers backend on PLUMBING_MODEL at fp32: the reference a local int8 engine's output is held to
    (tests/helpers_engines.py), loaded once per test file."""
    from assistant.backends.local import LocalBackend

    return LocalBackend.load(PLUMBING_MODEL, precision="fp32")


def git(cwd: Path, *args: str) -> str:
    result = subprocess.run(
        ["git", "-c", "user.email=test@example.com", "-c", "user.name=test", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
    )
    return result.stdout


# A bank of one example, for a command that must be given a bank but is not testing its examples (k=0).
ONE_EXAMPLE_BANK = json.dumps({"requirement": "one", "code": "def one():\n    return 1\n"}) + "\n"


def write_files(root: Path, files: Mapping[str, str]) -> Path:
    """`root` holding `files` (path under root: text, written as UTF-8), with the folders they need."""
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    return root


def commit_repo(root: Path, files: Mapping[str, str]) -> Path:
    """A git work tree at `root` holding `files` (see `write_files`), all in one commit."""
    write_files(root, files)
    git(root, "init", "-q")
    git(root, "add", ".")
    git(root, "commit", "-qm", "init")
    return root


def enter_repo(monkeypatch: pytest.MonkeyPatch, root: Path, files: Mapping[str, str]) -> Path:
    """`commit_repo(root, files)` made the current folder for the test, its tests run by this interpreter (no
    VIRTUAL_ENV to pick another)."""
    commit_repo(root, files)
    monkeypatch.chdir(root)
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)
    return root


def pipeline_for(root: Path, backend: Backend, **options: Any) -> Pipeline:
    """A Pipeline over `root`'s settings sampling from `backend`, with no examples (k=0) and the `first` ranker
    unless `options` (the rest of its GenerationOptions) say otherwise."""
    from assistant.config import load_settings
    from assistant.pipeline import GenerationOptions, Pipeline

    settings = load_settings(start=root)
    return Pipeline(GenerationOptions(**({"k": 0, "ranker": "first"} | options)), settings, start=root, backend=backend)


SCRATCH_FILES = {
    "mathutils.py": '''def is_even(n):
    """Return True when n is even."""
    return n % 2 == 0


def cube_all(values):
    """Return the cubes of the numbers in a list."""
    return [v ** 3 for v in values]
''',
    "text/words.py": '''def word_count(text: str) -> int:
    """Count the words in a string."""
    return len(text.split())
''',
    "README.md": "# scratch\n",
}


@pytest.fixture
def earned_auto(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every trained method as if it had earned its place in `auto` (beaten its plain counterpart where measured).
    The shipped registry has none there; the tests of what `auto` does with a trained artifact once a method has
    (only the model it was trained for, a server that is down) open the gate with this fixture."""
    import dataclasses

    from assistant.methods import TRAINED_METHODS

    for name, entry in list(TRAINED_METHODS.items()):
        monkeypatch.setitem(TRAINED_METHODS, name, dataclasses.replace(entry, in_auto=True))


@pytest.fixture
def scratch_repo(tmp_path: Path) -> Iterator[Path]:
    """A git repo with three documented functions in two Python files, all committed."""
    yield commit_repo(tmp_path / "repo", SCRATCH_FILES)


def landlock_abi() -> int:
    """The kernel's Landlock ABI (0: none), probed here independently of the code under test."""
    if not sys.platform.startswith("linux"):
        return 0
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return max(0, libc.syscall(ctypes.c_long(444), None, ctypes.c_long(0), ctypes.c_long(1)))


# -- a scripted backend ------------------------------------------------------------------------------------

# A scripted reply: the text (after the answer prefix), or (text, the log-probability of each of its tokens).
Reply = str | tuple[str, float]
Script = Sequence[Reply] | Mapping[str, Sequence[Reply]] | Callable[[Prompt, int], Reply]

TOKEN_CHARS = 4  # the scripted tokenizer: every 4 characters are a token


def scripted_tokens(text: str) -> list[str]:
    """The scripted backend's tokens of a text: 4-character pieces (the last may be shorter)."""
    return [text[i : i + TOKEN_CHARS] for i in range(0, len(text), TOKEN_CHARS)]


def scripted_logprob(token: str) -> float:
    """The scripted backend's log-probability of a token it has no scripted value for: in [-1, -0.001], fixed
    by the token's text (crc32, the same in every process)."""
    return -((zlib.crc32(token.encode()) % 1000) + 1) / 1000


class ScriptedBackend(Backend):
    """A backend for tests: scripted replies, a deterministic tokenizer and log-probabilities, no model.

    `replies` is a list of replies given out in order, cycling (sample j of all this backend has drawn takes
    reply j % len); or a mapping {text: replies} that picks the first key found in the prompt (its messages and
    answer prefix), each key cycling through its own replies; or a function (prompt, sample number) -> reply. A
    reply is a text or (text, mean log-prob): with a mean, each of its tokens gets that value, in samples and
    when `logprob()` scores that text; other texts get :func:`scripted_logprob` of each token.

    Tokens are 4-character pieces (:func:`scripted_tokens`); `tokens=N` makes every sample count N tokens
    instead (with N log-probabilities). `count_tokens` is the prompt's message characters // 4. A sample is cut
    at the prompt's stop strings like a real backend's (finish "stop"), and at `max_new_tokens` ("length",
    unless `tokens` is set). Every call returns `params.n` samples, greedy or not.

    Each sample makes `steps` step(done, total) calls (done = sample * steps + k, total = n * steps), sleeping
    `delay` seconds after each: a step that raises stops sampling there, as a user's cancel does. `fail` is
    raised by every `sample` call. `context`: refuse prompts that do not fit, as a real backend does. Capabilities
    are settings: `scores` (can_score), `sample_logprobs`, `prefills_answer` (off by default, as for a chat endpoint:
    on, callers put the start of the answer in its mouth and the scripted text must continue it), `batches_prompts`.

    It records what it saw: `prompts` and `params` (one per prompt sampled), `scored` (the (prompt, text) pairs
    given to `logprob`), `batches` (the size of each `sample_batch` call), `loads` (the model and options of each
    `load`), `calls` (samples drawn).
    """

    name = "scripted"
    description = "scripted replies for tests, no model"
    # The instance `load` returns while a test has it registered (see `register_scripted`).
    active: ClassVar[ScriptedBackend | None] = None

    def __init__(
        self,
        replies: Script = ("def solution():\n    return 42",),
        *,
        delay: float = 0.0,
        fail: BaseException | None = None,
        tokens: int | None = None,
        steps: int = 10,
        scores: bool = True,
        sample_logprobs: bool = True,
        prefills_answer: bool = False,
        batches_prompts: bool = False,
        context: int | None = None,
        model: str = "scripted",
    ) -> None:
        self.replies = replies
        self.delay = delay
        self.fail = fail
        self.tokens = tokens
        self.steps = steps
        self.sample_logprobs = sample_logprobs
        self.can_score = scores
        self.scoring_unavailable = "" if scores else "it is a script"
        self.logprobs = sample_logprobs or scores
        self.prefills_answer = prefills_answer
        self.batches_prompts = batches_prompts
        self.context = context
        self.model = model
        self.usage = Usage()
        self.calls = 0
        self.drawn: dict[str, int] = {}  # per-key counters of a mapping script
        self.prompts: list[Prompt] = []
        self.params: list[SamplingParams] = []
        self.scored: list[tuple[Prompt, str]] = []
        self.batches: list[int] = []
        self.loads: list[dict[str, Any]] = []

    @classmethod
    def load(cls, model: str | None = None, progress: Any = None, **options: Any) -> ScriptedBackend:
        """The registered instance (a fresh default one when none is), told the model it was asked for."""
        backend = cls.active if cls.active is not None else cls()
        backend.loads.append({"model": model, **options})
        if model is not None:
            backend.model = model
        return backend

    def script(self, replies: Script) -> ScriptedBackend:
        """Give new replies, from the start."""
        self.replies, self.calls, self.drawn = replies, 0, {}
        return self

    # -- the tokenizer ------------------------------------------------------------------------------------

    def count_tokens(self, prompt: Prompt) -> int:
        return sum(len(m["content"]) for m in prompt.messages) // TOKEN_CHARS

    def _values(self, text: str, mean: float | None, count: int | None = None) -> tuple[float, ...]:
        pieces = scripted_tokens(text)
        if mean is None:
            values = [scripted_logprob(piece) for piece in pieces]
            if count is None:
                return tuple(values)
            mean = sum(values) / len(values) if values else 0.0
        return (mean,) * (len(pieces) if count is None else count)

    def _scripted_mean(self, text: str) -> float | None:
        """The mean a reply with this text was scripted with, if any."""
        replies = self.replies
        if callable(replies):
            return None
        pools = replies.values() if isinstance(replies, Mapping) else [replies]
        for pool in pools:
            for reply in pool:
                if isinstance(reply, tuple) and reply[0] == text:
                    return reply[1]
        return None

    # -- sampling -----------------------------------------------------------------------------------------

    def _reply(self, prompt: Prompt, number: int) -> Reply:
        replies = self.replies
        if callable(replies):
            return replies(prompt, number)
        if isinstance(replies, str):
            return replies
        if isinstance(replies, Mapping):
            text = "\n".join(str(m["content"]) for m in prompt.messages) + prompt.answer_prefix
            key = next((key for key in replies if key in text), None)
            if key is None:
                raise AssertionError(f"no scripted reply for this prompt (keys {list(replies)}): {text[-300:]!r}")
            drawn = self.drawn.get(key, 0)
            self.drawn[key] = drawn + 1
            return replies[key][drawn % len(replies[key])]
        return replies[number % len(replies)]

    def sample(self, prompt: Prompt, params: SamplingParams, step: Step | None = None) -> list[Completion]:
        if self.fail is not None:
            raise self.fail
        started = time.perf_counter()
        self.prompts.append(prompt)
        self.params.append(params)
        used = self.count_tokens(prompt)
        if self.context is not None and used + params.max_new_tokens > self.context:
            raise UsageError(
                f"the prompt takes {used} tokens and {params.max_new_tokens} more are asked for, but the limit is a "
                f"context of {self.context} (the scripted backend's)"
            )
        completions = []
        for i in range(params.n):
            for k in range(self.steps):
                if step is not None:
                    step(i * self.steps + k, params.n * self.steps)  # raises when the caller cancels
                if self.delay:
                    time.sleep(self.delay)
            reply = self._reply(prompt, self.calls + i)
            text, mean = (reply, None) if isinstance(reply, str) else reply
            completions.append(self._completion(prompt, text, mean, params.max_new_tokens))
        self.calls += params.n
        self.usage.add(used, sum(c.tokens for c in completions), time.perf_counter() - started)
        return completions

    def _completion(self, prompt: Prompt, text: str, mean: float | None, max_new_tokens: int) -> Completion:
        cut = min((text.find(stop) for stop in prompt.stop if stop in text), default=-1)
        finish = "stop"
        if cut >= 0:
            text = text[:cut]
        elif self.tokens is None and len(scripted_tokens(text)) > max_new_tokens:
            text, finish = "".join(scripted_tokens(text)[:max_new_tokens]), "length"
        values = self._values(text, mean, self.tokens)
        logprobs = values if self.sample_logprobs else None
        return Completion(text=text, tokens=len(values), finish_reason=finish, logprobs=logprobs)

    def sample_batch(
        self,
        prompts: Sequence[Prompt],
        params: SamplingParams,
        step: Step | None = None,
        seeds: Sequence[int | None] | None = None,
    ) -> list[list[Completion]]:
        self.batches.append(len(prompts))
        return super().sample_batch(prompts, params, step, seeds)

    def logprob(self, pairs: Sequence[tuple[Prompt, str]]) -> list[TokenLogprobs]:
        if not self.can_score:
            return super().logprob(pairs)
        self.scored.extend(pairs)
        return [
            TokenLogprobs(tokens=scripted_tokens(text), logprobs=list(self._values(text, self._scripted_mean(text))))
            for _, text in pairs
        ]


def register_scripted(monkeypatch: pytest.MonkeyPatch, backend: ScriptedBackend | None = None) -> ScriptedBackend:
    """Register `backend` (default: a fresh ScriptedBackend) as the backend named "scripted" for this test:
    `load_backend("scripted")` and `assist ... --backend scripted` (in-process, with CliRunner) return it."""
    backend = backend if backend is not None else ScriptedBackend()
    monkeypatch.setitem(BACKENDS, "scripted", f"{__name__}:ScriptedBackend")
    monkeypatch.setattr(ScriptedBackend, "active", backend)
    return backend


@pytest.fixture
def scripted_backend(monkeypatch: pytest.MonkeyPatch) -> ScriptedBackend:
    """A ScriptedBackend registered as "scripted" (see `register_scripted`); give it replies with `.script(...)`."""
    return register_scripted(monkeypatch)


def assist_here(*args, cwd, env=None):
    """`assist ARGS` run in this process (Typer's CliRunner), in `cwd`, with `env` added: the same result shape as
    :func:`assist` (returncode, stdout, stderr), without a second of interpreter and library start-up per call."""
    from typer.testing import CliRunner

    from assistant.ui.cli import app

    before = Path.cwd()
    os.chdir(cwd)
    try:
        result = CliRunner().invoke(app, [str(a) for a in args], env=env)
    finally:
        os.chdir(before)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return subprocess.CompletedProcess(args, result.exit_code, result.stdout, result.stderr)


def toy_project_functions() -> list:
    """Twelve documented one-line functions over three modules of a toy project (pkg/m0.py ... m2.py): an index
    for eval repo's LAIL tests."""
    from assistant.code.examples import Example

    words = ["parse", "render", "merge", "split", "count", "sort", "load", "save", "find", "clean", "join", "check"]
    return [
        Example(f"{w.title()} the items.", f'def {w}(items):\n    """{w.title()} the items."""\n    return items\n',
                w, f"pkg/m{i % 3}.py", 10 * i + 1, 10 * i + 3)
        for i, w in enumerate(words)
    ]  # fmt: skip
