"""Issue 66 in the interactive session and the TUI: the same edit rule as the command line (a plain request's
candidates never change the file's own functions), only a candidate that passed the tests is applied unless the user
insists, tests typed with ctrl+t run in the candidate's module (they may import the project), a stub is ranked by
the repo's tests as `assist generate --function` ranks it, and tests typed for one request do not rank the next.

A scripted backend (no model); git, the project sandbox and the file writes are real."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from assistant.errors import UsageError
from assistant.ui.session import Options, Session

from .conftest import ScriptedBackend, git
from .test_edit_rules import FOUR, PRICING, REQUIREMENT, RETYPED, RIGHT, WRONG, segments, shop  # noqa: F401

TARGET = "inventory/pricing.py"
# Typed with ctrl+t: it imports the project, and calls the new function by its module's name.
TYPED = (
    "from types import SimpleNamespace\n"
    "from inventory.pricing import format_money\n"
    "assert format_money(order_total([SimpleNamespace(quantity=3, unit_price=Decimal('1.255'))])) == '3.77'"
)


def session_for(root: Path, replies: list, **options) -> Session:
    options = {"n": len(replies), "k": 0, "ranker": "logprob", **options}
    return Session(root, options=Options(**options), backend=ScriptedBackend(replies))


def test_a_session_edit_leaves_the_files_own_functions_as_they_are(shop: Path) -> None:  # noqa: F811
    session = session_for(shop, [RETYPED])
    result = session.generate(REQUIREMENT, target=TARGET)
    assert result.candidates[0].candidate.dropped == tuple(f"rewrites {name}()" for name in FOUR)
    session.apply(0)
    after = segments((shop / TARGET).read_text(encoding="utf-8"))
    assert all(after[name] == segments(PRICING)[name] for name in FOUR) and "order_total" in after
    session.undo()
    # Planned again after the undo, by the same rule.
    assert "dropped: rewrites apply_discount()" in session.state.result.edits[0].actions


def test_ctrl_t_tests_run_in_the_candidates_module_and_may_import_the_project(shop: Path) -> None:  # noqa: F811
    session = session_for(shop, [RIGHT])
    session.generate(REQUIREMENT, target=TARGET)
    outcome = session.run_tests(0, [TYPED])
    assert outcome.status == "passed" and outcome.passed == outcome.total == 1, outcome
    assert session.state.result.candidates[0].scores["exec"].value == 1.0


def test_with_tests_only_a_passing_candidate_is_applied_unless_forced(shop: Path) -> None:  # noqa: F811
    session = session_for(shop, [WRONG])
    session.generate(REQUIREMENT, target=TARGET, tests=[TYPED])
    with pytest.raises(UsageError, match=r"nothing written: candidate #1 did not pass your 1 test; none passed them"):
        session.apply(0)
    assert (shop / TARGET).read_text(encoding="utf-8") == PRICING
    assert session.state.tested and "your 1 test" in session.state.tests_label()
    session.apply(0, force=True)
    assert "def order_total" in (shop / TARGET).read_text(encoding="utf-8")


def test_without_tests_a_candidate_that_reads_a_name_defined_nowhere_is_applied_only_when_insisted(
    shop: Path,  # noqa: F811
) -> None:
    broken = "def order_total(lines):\n    return round_total(sum(line_total(x) for x in lines))\n"
    session = session_for(shop, [broken])
    session.generate(REQUIREMENT, target=TARGET)
    assert not session.state.tested
    with pytest.raises(UsageError, match=r"nothing written: candidate #1 reads `round_total`, defined nowhere"):
        session.apply(0)
    assert (shop / TARGET).read_text(encoding="utf-8") == PRICING
    session.apply(0, force=True)  # the TUI asks first ("Write it anyway?")
    assert "round_total(" in (shop / TARGET).read_text(encoding="utf-8")


STUB = '''

def order_total(lines) -> Decimal:
    """Return the rounded total of an order: the sum of its line totals, rounded half up to cents."""
    ...
'''

STUB_TEST = """

def test_order_total():
    from inventory.pricing import order_total

    lines = [SimpleNamespace(quantity=3, unit_price=Decimal("1.255"))]
    assert str(order_total(lines)) == "3.77"
"""


def test_filling_a_stub_in_the_session_runs_the_repos_tests(shop: Path) -> None:  # noqa: F811
    (shop / TARGET).write_text(PRICING + STUB, encoding="utf-8")
    tests = shop / "tests" / "test_pricing.py"
    tests.write_text(tests.read_text(encoding="utf-8") + STUB_TEST, encoding="utf-8")
    git(shop, "commit", "-qam", "a stub and its test")
    session = session_for(shop, [WRONG, RIGHT])
    result = session.generate("", target=TARGET, function="order_total")
    assert result.rankers[0] == "repo-tests"
    assert "ROUND_HALF_UP" in result.candidates[0].candidate.code
    assert result.candidates[0].scores["repo-tests"].details["status"] == "passed"
    said = "the repo's tests (found 1 test that fails with the stub raising: pytest tests/test_pricing.py::test_order"
    assert said in session.state.tests_label()
    assert session.may_apply(0) is None and "did not pass" in (session.may_apply(1) or "")
    # ctrl+t's tests run in the stub's module too (its result has no home: the repo's tests ranked it).
    assert session.run_tests(0, [TYPED]).status == "passed"
    body = ast.parse((shop / TARGET).read_text(encoding="utf-8")).body[-1]
    assert isinstance(body, ast.FunctionDef) and isinstance(body.body[-1], ast.Expr)  # still a stub: nothing applied


async def test_tests_typed_for_one_request_do_not_rank_the_next(shop: Path) -> None:  # noqa: F811
    from textual.widgets import TextArea

    from assistant.ui.tui import AssistApp

    from .test_tui import last_notice, settle, start, type_requirement

    session = session_for(shop, [RIGHT, RIGHT])
    app = AssistApp(session, target=TARGET)
    async with app.run_test(size=(100, 32)) as pilot:
        await start(app, pilot)
        await pilot.press("ctrl+t")
        await pilot.pause()
        app.screen.query_one("#tests-text", TextArea).load_text(TYPED)
        await pilot.press("ctrl+s")
        await settle(app, pilot)
        await type_requirement(pilot, REQUIREMENT)
        await pilot.press("ctrl+g")
        await settle(app, pilot)
        assert session.state.tests == [TYPED]  # typed for this request: they rank it
        assert "tests: your 1 test" in app.screen.status.message
        await type_requirement(pilot, " in cents")
        await pilot.press("ctrl+g")
        await settle(app, pilot)
        assert session.state.tests == [] and app.screen.tests == []  # another request: set aside, and said so
        assert "set aside" in last_notice(app) or any("set aside" in n.message for n in app._notifications)
        assert "tests: no tests" in app.screen.status.message
        # ctrl+t offers them again; saving keeps them for the next request.
        await pilot.press("ctrl+t")
        await pilot.pause()
        assert app.screen.query_one("#tests-text", TextArea).text.strip() == TYPED


def test_a_resampled_candidate_runs_the_tests_where_the_others_ran(shop: Path) -> None:  # noqa: F811
    session = session_for(shop, [WRONG, RIGHT], n=1, repair=0)
    session.generate(REQUIREMENT, target=TARGET, tests=[TYPED])
    result = session.resample(0)
    verdict = result.candidates[0].scores["exec"]
    assert verdict.value == 1.0 and "in its module" in verdict.why, verdict
    assert session.may_apply(0) is None
