"""The CLI door: the library checks the generation settings in its own words, and the door says the same line with
the flags the user typed (assistant/ui/errors.py); `generate`'s text output, printed by small helpers."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from assistant.core.candidates import Candidate
from assistant.core.generation import GenerateResult
from assistant.core.rank import Ranked, Score
from assistant.errors import UsageError
from assistant.pipeline.options import GenerationOptions, SettingError
from assistant.ui.errors import as_flags, flag_errors


@pytest.mark.parametrize(
    ("options", "library", "door"),
    [
        ({"n": 0}, "n must be at least 1 and at most 64, not 0", "-n must be at least 1 and at most 64, not 0"),
        ({"top_p": 0.0}, "top_p must be above 0 and at most 1, not 0", "--top-p must be above 0 and at most 1, not 0"),
        ({"temperature": float("nan")}, "temperature must be at least 0 and at most 2, not nan", None),
        ({"repair": 9}, "repair must be at least 0 and at most 5, not 9", "--repair must be at least 0 and at most 5"),
    ],
)
def test_a_number_out_of_range_is_worded_by_setting_and_said_by_flag(options, library, door) -> None:
    with pytest.raises(SettingError) as caught:
        GenerationOptions(**options).check()
    assert str(caught.value) == library
    (name,) = options
    said = str(as_flags(caught.value, options))
    assert said.startswith(door or f"--{name}"), said
    # A value the user did not type (a config file's) keeps the setting's name: that is what to fix.
    assert str(as_flags(caught.value, {name: None})) == library


@pytest.mark.parametrize(
    ("explicit", "stub", "bank", "line"),
    [
        ({"apis": True}, False, False, "--apis is for filling a stub: give --function too"),
        ({"tests_in_prompt": True}, False, False, "--tests-in-prompt is for filling a stub: give --function too"),
        ({"fragments": True, "k": 0}, True, False, "--fragments shows -k retrieved fragments; -k 0 would show none"),
        ({"fragments": True}, True, True, "--fragments retrieves the repository's code, not a bank's: drop --bank"),
        ({"own_file": True}, True, True, "--own-file takes demonstrations from the repository's index, not a bank"),
        ({"own_file": True, "fragments": True}, True, False, "--own-file would change nothing"),
    ],
)
def test_settings_given_together_that_contradict_are_refused_by_the_library(explicit, stub, bank, line) -> None:
    options = GenerationOptions(**explicit)
    with pytest.raises(SettingError) as caught:
        options.check(explicit=set(explicit), stub=stub, bank=bank)
    assert "--" not in str(caught.value)  # the library's own words name settings, not flags
    with pytest.raises(UsageError) as said, flag_errors(explicit):
        options.check(explicit=set(explicit), stub=stub, bank=bank)
    assert line in str(said.value)


def test_only_settings_the_request_gave_are_combined() -> None:
    # own_file is on by default and fragments may come from a config file: neither contradicts what was typed.
    GenerationOptions(fragments=True).check(explicit={"fragments"}, stub=True)
    GenerationOptions(fragments=True, own_file=True, k=0).check(explicit=(), stub=False, bank=True)
    GenerationOptions(apis=False).check(explicit={"apis"}, stub=False)  # --no-apis asks for nothing


def test_the_request_rules_of_the_library_are_said_with_flags(tmp_path) -> None:
    from assistant.pipeline import Request

    stub = {"file": tmp_path / "a.py", "function": "f"}
    cases = [
        ({"function": "f", "start": tmp_path}, "--function f without --file looks for the stub in the git repo you"),
        ({**stub, "python": tmp_path / "nope"}, f"--python {tmp_path / 'nope'} "),
        (
            {"file": tmp_path / "a.py", "function": "f", "test_cmd": "pytest", "repo_tests": False},
            "--test-cmd names the",
        ),
    ]
    for fields, line in cases:
        with pytest.raises(UsageError) as said, flag_errors(fields):
            Request.resolve("x", **fields)
        assert str(said.value).startswith(line), said.value


@dataclass
class _Edit:
    display_path: str
    actions: tuple[str, ...]
    diff: str


def _result(explained_tests: int) -> GenerateResult:
    """Two candidates with edits; #1's agree score lists `explained_tests` tests, as --explain prints them."""
    details = {"cluster": [1], "tests": [f"assert f() == {i}" for i in range(explained_tests)], "passed": [0]}
    ranked = [
        Ranked(Candidate("def f():\n    return 0\n", 0), {"agree": Score(1.0, "agreed", details)}),
        Ranked(Candidate("def f():\n    return 1\n", 1), {"agree": Score(0.5, "alone", {})}),
    ]
    edits = [_Edit("m.py", ("adds f()",), f"+    return {i}\n") for i in range(2)]
    return GenerateResult(
        requirement="r", model="m", backend="b", retriever="bm25", rankers=["agree"], demonstrations=[],
        candidates=ranked, edits=edits, prompt=None, prompt_tokens=1, samples=2, dropped={},
    )  # fmt: skip


def test_explain_shows_the_first_candidates_diff_whatever_its_agree_tests(capsys) -> None:
    # The tests' loop once reused the candidates' counter: with three tests #1's diff went missing under --explain.
    from assistant.ui.cli import _print_result

    _print_result(_result(3), None, explain=True, written=None)
    shown = capsys.readouterr().out
    assert "Diff for m.py" in shown and "return 0" in shown.split("Diff for m.py")[1], shown
    assert shown.count("Diff for") == 1


def test_agree_that_ran_on_no_candidate_is_said_with_the_way_out(capsys) -> None:
    # Its module does not import with the interpreter: agree told no candidate apart, and a user would not guess why.
    from assistant.core.rank import ran_on_none
    from assistant.ui.cli import _warn_agree_ran_on_none

    result = _result(1)
    _warn_agree_ran_on_none(result)
    assert capsys.readouterr().err == ""  # it ran: nothing to say
    why = "the project's pytest ran none of the tests (ModuleNotFoundError: No module named 'x')"
    for item in result.candidates:
        item.scores["agree"] = Score(0.0, why, {"not_run": why})
    assert ran_on_none(result.candidates, "agree") == why and ran_on_none(result.candidates, "exec") is None
    _warn_agree_ran_on_none(result)
    said = " ".join(capsys.readouterr().err.split())
    assert said == f"note: agree ran its tests on no candidate: {why}; --python names the interpreter with the " + (
        "project's dependencies"
    )
