"""The `agree` ranker: tests the model writes (scripted here) and the requirement's own examples, every candidate
run on each in the real sandbox, candidates clustered by the tests they pass (CodeT's dual agreement)."""

from __future__ import annotations

import pytest

from assistant.backends.prompts import Prompt
from assistant.core.agreement import (
    AgreementRanker,
    entry_point,
    example_tests,
    main_function,
    signature,
    under_name,
)
from assistant.core.candidates import Candidate
from assistant.core.rank import Problem, rank
from assistant.pipeline.registry import make_rankers

from .conftest import ScriptedBackend

REQUIREMENT = """Return the largest of three numbers.

>>> biggest(1, 5, 3)
5
"""

WRITTEN = """1, 2, 3) == 3
assert biggest(3, 2, 1) == 3
assert biggest(-1, -2, -3) == -1
assert max(1, 2) == 2
assert biggest(7, 7, 7) == 7
print("done")
```"""

RIGHT_A = "def biggest(a, b, c):\n    return max(a, b, c)\n"
RIGHT_B = "def biggest(a, b, c):\n    return sorted([a, b, c])[-1]\n"
WRONG_FIRST = "def biggest(a, b, c):\n    return a\n"
WRONG_LAST = "def biggest(a, b, c):\n    return c\n"


def problem() -> Problem:
    return Problem(requirement=REQUIREMENT, prompt=Prompt(messages=({"role": "user", "content": REQUIREMENT},)))


def test_the_requirements_examples_and_the_function_are_read_from_the_text() -> None:
    candidates = [Candidate(RIGHT_A, 0), Candidate("not python (", 1), Candidate(RIGHT_B, 2)]
    assert entry_point(candidates) == "biggest"
    assert signature(candidates, "biggest") == "def biggest(a, b, c):"
    assert example_tests(REQUIREMENT + "\nassert biggest(0, 0, 1) == 1\n", "biggest") == [
        "assert biggest(0, 0, 1) == 1",
        "assert biggest(1, 5, 3) == 5",
    ]
    assert example_tests(">>> other(1)\n2\n", "biggest") == []
    # A doctest whose expression compares, or shows a tuple, once became `biggest(1, 2, 3) == 3 == True` (chained:
    # always false) and an assert with a message (always true).
    doctests = ">>> biggest(1, 2, 3) == 3\nTrue\n>>> biggest(1, 2, 3), biggest(3, 2, 1)\n(3, 3)\n"
    assert example_tests(doctests, "biggest") == [
        "assert (biggest(1, 2, 3) == 3) == True",
        "assert (biggest(1, 2, 3), biggest(3, 2, 1)) == (3, 3)",
    ]


def test_examples_written_in_the_prose_become_tests_and_sentences_do_not() -> None:
    text = (
        "Return the second largest distinct number, e.g. second_largest([3, 1, 4, 4]) == 3, and "
        "second_largest([5, 5, 2]) -> 2. Also second_largest(xs) returns the answer; second_largest([1]) gives None."
    )
    assert example_tests(text, "second_largest") == [
        "assert second_largest([3, 1, 4, 4]) == 3",
        "assert second_largest([5, 5, 2]) == 2",
        "assert second_largest([1]) == None",
    ]
    # Not literals, not the function, or no value: nothing.
    assert example_tests("my_second_largest([1, 2]) == 1; second_largest([1, 2]) is small", "second_largest") == []
    assert example_tests("f('a, b') returns 'b'.", "f") == ["assert f('a, b') == 'b'"]


