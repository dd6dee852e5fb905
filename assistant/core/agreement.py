"""`agree`: rank candidates by how far they agree with each other on tests the model writes itself.

CodeT's dual agreement (Chen et al., 2022), for the user who has no tests for the function they just asked for:
the same backend writes assert statements for the requirement (a short prompt, sampled; the requirement's own
examples, doctest `>>>` lines and asserts, come first), every candidate runs on every test in the sandbox, one
run per (candidate, test), its main function bound to the name the tests call (asked in plain words, the model
names the function anew in each sample), and candidates that pass the same set of tests form a cluster. A
candidate's score is its cluster's size times the number of tests the cluster passes, scaled to 0-1 by
(candidates × tests): many candidates that agree on many tests are likelier right than one that passes a test
alone, since the model's own tests are often wrong.

A stub's candidates (`generate --file F --function NAME`) call the rest of their module, so they run in it: each
candidate's whole file goes into a sandboxed copy of the project (the problem's `home`), and the tests run there
under pytest, each as its own test function with a time limit, with every global of the module in scope. A
method's candidates are not run (the tests call a function by name; a method needs an instance), nor are code
candidates that cannot run alone (each reads names it does not define, as code written for `--file F` calls the
rest of its file): no tests are asked for, every candidate scores 0 and the next ranker decides.

The test-writing call can ride along with the sampling (`assistant.pipeline.registry.plans_agree` decides
before sampling whether agree will ask for tests): on a CPU, decoding reads the weights once a step however many
rows it decodes, so its two rows cost little beside a stub's samples, where afterwards they cost a call of their
own. The stub's road
(:func:`assistant.core.stubs.fill_stub`) hands what it wrote to the ranker through :func:`prefetched_tests`; the
request, its seed and its reading are the call's. The rows are not always byte for byte the call's: decoded beside
other rows, a row's arithmetic rounds differently, and now and then a sampled token flips (the 0.5B on 8 stubs,
`generate --function -n 5 --seed 0`: tests identical in 6, every sample's text in 6, the ranking in 7).
It is **off by default**: on an idle machine (`benchmarks/speed_report.py`'s agree part, the 1.5B, warm, 20 stubs,
2026-12-05) a request with it was −1.1 s [−3.0, +0.9] faster paired by stub (mean, 95% bootstrap), no difference
shown, and its output differed in 10 of 20 stubs. `ASSIST_AGREE_BATCH=on` in the environment turns it on; off, the
call is made after sampling.
"""

from __future__ import annotations

import ast
import builtins
import os
import re
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from assistant.backends import Backend, Completion, SamplingParams, Step
from assistant.backends.prompts import Prompt, build_tests_prompt
from assistant.cache import JsonlCache, LayeredCache, cache_key
from assistant.code.asserts import doctest_assert
from assistant.code.fences import code_span
from assistant.code.names import bound_names
from assistant.code.parse import parse_module, parse_python
from assistant.core.candidates import Candidate
from assistant.core.module_runs import (  # noqa: F401 (agree's module runs, named here as before)
    MODULE_TEST_FILE,
    MODULE_WORKERS,
    TEST_SECONDS,
    module_test_file,
    passed_in_module,
)
from assistant.core.rank import Problem, Score
from assistant.errors import UsageError

TESTS_WANTED = 8  # tests the candidates run at most (the requirement's examples first)
TEST_SAMPLES = 2  # samples of the test-writing prompt
# The test-writing call decodes until its longer sample ends, so this bounds most of agree's time. The model pads its
# asserts with messages and writes on past the tests agree uses: replayed from cached completions
# (`benchmarks/agree_tokens.py`, results/agree-tokens), 128 ranked as 320 did (0.5B), and 96 as 128 did on HumanEval
# (164) and MBPP (200) with both the 1.5B and the 0.5B, in 0.76-0.79 of the test call's decode steps; 64 fell
# 1.2 points on the 0.5B's HumanEval (plan-1.5b.md).
TEST_TOKENS = 96
BATCH_ENV = "ASSIST_AGREE_BATCH"  # "on": the test-writing call is decoded beside the sampling (default off)


def _own_names(function: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> set[str]:
    """The names a function binds for itself (its parameters and what it assigns): reading one is not a call."""
    arguments = function.args
    every = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs, arguments.vararg, arguments.kwarg]
    names = {a.arg for a in every if a is not None}
    names.update(n.id for n in ast.walk(function) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load))
    return names


