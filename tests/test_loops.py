"""The straggler check (`assistant.backends.loops`): loops that change a number or a name every round are caught,
ordinary code is not, and the OpenVINO engine's step loop ends a straggling row while the others run on."""

from __future__ import annotations

import argparse
import ast
import typing
from pathlib import Path
from typing import Any

import pytest

from assistant.backends import loops
from assistant.backends.loops import LOOPING, RAN_PAST, RowWatch, is_looping, ran_past, shapes

from .helpers_fake_ov import FakePipeline, fake_ov_backend, ov_status

# The 1.5B sample of issue 69 that held a request for 409 s: `k` counts up in every round.
ISSUE_LOOP = "def f(r):\n    return " + " + ".join(
    f"[tuple(map(lambda i: i, range(r - 1, {k}, -1)))][0]" for k in range(3, 60)
)


def test_shapes_keep_keywords_and_fold_names_numbers_and_strings() -> None:
    assert shapes("for x1 in range(10): y = 'a' + 2.5\n") == [
        "for", "n", "in", "n", "(", "0", ")", ":", "n", "=", "s", "+", "0", "\n",
    ]  # fmt: skip


@pytest.mark.parametrize(
    "text",
    [
        ISSUE_LOOP,
        "def f(r):\n    total = 0\n" + "".join(f"    total += sum(tuple(range(r - 1, {k}, -1)))\n" for k in range(99)),
        "def f(x):\n" + "".join(f"    x{k + 1} = x{k} + {k + 1}\n" for k in range(60)),  # a name changes too
        "def f():\n    return g(" + ")" * 400,
        "def f():\n" + "    print('again')\n" * 80,  # word for word
    ],
    ids=["issue-69", "counting-lines", "renamed-lines", "one-character", "same-line"],
)
def test_a_loop_is_caught_before_it_reaches_a_usual_limit(text: str) -> None:
    assert is_looping(text)
    caught = next(end for end in range(20, len(text) + 20, 20) if is_looping(text[:end]))
    assert caught <= 1200  # characters: a few hundred tokens, not the 1,024-token limit


def _prefixes_at_line_ends(body: str) -> list[str]:
    return [body[: i + 1] for i, c in enumerate(body) if c == "\n"] + [body]


@pytest.mark.parametrize("module", [ast, argparse, typing], ids=lambda m: m.__name__)
def test_no_function_body_of_the_standard_library_counts_as_a_loop(module: Any) -> None:
    source = Path(module.__file__).read_text(encoding="utf-8")
    bodies = [
        ast.get_source_segment(source, node) or ""
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    ]
    assert len(bodies) > 80
    # Every prefix ending a line: the engines check a row while it is being written.
    flagged = [body.split("(")[0] for body in bodies if any(map(is_looping, _prefixes_at_line_ends(body)))]
    assert flagged == []


def test_a_row_runs_past_the_others_only_once_most_have_finished() -> None:
    assert not ran_past(5000, [40, 50], rows=5)  # two of five finished: not yet most
    assert ran_past(loops.PAST_FLOOR + 1, [40, 50, 60], rows=5)
    assert not ran_past(loops.PAST_FLOOR, [40, 50, 60], rows=5)  # the floor
    assert not ran_past(400, [100, 150, 200], rows=5) and ran_past(451, [100, 150, 200], rows=5)  # 3x the median
    assert not ran_past(10_000, [], rows=1)  # a lone row has no others


# A toy tokenizer: a token is four characters, as code tokens are on average.
_VOCABULARY: list[str] = []


def _decode(ids: list[int]) -> str:
    return "".join(_VOCABULARY[i] for i in ids)


def _ids(text: str) -> list[int]:
    chunks = [text[i : i + 4] for i in range(0, len(text), 4)]
    for chunk in chunks:
        if chunk not in _VOCABULARY:
            _VOCABULARY.append(chunk)
    return [_VOCABULARY.index(chunk) for chunk in chunks]


def test_a_watch_names_the_reason_once_and_leaves_finished_rows_alone() -> None:
    watch = RowWatch(3, _decode)
    watch.finish(0, 30)
    watch.finish(1, 40)
    looping = _ids(ISSUE_LOOP)
    assert watch.verdict(2, looping[:40]) is None
    reason = next(r for end in range(16, len(looping), 16) if (r := watch.verdict(2, looping[:end])) is not None)
    assert reason == LOOPING and watch.cut == {2: LOOPING}
    assert watch.verdict(0, looping) is None  # finished on its own: never cut

    past = RowWatch(3, _decode)
    past.finish(0, 30)
    past.finish(1, 40)
    ordinary = _ids("x = compute(a, b)\n" * 2 + "".join(f"y{i} = {i}\n" for i in range(3)))
    assert past.verdict(2, ordinary) is None
    assert past.verdict(2, ordinary + _ids("zzzz") * (loops.PAST_FLOOR - len(ordinary) + 1)) == RAN_PAST


def test_the_openvino_loop_stops_a_looping_row_and_lets_the_others_finish() -> None:
    """The step loop of `OpenVINOBackend._run` with a fake pipeline (the real one: tests/test_backend_ov.py)."""
    short = _ids("return a + b\n")
    scripts = [short, _ids(ISSUE_LOOP), short + _ids("# done\n")]  # 4 and 6 tokens
    pipeline = FakePipeline(scripts)
    backend = fake_ov_backend(pipeline)
    from assistant.backends import ov

    config = type("Config", (), {"max_new_tokens": 2000})()
    watch = ov._Watch([(0, row, 0) for row in range(3)], {0: RowWatch(3, _decode)}, later={1, 2})
    rows = backend._run([([1, 2, 3], config)] * 3, None, 0, watch=watch)
    assert watch.cut == {1: LOOPING}
    assert pipeline.handles[1].status == ov_status("STOP") and len(pipeline.handles[1].written) < 400
    assert [len(own[0][0]) for own in rows][::2] == [len(short), len(short) + 2]  # the others ran to their end
    assert pipeline.added_at == [0, 1, 1]  # the later rows came once the first had read the prompt


def test_a_row_the_engine_cut_is_reported_with_its_reason() -> None:
    from assistant.backends import Completion
    from assistant.core.stubs import collect_stub, find_functions

    (stub,) = find_functions('def f(r):\n    """Sum the tuples."""\n    ...\n')
    prefix = stub.dedented_head() + "\n"
    text = "    return " + ISSUE_LOOP.split("return ", 1)[1][:300]
    completions = [
        Completion(text, 120, "length", cut_reason=LOOPING),
        Completion("    total = 0\n    for k in range(r):\n        total += (", 300, "length", cut_reason=RAN_PAST),
        Completion("    r = r +", 1024, "length"),
    ]
    kept, dropped, cut = collect_stub(completions, stub, prefix, [])
    assert kept == [] and dropped == {"cut off": 3}
    assert [c.to_json()["reason"] for c in cut] == [
        "cut off: looping",
        "cut off: ran past the others",
        "cut off: token limit",
    ]
    assert [c.repeating for c in cut] == [True, False, False]  # a loop is not worth more room


def test_the_warning_says_which_samples_the_engine_ended_early() -> None:
    from assistant.core.candidates import CutOff, cut_early_note

    cut = [CutOff(0, 200, "", True, LOOPING), CutOff(1, 300, "", False, RAN_PAST), CutOff(2, 1024, "")]
    cut.append(CutOff(3, 220, "", True, LOOPING))
    assert cut_early_note(cut) == (
        "2 of them were ended early (cut off: looping); 1 of them was ended early (cut off: ran past the others)"
    )
    assert cut_early_note(cut[2:3]) == ""