def test_candidates_that_agree_on_more_tests_rank_first() -> None:
    backend = ScriptedBackend([WRITTEN], prefills_answer=True)  # as the local model continues "assert biggest("
    ranker = make_rankers("agree", backend)[0]
    assert isinstance(ranker, AgreementRanker)
    # Sampling order puts the wrong ones first; the two right ones agree on every test.
    candidates = [Candidate(WRONG_FIRST, 0), Candidate(WRONG_LAST, 1), Candidate(RIGHT_A, 2), Candidate(RIGHT_B, 3)]
    name, tests, examples = ranker.tests(problem(), candidates)
    assert name == "biggest" and examples == 1
    # The example first; `max(...)` does not call the function and `print` is not an assert: left out.
    assert tests == [
        "assert biggest(1, 5, 3) == 5",
        "assert biggest(1, 2, 3) == 3",
        "assert biggest(3, 2, 1) == 3",
        "assert biggest(-1, -2, -3) == -1",
        "assert biggest(7, 7, 7) == 7",
    ]
    ranked = rank(problem(), candidates, [ranker])
    assert [r.candidate.sample for r in ranked[:2]] == [2, 3]
    top = ranked[0].scores["agree"]
    assert top.value == 2 * 5 / (4 * 5) and top.details["cluster"] == [3, 4]
    assert "passes 5/5 model-written tests (1 from the requirement), with 1 other candidate" in top.why
    # "return a" passes the (3, 2, 1), (-1, -2, -3) and (7, 7, 7) cases, "return c" (1, 2, 3) and (7, 7, 7).
    alone = {r.candidate.sample: r.scores["agree"] for r in ranked[2:]}
    assert alone[0].details["passed"] == [2, 3, 4] and alone[1].details["passed"] == [1, 4]


def test_candidates_named_differently_are_told_apart_by_behaviour_not_by_name() -> None:
    # Asked in plain words, the model names the function anew in each sample. The tests are written for the name
    # most candidates share, the first sampled's among equals ("largest" here): every other candidate must still
    # run under it, else the wrong "largest" outranks two right answers that chose other names.
    wrong = "def largest(a, b, c):\n    return a\n"
    right_a = "def biggest(a, b, c):\n    return max(a, b, c)\n"
    right_b = "def _pick(xs):\n    return sorted(xs)[-1]\n\n\ndef top_of_three(a, b, c):\n    return _pick([a, b, c])\n"
    written = WRITTEN.replace("biggest", "largest")
    ranker = AgreementRanker(ScriptedBackend([written], prefills_answer=True))
    plain = Problem(requirement="Return the largest of three numbers.", prompt=problem().prompt)
    candidates = [Candidate(wrong, 0), Candidate(right_a, 1), Candidate(right_b, 2)]
    assert entry_point(candidates) == "largest" and main_function(right_b) == "top_of_three"
    ranked = rank(plain, candidates, [ranker])
    assert [r.candidate.sample for r in ranked] == [1, 2, 0]
    assert ranked[0].scores["agree"].details["cluster"] == [2, 3]
    assert ranked[0].scores["agree"].details["passed"] == [0, 1, 2, 3]


def test_a_candidate_answers_to_the_tests_name_only_where_it_does_not_bind_it() -> None:
    code = "def helper(x):\n    return x\n\n\ndef main(x):\n    return helper(x) + 1\n"
    assert main_function(code) == "main"
    assert under_name(code, "f").endswith("\nf = main  # the name the tests call\n")
    assert under_name(code, "main") == code and under_name(code, "helper") == code
    assert under_name("from os.path import join as f\n", "f") == "from os.path import join as f\n"
    assert under_name("f = len\ndef g(x):\n    return f(x)\n", "f").startswith("f = len")
    assert under_name("f = len\ndef g(x):\n    return f(x)\n", "f").count("f = ") == 1
    assert under_name("x = 1\n", "f") == "x = 1\n" and under_name("def (", "f") == "def ("
    # Recursion is not a call from another function: a recursive main function stays the main one.
    assert main_function("def fact(n):\n    return 1 if n < 2 else n * fact(n - 1)\n") == "fact"


def test_the_main_function_is_the_answer_not_a_helper_or_a_driver() -> None:
    helper_in_a_class = (
        "def helper(x):\n    return x\n\n\nclass S:\n    def run(self, x):\n        return helper(x)\n\n\n"
        "def solve(x):\n    return S().run(x)\n"
    )
    assert main_function(helper_in_a_class) == "solve"  # a class's call makes `helper` a helper
    driver = (
        "def is_greater(n, xs):\n    return all(n > x for x in xs)\n\n\ndef main():\n    print(is_greater(3, [1]))\n"
    )
    assert main_function(driver) == "is_greater"
    tested = "def add(a, b):\n    return a + b\n\n\ndef test_add(x=1):\n    assert add(x, 1) == 2\n"
    assert main_function(tested) == "add"
    # A local variable named like another function is not a call to it.
    shadow = "def count(xs):\n    return len(xs)\n\n\ndef tally(xs):\n    count = 0\n    return count + len(xs)\n"
    assert main_function(shadow) == "count"
    mutual = "def even(n):\n    return n == 0 or odd(n - 1)\n\n\ndef odd(n):\n    return n != 0 and even(n - 1)\n"
    assert main_function(mutual) == "even"  # every function is called by another: the first
    assert main_function("def main():\n    return 1\n") == "main"  # a driver alone is still the answer