def _takes(arguments: ast.arguments) -> bool:
    """Whether a signature takes any argument."""
    every = (arguments.posonlyargs, arguments.args, arguments.kwonlyargs, arguments.vararg, arguments.kwarg)
    return any(every)


def _driver(function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """A function written to run or test the answer, not to be it: one with no parameters (`main()`), or a
    `test...` one."""
    return not _takes(function.args) or function.name.startswith("test")


def _named_lambda(node: ast.stmt) -> tuple[str, ast.Lambda] | None:
    """The name and the lambda of a top-level `name = lambda ...: ...` (a function by another spelling, as some
    answers to "write a function" are), else None."""
    if isinstance(node, ast.Assign) and isinstance(node.value, ast.Lambda) and len(node.targets) == 1:
        target = node.targets[0]
        return (target.id, node.value) if isinstance(target, ast.Name) else None
    return None


def main_function(code: str) -> str | None:
    """The function `code` was written to be: a top-level function (or `name = lambda ...`) that no other
    top-level function or class of it calls (a helper may come before or after the function that uses it),
    preferring one that is not a driver (no parameters, as `main()`, or a `test...` one; its calls do not count);
    else its first function. None when it defines none or does not parse."""
    try:
        tree = parse_module(code)
    except (SyntaxError, ValueError, RecursionError):
        return None
    functions: list[tuple[str, bool]] = []  # (name, whether it is a driver), in the module's order
    called: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            functions.append((node.name, _driver(node)))
            if _driver(node):
                continue  # `main()` calling the answer does not make the answer a helper
            own = _own_names(node) | {node.name}  # recursion is not a call from another function
        elif (named := _named_lambda(node)) is not None:
            name, lambda_ = named
            functions.append((name, not _takes(lambda_.args)))
            if not _takes(lambda_.args):
                continue  # a driver, as above
            own = _own_names(lambda_) | {name}
        elif isinstance(node, ast.ClassDef):
            own = set()
        else:
            continue  # top-level code that calls a function runs the answer; it does not make it a helper
        loads = (n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load))
        called.update(name for name in loads if name not in own)
    roots = [f for f in functions if f[0] not in called]
    chosen = [f for f in roots if not f[1]] or roots or functions
    return chosen[0][0] if chosen else None


def entry_point(candidates: Sequence[Candidate]) -> str | None:
    """The name of the function the candidates define (the main function, :func:`main_function`, most of them
    share; the first sampled's among equals)."""
    names: Counter[str] = Counter(name for c in candidates if (name := main_function(c.code)) is not None)
    return names.most_common(1)[0][0] if names else None


def _may_bind(tree: ast.Module, name: str) -> bool:
    """Whether the module's top level binds `name`, or may: a def, a class, an import (a star import may), or an
    assignment, also inside a top-level `if`, `try`, `for` or `with` (function and class bodies aside)."""
    pending: list[ast.AST] = list(tree.body)
    while pending:
        node = pending.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            if node.name == name:
                return True
            continue  # its body binds its own names
        if isinstance(node, ast.Import | ast.ImportFrom):
            if any(alias.name == "*" or (alias.asname or alias.name).split(".")[0] == name for alias in node.names):
                return True
        elif isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load) and node.id == name:
            return True
        pending.extend(ast.iter_child_nodes(node))
    return False


def under_name(code: str, name: str) -> str:
    """`code` with `name` bound to its main function when it does not bind `name` itself. Asked in plain words,
    the model names the function anew in each sample (`is_greater`, `greater_than_all`...), and the tests are
    written for one of those names: without this every other candidate would fail them all, and the ranking
    would go by name, not by behaviour. Nothing is bound where the code reads `name` as a global (it means
    something else there, and binding it could make the function call itself)."""
    try:
        tree = parse_module(code)
    except (SyntaxError, ValueError, RecursionError):
        return code
    main = main_function(code)
    if main is None or main == name or _may_bind(tree, name) or _reads_global(tree, name):
        return code
    return f"{code.rstrip()}\n\n{name} = {main}  # the name the tests call\n"


def _reads_global(tree: ast.Module, name: str) -> bool:
    """Whether the module reads `name` as a global: in its top-level code, or in a function that does not bind
    it for itself (a local of the same name, common as `max_length` in `max_length_lists`, is no such read)."""
    pending: list[ast.AST] = list(tree.body)
    while pending:
        node = pending.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            continue  # read below, each function with its own names
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id == name:
            return True
        pending.extend(ast.iter_child_nodes(node))
    functions = (f for f in ast.walk(tree) if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef))
    for function in functions:
        reads = any(
            isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id == name for n in ast.walk(function)
        )
        if reads and name not in _own_names(function):
            return True
    return False


def signature(candidates: Sequence[Candidate], name: str) -> str:
    """The `def` line of `name` as the first candidate that defines it writes it (body left out)."""
    for candidate in candidates:
        try:
            tree = parse_module(candidate.code)
        except (SyntaxError, ValueError):
            continue
        for node in tree.body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == name:
                lines = candidate.code.splitlines()
                return "\n".join(lines[node.lineno - 1 : node.body[0].lineno - 1]).rstrip() or f"def {name}(...):"
            named = _named_lambda(node)
            if named is not None and named[0] == name:
                return f"def {name}({ast.unparse(named[1].args)}):"
    return f"def {name}(...):"


def free_names(code: str) -> set[str]:
    """Names `code` reads that it never binds and Python does not provide: what it needs from elsewhere (the
    rest of its file). Scopes are not told apart, so a name bound anywhere counts as bound; unparsable code
    has none."""
    try:
        tree = parse_module(code)
    except (SyntaxError, ValueError, RecursionError):
        return set()
    read = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)}
    return read - bound_names([tree]) - set(dir(builtins)) - {"__name__", "__file__"}


def _mentions(source: str, name: str) -> bool:
    try:
        tree = parse_module(source)
    except (SyntaxError, ValueError):
        return False
    return any(isinstance(node, ast.Name) and node.id == name for node in ast.walk(tree))


def _assert_lines(text: str, name: str) -> list[str]:
    """Single-line assert statements of `text` that parse and call `name`."""
    found = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("assert ") and _mentions(line, name):
            found.append(line)
    return found


# What joins a call to its value in prose: "f([1, 2]) == 3", "f(2) -> 4", "f('a') returns 'b'".
_ARROW = re.compile(r"\s*(?:==|->|=>|→|returns|should return|gives|evaluates to)\s*")


def _literal(node: ast.AST) -> bool:
    try:
        ast.literal_eval(node)
        return True
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False


def _longest(text: str, accept: Any) -> str | None:
    """The longest prefix of `text` that parses as an expression `accept` takes, not one ending in a comma or a
    full stop (prose's, which would turn "3, so" into a tuple and "2." into a float)."""
    for end in range(len(text), 0, -1):
        piece = text[:end].rstrip()
        if not piece or piece.endswith((",", ".")):
            continue
        try:
            node = parse_python(piece, mode="eval").body
        except (SyntaxError, ValueError, RecursionError):
            continue
        if accept(node):
            return piece
    return None


def _inline_examples(text: str, name: str) -> list[str]:
    """Examples written in the prose ("e.g. f([3, 1]) == 3", "f(2) -> 4"), as asserts. The arguments and the
    value must be literals, so that a sentence never becomes a test."""

    def is_call(node: ast.AST) -> bool:
        return (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == name
            and all(_literal(arg) for arg in node.args)
            and all(keyword.arg and _literal(keyword.value) for keyword in node.keywords)
        )

    found = []
    for line in text.splitlines():
        if line.strip().startswith((">>>", "assert ")):
            continue  # doctest and assert lines are read as such
        for match in re.finditer(rf"(?<![\w.]){re.escape(name)}\(", line):
            call = _longest(line[match.start() :], is_call)
            if call is None:
                continue
            arrow = _ARROW.match(line[match.start() + len(call) :])
            if arrow is None:
                continue
            value = _longest(line[match.start() + len(call) + arrow.end() :], _literal)
            if value is not None:
                found.append(f"assert {call} == {value}")
    return found


def example_tests(requirement: str, name: str) -> list[str]:
    """The requirement's own examples as asserts: its `assert` lines, `>>> call` lines with the expected value
    on the next line (doctest style), and examples in its prose ("e.g. f([3, 1]) == 3"), when they call `name`."""
    tests = _assert_lines(requirement, name)
    tests += _inline_examples(requirement, name)
    lines = requirement.splitlines()
    for number, line in enumerate(lines[:-1]):
        stripped = line.strip()
        expected = lines[number + 1].strip()
        if not stripped.startswith(">>> ") or not expected or expected.startswith(">>>"):
            continue
        test = doctest_assert(stripped[4:], expected)
        if test is not None and _mentions(test, name):
            tests.append(test)
    return list(dict.fromkeys(tests))