def test_a_lambda_assigned_to_a_name_is_a_function_that_agree_ranks() -> None:
    # "Write a function" is now and then answered `name = lambda ...` (3 of 200 MBPP tasks with the 1.5B, every
    # sample): it used to be "no function to test", so agree scored 0 and the log-probability alone decided.
    right = "biggest = lambda a, b, c: max(a, b, c)\n"
    wrong = "biggest = lambda a, b, c: a\n"
    assert main_function(right) == "biggest"
    assert signature([Candidate(right, 0)], "biggest") == "def biggest(a, b, c):"
    assert main_function("def helper(x):\n    return x\n\nsolve = lambda a: helper(a)\n") == "solve"
    assert main_function("go = lambda: biggest(1, 2, 3)\nbiggest = lambda a, b, c: c\n") == "biggest"  # a driver
    ranker = AgreementRanker(ScriptedBackend([WRITTEN], prefills_answer=True))
    ranked = rank(problem(), [Candidate(wrong, 0), Candidate(right, 1)], [ranker])
    assert [r.candidate.sample for r in ranked] == [1, 0]
    assert ranked[0].scores["agree"].details["passed"] == [0, 1, 2, 3, 4]


def test_no_name_is_bound_where_the_code_may_define_or_read_it() -> None:
    fallback = (
        "try:\n    from math import comb\nexcept ImportError:\n    comb = None\n\n\ndef binom(n, k):\n    return 1\n"
    )
    assert under_name(fallback, "comb") == fallback
    star = "from math import *\n\n\ndef my_gcd(a, b):\n    return a\n"
    assert under_name(star, "gcd") == star
    reads = "import math\n\n\ndef my_gcd(a, b):\n    return math.gcd(a, b) if gcd else 0\n"
    assert under_name(reads, "gcd") == reads  # binding `gcd` would make the function call itself
    # A local of the same name is the function's own: the module still answers to the name.
    local = "def max_length_lists(lists):\n    max_length = 0\n    return max(max_length, *map(len, lists))\n"
    assert under_name(local, "max_length").endswith("max_length = max_length_lists  # the name the tests call\n")
    # A subscript's key is read, not bound: this code still answers to the name.
    keyed = "d = {}\n\n\ndef put(k):\n    d[k] = 1\n    return d\n"
    assert under_name(keyed, "store").endswith("store = put  # the name the tests call\n")


def test_no_usable_test_leaves_every_candidate_at_zero() -> None:
    ranker = AgreementRanker(ScriptedBackend(["I cannot write tests."]))
    plain = Problem(requirement="Return the largest of three numbers.", prompt=problem().prompt)
    scores = ranker.score(plain, [Candidate(RIGHT_A, 0), Candidate(WRONG_FIRST, 1)])
    assert [s.value for s in scores] == [0.0, 0.0] and scores[0].why == "the model wrote no usable test"
    assert ranker.score(plain, [Candidate("x = 1\n", 0)])[0].why == "no function to test"


def test_a_cancel_stops_the_test_writing_call_at_its_next_token() -> None:
    from assistant.backends import SamplingParams
    from assistant.core.generation import generate
    from assistant.errors import Cancelled

    backend = ScriptedBackend([RIGHT_A, WRONG_FIRST, WRITTEN], steps=10)
    heard: list[tuple[str, int]] = []

    def progress(stage: str, done: int, total: int) -> None:
        heard.append((stage, done))
        if stage == "rank tests" and done == 3:  # the user pressed Escape while the model wrote tests
            raise Cancelled("generate cancelled")

    with pytest.raises(Cancelled):
        generate(
            REQUIREMENT, backend, k=0, params=SamplingParams(n=2), rankers=[AgreementRanker(backend)], progress=progress
        )
    assert [d for s, d in heard if s == "rank tests"] == [0, 1, 2, 3]  # stopped there, not after the call