def tests_request(
    requirement: str, name: str, sig: str, model: str, samples: int = TEST_SAMPLES, tokens: int = TEST_TOKENS
) -> tuple[Prompt, SamplingParams, str]:
    """The test-writing call for `name`: its prompt, its sampling parameters and the key its completions are
    cached under (by prompt, model and parameters)."""
    prompt = build_tests_prompt(requirement, sig, name, TESTS_WANTED)
    params = SamplingParams(n=samples, temperature=0.8, top_p=0.95, max_new_tokens=tokens, seed=0)
    key = cache_key(kind="tests", model=model, prompt=prompt.to_json(), params=params.__dict__)
    return prompt, params, key


def test_texts(prompt: Prompt, completions: Sequence[Completion], backend: Backend) -> list[str]:
    """The test-writing call's completions as texts to read asserts from (and to cache): a backend that continues
    the prefilled answer returns only what follows `assert name(`, so the prefix is put back."""
    lead = prompt.answer_prefix if backend.prefills_answer else ""
    return [lead + completion.text for completion in completions]


def batching_on() -> bool:
    """Whether the test-writing call may ride along with the sampling (`ASSIST_AGREE_BATCH`: on, or off, the
    default until it is measured faster); another value is a one-line error."""
    raw = os.environ.get(BATCH_ENV, "").strip().lower()
    if raw not in ("", "on", "off"):
        raise UsageError(f"{BATCH_ENV} must be on or off, not {raw!r}")
    return raw == "on"


# Test-writing completions decoded beside the sampling, by their request's key (:func:`tests_request`), for this
# request's ranking: what `written_tests` reads before it would ask the model.
_prefetched: ContextVar[Mapping[str, list[str]] | None] = ContextVar("assist_agree_prefetched", default=None)


@contextmanager
def prefetched_tests(written: Mapping[str, list[str]]) -> Iterator[None]:
    """Within the block, :func:`written_tests` takes the texts (:func:`test_texts`) of a request whose key is in
    `written` instead of asking the model (a context variable: the rankers between here and agree need not carry
    them)."""
    token = _prefetched.set(written)
    try:
        yield
    finally:
        _prefetched.reset(token)


def written_tests(
    problem: Problem,
    name: str,
    sig: str,
    backend: Backend,
    samples: int = TEST_SAMPLES,
    cache: JsonlCache | LayeredCache | None = None,
    step: Step | None = None,
    tokens: int = TEST_TOKENS,
) -> list[str]:
    """Assert lines the backend writes for the requirement (seeded, so a problem gets the same tests each time).

    With a `cache` (the evaluation's), the completions are kept by prompt, model and parameters: a resumed run,
    or another strategy's candidates with the same signature, reuse them instead of asking the model again.
    `step` is told how far the model has got (a callback that raises stops it, as the TUI's Escape does). Texts
    decoded beside the sampling (:func:`prefetched_tests`) are taken as the model's answer to this very call."""
    prompt, params, key = tests_request(problem.requirement, name, sig, backend.model, samples, tokens)
    prefetched = _prefetched.get() or {}
    if cache is not None and key in cache:
        texts = cache.get(key)
    else:
        if key in prefetched:
            texts = list(prefetched[key])
        else:
            texts = test_texts(prompt, backend.sample(prompt, params, step), backend)
        if cache is not None:
            cache.put(key, texts)
    tests: list[str] = []
    for text in texts:
        start, end = code_span(text)
        tests += _assert_lines(text[start:end], name)
    return list(dict.fromkeys(tests))


_SPACE = re.compile(r"\s+")


class AgreementRanker:
    """CodeT's dual agreement over tests the backend writes (see the module docstring)."""

    name = "agree"

    def __init__(
        self,
        backend: Backend,
        wanted: int = TESTS_WANTED,
        samples: int = TEST_SAMPLES,
        cache: JsonlCache | LayeredCache | None = None,
        tokens: int = TEST_TOKENS,
    ) -> None:
        self.backend = backend
        self.wanted = wanted
        self.samples = samples
        self.tokens = tokens  # new tokens a test-writing sample may take
        self.cache = cache  # where the written tests are kept (an evaluation sets it; `generate` asks each time)

    def tests(
        self, problem: Problem, candidates: Sequence[Candidate], step: Step | None = None, name: str | None = None
    ) -> tuple[str | None, list[str], int]:
        """The function's name, the tests (the requirement's examples first) and how many are examples. `name` is
        the function to test (default: the candidates' :func:`entry_point`). `step` is told of each token of the
        test-writing call, so a cancel stops it at the next token."""
        name = name or entry_point(candidates)
        if name is None:
            return None, [], 0
        examples = example_tests(problem.requirement, name)
        written = written_tests(
            problem, name, signature(candidates, name), self.backend, self.samples, self.cache, step, self.tokens
        )
        seen = {_SPACE.sub("", t) for t in examples}
        tests = examples + [t for t in written if _SPACE.sub("", t) not in seen]
        return name, tests[: self.wanted], min(len(examples), self.wanted)

    def score(self, problem: Problem, candidates: Sequence[Candidate], step: Step | None = None) -> list[Score]:
        if not candidates:
            return []
        home = problem.home
        if home is not None and home.is_method:
            return [Score(0.0, "a method: its tests would need an instance") for _ in candidates]
        needed = [free_names(c.code) for c in candidates]
        if home is None and all(needed):
            # None can run alone (each calls code of its file, e.g. `generate --file F`): the model call that
            # writes tests would be wasted; every candidate scores 0 and the next ranker decides.
            missing = sorted(set.intersection(*needed)) or sorted(needed[0])
            why = f"cannot run alone: needs {', '.join(missing[:3])} from elsewhere"
            return [Score(0.0, why) for _ in candidates]
        name, tests, examples = self.tests(problem, candidates, step)
        if name is None or not tests:
            why = "no function to test" if name is None else "the model wrote no usable test"
            return [Score(0.0, why) for _ in candidates]
        if home is None:
            passed = _passed_alone(candidates, name, tests, problem.setup)
        else:
            passed = passed_in_module(home, [c.sample for c in candidates], tests)
            if isinstance(passed, str):  # nothing ran: no candidate is told apart from another
                return [Score(0.0, passed, {"not_run": passed}) for _ in candidates]
        return cluster_scores(candidates, tests, passed, examples)


def _passed_alone(candidates: Sequence[Candidate], name: str, tests: Sequence[str], setup: str) -> list[frozenset[int]]:
    """The tests (by position) each candidate passes, one sandbox run per (candidate, test), each candidate's
    main function answering to `name` (:func:`under_name`)."""
    from assistant import sandbox

    codes = [under_name(c.code, name) for c in candidates]
    jobs = [(code, [test], setup) for code in codes for test in tests]
    limits = sandbox.Limits(timeout_s=float(TEST_SECONDS), cpu_s=TEST_SECONDS, memory_mb=1024)
    results = sandbox.run_many(jobs, limits=limits)
    width = len(tests)
    return [
        frozenset(j for j in range(width) if results[i * width + j].status == "passed") for i in range(len(candidates))
    ]


def cluster_scores(
    candidates: Sequence[Candidate], tests: Sequence[str], passed: Sequence[frozenset[int]], examples: int
) -> list[Score]:
    """CodeT's score: candidates that pass the same tests form a cluster; each scores its cluster's size times
    the tests it passes, over (candidates × tests)."""
    width = len(tests)
    clusters: dict[frozenset[int], list[int]] = {}
    for i, tests_passed in enumerate(passed):
        clusters.setdefault(tests_passed, []).append(i)
    scale = len(candidates) * width
    scores = []
    for tests_passed in passed:
        members = clusters[tests_passed]
        value = len(members) * len(tests_passed) / scale
        why = (
            f"passes {len(tests_passed)}/{width} model-written tests ({examples} from the requirement), "
            f"with {len(members) - 1} other candidate{'s' if len(members) != 2 else ''} passing the same"
        )
        # The cluster by sample number (1 = first sampled), as `--explain` shows it.
        cluster = [candidates[c].sample + 1 for c in members]
        details = {"tests": list(tests), "passed": sorted(tests_passed), "cluster": cluster}
        scores.append(Score(value, why, details))
    return scores
