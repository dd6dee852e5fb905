"""The interactive session (library) and the Textual TUI driven by a Pilot against a scratch repo.

UI-flow tests swap the generator for a scripted one (fixed programs and log-probabilities) so they test
the UI, not the model; the index, the encoder, git, the sandbox and the file writes are all real. One test
drives the same flow with the default local model.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from assistant.errors import UsageError
from assistant.indexing.index import index_repo
from assistant.ui.session import Options, Session

from .conftest import ScriptedBackend, git

PROGRAMS = [
    ("def square_all(values):\n    return [v * v for v in values]", -0.1),
    ("def square_all(values):\n    return [v ** 2 for v in values]", -0.3),
    ("def square_all(values):\n    out = []\n    for v in values:\n        out.append(v + v)\n    return out", -0.5),
]
REQUIREMENT = "return the squares of the numbers in a list"


def programs_backend(programs=PROGRAMS, delay: float = 0.0, fail: BaseException | None = None) -> ScriptedBackend:
    """The conftest's scripted backend playing PROGRAMS in order, each with its fixed mean log-probability (5 tokens
    a sample), and unable to score other text: what these tests need from a generator."""
    return ScriptedBackend(list(programs), delay=delay, fail=fail, tokens=5, scores=False)


@pytest.fixture
def indexed_repo(scratch_repo: Path, encoder) -> Path:
    index_repo(scratch_repo, encoder)
    return scratch_repo


def make_session(root: Path, encoder, backend=None, **options) -> Session:
    # logprob, not auto: auto would add `agree`, whose test-writing call would draw from the scripted programs.
    options = {"n": 3, "k": 2, "ranker": "logprob", **options}
    return Session(root, options=Options(**options), backend=backend or programs_backend(), encoder=encoder)


def status(root: Path) -> str:
    return subprocess.run(["git", "status", "--porcelain"], cwd=root, capture_output=True, text=True).stdout


# -- the session (library API) -----------------------------------------------------------------------------


def test_session_generates_ranks_applies_and_undoes(indexed_repo: Path, encoder) -> None:
    session = make_session(indexed_repo, encoder)
    original = (indexed_repo / "mathutils.py").read_text()
    result = session.generate(REQUIREMENT, target="mathutils.py")
    assert result.rankers == ["logprob", "first"]  # the active ranker sorts; every available one scores
    assert [round(item.scores["logprob"].value, 1) for item in result.candidates] == [-0.1, -0.3, -0.5]
    assert result.demonstrations and all(hit.example.path != "mathutils.py" for hit in result.demonstrations)
    assert all(edit is not None and "insert square_all" in edit.actions for edit in result.edits)

    applied = session.apply(1)
    assert "v ** 2" in (indexed_repo / "mathutils.py").read_text()
    assert applied.display_path == "mathutils.py"
    # The other candidates' diffs are re-planned against the new content, by the same rule: the function just
    # written is the file's own now, so another candidate's version of it is left out, not swapped in (undo first).
    assert session.state.result.edits[0].actions == ("dropped: rewrites square_all()",)

    session.undo()
    assert (indexed_repo / "mathutils.py").read_text() == original
    assert status(indexed_repo) == ""
    events = [entry["event"] for entry in session.history()]
    assert events == ["undo", "apply", "generate"]
    assert session.requirements() == [REQUIREMENT]
    with pytest.raises(UsageError, match="nothing to undo"):
        session.undo()


def test_apply_over_unstaged_work_needs_confirmation_and_undo_restores_it(indexed_repo: Path, encoder) -> None:
    target = indexed_repo / "mathutils.py"
    target.write_text(target.read_text() + "\n# my unsaved note\n")
    mine = target.read_text()
    session = make_session(indexed_repo, encoder)
    session.generate(REQUIREMENT, target="mathutils.py")
    assert session.apply_needs_confirmation(0) == "it has unstaged changes"
    with pytest.raises(UsageError, match="unstaged changes"):
        session.apply(0)
    assert target.read_text() == mine
    session.apply(0, confirmed=True)
    assert "# my unsaved note" in target.read_text() and "square_all" in target.read_text()
    session.undo()
    assert target.read_text() == mine


def test_undo_puts_a_latin1_file_back_byte_for_byte(indexed_repo: Path, encoder) -> None:
    # Undo once wrote the text back as UTF-8 under a latin-1 cookie ("café" read back as "cafÃ©").
    target = indexed_repo / "latin.py"
    original = '# -*- coding: latin-1 -*-\n\n\ndef greet():\n    return "caf\u00e9 cr\u00e8me"\n'.encode("latin-1")
    target.write_bytes(original)
    git(indexed_repo, "add", "latin.py")
    git(indexed_repo, "commit", "-qm", "latin")
    session = make_session(indexed_repo, encoder)
    session.generate(REQUIREMENT, target="latin.py")
    session.apply(0)
    assert target.read_bytes() != original and b"caf\xe9 cr\xe8me" in target.read_bytes()
    session.undo()
    assert target.read_bytes() == original


def test_a_confirmed_apply_still_refuses_a_file_with_other_hard_links(indexed_repo: Path, encoder, tmp_path) -> None:
    # Confirming unsaved work is not --force: the hard-link refusal stands (and undo would fail after it).
    target = indexed_repo / "mathutils.py"
    target.write_text(target.read_text() + "\n# my unsaved note\n")
    os.link(target, tmp_path / "elsewhere.py")
    mine = target.read_text()
    session = make_session(indexed_repo, encoder)
    session.generate(REQUIREMENT, target="mathutils.py")
    assert session.apply_needs_confirmation(0) == "it has unstaged changes"
    with pytest.raises(UsageError, match="hard link"):
        session.apply(0, confirmed=True)
    assert target.read_text() == mine


def test_undo_refuses_when_the_file_changed_after_apply(indexed_repo: Path, encoder) -> None:
    target = indexed_repo / "mathutils.py"
    session = make_session(indexed_repo, encoder)
    session.generate(REQUIREMENT, target="mathutils.py")
    session.apply(0)
    target.write_text(target.read_text() + "# edited by hand\n")
    with pytest.raises(UsageError, match="changed since"):
        session.undo()
    assert target.read_text().endswith("# edited by hand\n")


def test_undo_removes_a_file_the_apply_created(indexed_repo: Path, encoder) -> None:
    session = make_session(indexed_repo, encoder)
    session.generate(REQUIREMENT, target="new_module.py")
    session.apply(0)  # nothing to lose: no confirmation needed
    assert (indexed_repo / "new_module.py").exists()
    session.undo()
    assert not (indexed_repo / "new_module.py").exists()


def test_resample_replaces_one_candidate_and_rerank_switches_the_order(indexed_repo: Path, encoder) -> None:
    programs = [*PROGRAMS, ("def square_all(values):\n    return list(map(lambda v: v * v, values))", -0.2)]
    session = make_session(indexed_repo, encoder, backend=programs_backend(programs))
    session.generate(REQUIREMENT)
    result = session.resample(2)
    codes = [item.candidate.code for item in result.candidates]
    assert "map(lambda" in codes[1]  # mean -0.2 sorts second
    assert not any("v + v" in code for code in codes)
    assert result.samples == 4
    session.configure(Options(n=3, k=2, ranker="first"))
    assert [item.candidate.sample for item in session.state.result.candidates] == [0, 1, 3]


def test_run_tests_scores_the_candidate_in_the_sandbox(indexed_repo: Path, encoder) -> None:
    session = make_session(indexed_repo, encoder)
    session.generate(REQUIREMENT)
    outcome = session.run_tests(2, ["assert square_all([3]) == [9]"])
    assert outcome.status == "failed" and outcome.passed == 0
    assert session.state.result.candidates[2].scores["exec"].value == 0.0
    assert "exec" not in session.state.result.candidates[0].scores  # not run: no score shown


def test_session_refuses_bad_settings_and_targets(indexed_repo: Path, encoder) -> None:
    session = make_session(indexed_repo, encoder)
    with pytest.raises(UsageError, match="unknown retriever"):
        session.configure(Options(retriever="magic"))
    with pytest.raises(UsageError, match="unknown ranker"):
        session.configure(Options(ranker="exec+magic"))
    with pytest.raises(UsageError, match="outside"):
        session.check_target("../elsewhere.py")
    (indexed_repo / "broken.py").write_text("def broken(:\n")
    with pytest.raises(UsageError, match="does not parse"):
        session.generate(REQUIREMENT, target="broken.py")
    assert session.tracked_files() == ["mathutils.py", "text/words.py"]


# -- the TUI, driven by a Pilot ----------------------------------------------------------------------------


def messages(posted: list, kind: type) -> list:
    """The messages of `kind` among those a `run_test(message_hook=...)` saw, once each (a bubbling message
    arrives at every parent)."""
    return list({id(message): message for message in posted if isinstance(message, kind)}.values())


def last_notice(app) -> str:
    """The message of the newest notification on screen."""
    notices = list(app._notifications)
    return notices[-1].message if notices else ""


async def settle(app, pilot) -> None:
    """Wait for the worker and for what it posted back to the UI."""
    await pilot.pause()
    await app.workers.wait_for_complete()
    await pilot.pause()


async def start(app, pilot) -> None:
    await settle(app, pilot)  # the models load in a worker at start-up


async def type_requirement(pilot, text: str) -> None:
    await pilot.click("#requirement")
    await pilot.press(*text)


async def ask(app, pilot, text: str = REQUIREMENT) -> None:
    """Start, write the requirement, generate, and wait for the candidates."""
    await start(app, pilot)
    await type_requirement(pilot, text)
    await pilot.press("ctrl+g")
    await settle(app, pilot)


async def test_tui_generate_choose_apply_undo(indexed_repo: Path, encoder) -> None:
    from textual.message import Message
    from textual.widgets import DataTable, Static

    from assistant.ui.tui import AssistApp
    from assistant.ui.tui.widgets import CandidateTable

    original = (indexed_repo / "mathutils.py").read_text()
    app = AssistApp(make_session(indexed_repo, encoder), target="mathutils.py")
    posted: list[Message] = []
    async with app.run_test(size=(100, 32), message_hook=posted.append) as pilot:
        await ask(app, pilot)
        table = app.screen.query_one("#candidates", DataTable)
        assert table.row_count == 3 and app.screen.hits
        assert all(hit.example.path != "mathutils.py" for hit in app.screen.hits)
        posted.clear()
        await pilot.press("down")  # the candidates table has focus after generating
        await pilot.pause()
        # The table posts which candidate the cursor is on; the screen shows that one's code and diff.
        assert [m.position for m in messages(posted, CandidateTable.Highlighted)] == [1]
        assert app.screen.selected == 1
        assert app.screen.query_one("#code-pane").border_title == "Code #2"
        assert "v ** 2" in app.screen.query_one("#code", Static).content.code  # a rich Syntax
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert "v ** 2" in (indexed_repo / "mathutils.py").read_text()
        assert "no tests checked it" in app.screen.status.message  # untested code is said to be untested
        await pilot.press("ctrl+r")
        await pilot.pause()
        assert (indexed_repo / "mathutils.py").read_text() == original
    assert status(indexed_repo) == ""


async def test_tui_toggle_a_demonstration_off_and_regenerate(indexed_repo: Path, encoder) -> None:
    from textual.message import Message

    from assistant.ui.tui import AssistApp
    from assistant.ui.tui.widgets import DemonstrationList

    app = AssistApp(make_session(indexed_repo, encoder))
    posted: list[Message] = []
    async with app.run_test(size=(100, 32), message_hook=posted.append) as pilot:
        await ask(app, pilot)
        first = [hit.example.source for hit in app.session.state.result.demonstrations]
        assert len(first) == 2
        demos = app.screen.query_one("#demos", DemonstrationList)
        assert demos.border_title == "Demonstrations (2 of 2 on; space toggles)"
        await pilot.click("#demos")
        assert not messages(posted, DemonstrationList.Toggled)  # retrieval is not the user
        await pilot.press("home", "space")  # switch the best demonstration off
        await pilot.pause()
        # The list posts the demonstrations still on; the screen keeps them for the next generate.
        toggled = messages(posted, DemonstrationList.Toggled)
        assert [[hit.example.source for hit in m.chosen] for m in toggled] == [first[1:]]
        assert [hit.example.source for hit in app.screen.chosen] == first[1:]
        assert demos.border_title == "Demonstrations (1 of 2 on; space toggles)"
        await pilot.press("ctrl+g")
        await settle(app, pilot)
        assert [hit.example.source for hit in app.session.state.result.demonstrations] == first[1:]


async def test_tui_settings_that_change_retrieval_retrieve_again(indexed_repo: Path, encoder) -> None:
    from textual.widgets import Input

    from assistant.ui.tui import AssistApp

    app = AssistApp(make_session(indexed_repo, encoder))
    async with app.run_test(size=(100, 32)) as pilot:
        await ask(app, pilot)
        assert len(app.session.state.result.demonstrations) == 2
        await pilot.press("ctrl+o")
        await pilot.pause()
        app.screen.query_one("#k", Input).value = "1"
        await pilot.press("ctrl+s")
        await settle(app, pilot)
        await pilot.press("ctrl+g")  # the same requirement: before, the two demonstrations shown were sent again
        await settle(app, pilot)
        assert len(app.session.state.result.demonstrations) == 1 and len(app.screen.hits) == 1


async def test_tui_apply_over_unstaged_changes_asks_first(indexed_repo: Path, encoder) -> None:
    from assistant.ui.tui import AssistApp
    from assistant.ui.tui.screens import ConfirmScreen

    target = indexed_repo / "mathutils.py"
    target.write_text(target.read_text() + "# mine\n")
    mine = target.read_text()
    app = AssistApp(make_session(indexed_repo, encoder), target="mathutils.py")
    async with app.run_test(size=(100, 32)) as pilot:
        await ask(app, pilot)
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("n")
        await pilot.pause()
        assert target.read_text() == mine
        await pilot.press("ctrl+s")
        await pilot.pause()
        await pilot.press("y")
        await pilot.pause()
        assert "square_all" in target.read_text()
        await pilot.press("ctrl+r")
        await pilot.pause()
        assert target.read_text() == mine


async def test_tui_errors_are_notifications_and_escape_cancels(indexed_repo: Path, encoder) -> None:
    from textual.widgets import ProgressBar

    from assistant.errors import ModelError
    from assistant.ui.tui import AssistApp

    app = AssistApp(make_session(indexed_repo, encoder, backend=programs_backend(delay=0.05)))
    async with app.run_test(size=(100, 32)) as pilot:
        await start(app, pilot)
        await pilot.press("ctrl+g")  # nothing written yet
        await pilot.pause()
        assert "Write a requirement first" in last_notice(app)
        await type_requirement(pilot, REQUIREMENT)
        await pilot.press("ctrl+g")
        await pilot.pause(0.3)
        assert app.screen.busy == "Generating"
        assert app.screen.query_one("#progress", ProgressBar).display
        await pilot.press("escape")
        await settle(app, pilot)
        assert app.screen.busy is None
        assert "cancelled" in last_notice(app)
        assert app.session.state.result is None

        app.session._backend = programs_backend(fail=ModelError("the model server went away"))
        await pilot.click("#requirement")
        await pilot.press("ctrl+g")
        await settle(app, pilot)
        assert last_notice(app) == "the model server went away"
        assert app.is_running


async def test_tui_history_file_picker_tests_and_settings(indexed_repo: Path, encoder) -> None:
    from textual.widgets import Input, Select, Switch, TextArea

    from assistant.backends import BACKENDS
    from assistant.ui.tui import AssistApp

    session = make_session(indexed_repo, encoder, top_p=0.8)  # not in the dialog: saving must keep it
    session.record("generate", requirement="an older requirement")
    app = AssistApp(session)
    async with app.run_test(size=(100, 32)) as pilot:
        await start(app, pilot)
        box = app.screen.query_one("#requirement", TextArea)
        await type_requirement(pilot, "draft")
        await pilot.press("up")
        assert box.text == "an older requirement"
        await pilot.press("down")
        assert box.text == "draft"

        await pilot.press("ctrl+f")
        await pilot.pause()
        await pilot.press(*"mathu", "enter")
        await pilot.pause()
        assert app.screen.target == "mathutils.py"

        box.load_text(REQUIREMENT)
        await pilot.press("ctrl+g")
        await settle(app, pilot)
        await pilot.press("ctrl+t")
        await pilot.pause()
        app.screen.query_one("#tests-text", TextArea).load_text("assert square_all([3]) == [9]")
        await pilot.press("ctrl+s")
        await settle(app, pilot)
        assert app.session.state.result.candidates[0].scores["exec"].value == 1.0
        assert "1/1 tests passed" in last_notice(app)

        await pilot.press("ctrl+o")
        await pilot.pause()
        backends = app.screen.query_one("#backend", Select)
        assert [value for _, value in backends._options if value is not Select.BLANK] == list(BACKENDS)
        app.screen.query_one("#ranker", Select).value = "first"
        app.screen.query_one("#n", Input).value = "2"
        assert app.screen.query_one("#apis", Switch).value is False
        app.screen.query_one("#apis", Switch).value = True
        assert app.screen.query_one("#redraw", Switch).value is True  # on by default
        app.screen.query_one("#redraw", Switch).value = False
        assert app.screen.query_one("#fragments", Switch).value is False
        app.screen.query_one("#fragments", Switch).value = True
        assert app.screen.query_one("#own_file", Switch).value is True  # on by default
        app.screen.query_one("#own_file", Switch).value = False
        await pilot.press("ctrl+s")
        await settle(app, pilot)
        options = app.session.options
        assert options.ranker == "first" and options.n == 2 and options.apis and options.fragments
        assert options.redraw is False and not options.own_file
        assert options.top_p == 0.8
        assert app.session.state.result.rankers[0] == "first"

        await pilot.press("ctrl+l")
        await pilot.pause()
        await pilot.press("enter")  # the newest entry
        await pilot.pause()
        assert box.text == REQUIREMENT


async def test_tui_tests_editor_takes_multi_line_tests_and_refuses_bad_ones(indexed_repo: Path, encoder) -> None:
    from textual.widgets import Static, TextArea

    from assistant.ui.tui import AssistApp
    from assistant.ui.tui.screens import TestsEditor

    app = AssistApp(make_session(indexed_repo, encoder))
    async with app.run_test(size=(100, 32)) as pilot:
        await ask(app, pilot)
        await pilot.press("ctrl+t")
        await pilot.pause()
        editor = app.screen
        assert isinstance(editor, TestsEditor)
        editor.query_one("#tests-text", TextArea).load_text("assert square_all([1]) == [1]\nassert (\n")
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert app.screen is editor  # refused, with one line saying where
        error = str(editor.query_one("#tests-error", Static).render())
        assert error.startswith("the text does not parse (line 2") and "\n" not in error
        tests = "values = [3]\nassert square_all(values) == [9]\nassert square_all(\n    [],\n) == []\n"
        editor.query_one("#tests-text", TextArea).load_text(tests)
        await pilot.press("ctrl+s")
        await settle(app, pilot)
        assert app.screen.tests == [
            "values = [3]\nassert square_all(values) == [9]",
            "assert square_all(\n    [],\n) == []",
        ]
        assert "2/2 tests passed" in last_notice(app)
        await pilot.press("ctrl+t")
        await pilot.pause()
        app.screen.query_one("#tests-text", TextArea).load_text("  \n")
        await pilot.press("ctrl+s")  # empty: no tests
        await pilot.pause()
        assert app.screen.tests == []


def test_tui_does_not_import_typer() -> None:
    code = "import sys, assistant.ui.tui; print(sorted(m for m in sys.modules if m.split('.')[0] == 'typer'))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_tui_respects_no_color(monkeypatch: pytest.MonkeyPatch, indexed_repo: Path, encoder) -> None:
    from assistant.ui.tui import AssistApp

    monkeypatch.setenv("NO_COLOR", "1")
    assert AssistApp(make_session(indexed_repo, encoder)).no_color


def test_tui_command_needs_a_terminal(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from assistant.ui.cli import app

    result = CliRunner().invoke(app, ["tui", str(tmp_path)])
    assert result.exit_code == 2
    assert "needs a terminal" in result.output


# -- snapshots of the main screen (SVG, kept in tests/__snapshots__) -------------------------------------


def _snapshot_app(root: Path, encoder):
    from assistant.ui.tui import AssistApp

    git(root, "config", "user.name", "test")
    return AssistApp(make_session(root, encoder, seed=0), target="mathutils.py")


async def _generated(pilot) -> None:
    app = pilot.app
    await ask(app, pilot)
    await pilot.press("down")
    await pilot.pause()
    app.screen.set_message("3 candidates; ↑↓ in the table to compare, ctrl+s applies")  # its timing varies
    await pilot.pause()


@pytest.mark.parametrize("size", [(80, 24), (160, 45)], ids=["80x24", "160x45"])
def test_main_screen_snapshot(size, indexed_repo: Path, encoder, snap_compare) -> None:
    assert snap_compare(_snapshot_app(indexed_repo, encoder), terminal_size=size, run_before=_generated)


async def _zoomed(pilot) -> None:
    await _generated(pilot)
    await pilot.press("f11")  # the code pane takes the screen: the whole candidate at 80x24
    await pilot.pause()


def test_zoomed_code_snapshot(indexed_repo: Path, encoder, snap_compare) -> None:
    assert snap_compare(_snapshot_app(indexed_repo, encoder), terminal_size=(80, 24), run_before=_zoomed)


# -- the same flow with the default local model ----------------------------------------------------------


@pytest.mark.model
async def test_tui_with_the_default_model(indexed_repo: Path, encoder, backend) -> None:
    from assistant.ui.tui import AssistApp

    original = (indexed_repo / "mathutils.py").read_text()
    session = make_session(indexed_repo, encoder, backend=backend, n=2, max_new_tokens=96, seed=1)
    app = AssistApp(session, target="mathutils.py")
    async with app.run_test(size=(100, 32)) as pilot:
        await start(app, pilot)
        await type_requirement(pilot, REQUIREMENT)
        await pilot.press("ctrl+g")
        await settle(app, pilot)
        result = app.session.state.result
        assert result is not None and result.candidates, last_notice(app)
        assert result.model == backend.model and result.rankers[0] == "logprob"
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert (indexed_repo / "mathutils.py").read_text() != original
        await pilot.press("ctrl+r")
        await pilot.pause()
    assert (indexed_repo / "mathutils.py").read_text() == original
    assert status(indexed_repo) == ""


# -- filling a stub (issue 29) -------------------------------------------------------------------------------

STUB = 'def count_even(values):\n    """Return how many numbers in the list are even."""\n    ...\n'
STUB_PROGRAMS = [
    # The likeliest sample rewrites a neighbour as well: it must rank below the one that wrote only the body.
    ("def is_even(n):\n    return n % 2 == 1\n\n\ndef count_even(values):\n    return len(values)", -0.1),
    ("def count_even(values):\n    return sum(1 for v in values if v % 2 == 0)", -0.6),
]


@pytest.fixture
def stub_repo(indexed_repo: Path) -> Path:
    path = indexed_repo / "mathutils.py"
    path.write_text(path.read_text() + "\n\n" + STUB)
    git(indexed_repo, "commit", "-qam", "a stub")
    return indexed_repo


async def pick_stub(pilot) -> None:
    """Pick mathutils.py with ctrl+f, then its stub count_even with f3."""
    for keys in (["ctrl+f"], [*"mathu", "enter"], ["f3"], [*"count", "enter"]):
        await pilot.press(*keys)
        await pilot.pause()


def test_session_fills_a_stub_demotes_a_neighbour_rewrite_applies_only_the_body_and_undoes(
    stub_repo: Path, encoder
) -> None:
    session = make_session(stub_repo, encoder, backend=programs_backend(STUB_PROGRAMS), k=1)
    assert session.stubs("mathutils.py") == ["count_even"]
    original = (stub_repo / "mathutils.py").read_text()
    result = session.generate("", target="mathutils.py", function="count_even")
    assert result.function["function"] == "count_even"
    assert result.requirement == "Return how many numbers in the list are even."
    first, second = result.candidates
    assert first.candidate.dropped == () and second.candidate.dropped == ("rewrites is_even()",)
    assert first.scores["logprob"].value < second.scores["logprob"].value  # ranked first all the same
    assert "dropped: rewrites is_even()" in result.edits[1].actions
    with pytest.raises(UsageError, match="not available when filling a stub"):
        session.resample(0)

    session.apply(0)
    filled = original.replace("    ...\n", "    return sum(1 for v in values if v % 2 == 0)\n")
    assert (stub_repo / "mathutils.py").read_text() == filled
    assert session.state.result.edits == [None, None]  # no longer a stub
    with pytest.raises(UsageError, match="count_even is no longer a stub"):
        session.apply(1)
    session.undo()
    assert (stub_repo / "mathutils.py").read_text() == original
    assert session.state.result.edits[0] is not None  # a stub again: the edits are planned again


def test_session_ranks_a_stub_by_its_docstring_examples_when_no_tests_are_given(indexed_repo: Path, encoder) -> None:
    stub = 'def count_odd(values):\n    """How many numbers are odd.\n\n    >>> count_odd([1, 2, 3])\n    2\n'
    stub += '    """\n    ...\n'
    path = indexed_repo / "mathutils.py"
    path.write_text(path.read_text() + "\n\n" + stub)
    git(indexed_repo, "commit", "-qam", "a stub with an example")
    programs = [("def count_odd(values):\n    return len(values)", -0.1),  # likelier, and wrong by the example
                ("def count_odd(values):\n    return sum(v % 2 for v in values)", -0.6)]  # fmt: skip
    session = make_session(indexed_repo, encoder, backend=programs_backend(programs), k=1)
    result = session.generate("", target="mathutils.py", function="count_odd")
    assert session.state.tests == ["assert count_odd([1, 2, 3]) == 2"] and session.state.examples
    assert session.state.tests_label() == "the docstring's 1 example"
    # They do not order the candidates (measured: results/correctness-docstring-examples); they decide what is written.
    assert result.rankers[0] == "logprob" and "len(values)" in result.candidates[0].candidate.code
    assert [item.scores["exec"].value for item in result.candidates] == [0.0, 1.0]
    with pytest.raises(UsageError, match="candidate #1 did not pass the docstring's 1 example; #2 passed them"):
        session.apply(0)
    session.apply(1)


def test_session_says_the_examples_ran_on_no_candidate_where_the_module_does_not_import(
    indexed_repo: Path, encoder
) -> None:
    stub = 'def count_odd(values):\n    """How many numbers are odd.\n\n    >>> count_odd([1, 2, 3])\n    2\n'
    stub += '    """\n    ...\n'
    path = indexed_repo / "mathutils.py"
    path.write_text("import not_installed_dep\n" + path.read_text() + "\n\n" + stub)
    git(indexed_repo, "commit", "-qam", "a stub in a module that needs a package")
    programs = [("def count_odd(values):\n    return sum(v % 2 for v in values)", -0.6)]
    session = make_session(indexed_repo, encoder, backend=programs_backend(programs), k=1)
    session.generate("", target="mathutils.py", function="count_odd")
    said = session.may_apply(0)
    assert said is not None and said.startswith("the docstring's 1 example ran on no candidate: ")
    assert "ModuleNotFoundError: No module named 'not_installed_dep'" in said


def test_an_edit_planned_again_after_undo_keeps_the_imports_the_sample_wrote(stub_repo: Path, encoder) -> None:
    # The re-planned edit once dropped them (a candidate's code holds the function alone): NameError at run time.
    programs = [("import math\n\n\ndef count_even(values):\n    return math.fsum(v % 2 == 0 for v in values)", -0.1)]
    session = make_session(stub_repo, encoder, backend=programs_backend(programs), k=1)
    result = session.generate("", target="mathutils.py", function="count_even")
    assert result.edits[0].actions == ("fill count_even", "insert import math")
    session.apply(0)
    session.undo()
    assert session.state.result.edits[0].actions == ("fill count_even", "insert import math")


async def test_tui_picks_a_stub_with_f3_and_fills_it(stub_repo: Path, encoder) -> None:
    from assistant.ui.tui import AssistApp

    session = make_session(stub_repo, encoder, backend=programs_backend(STUB_PROGRAMS), k=1)
    app = AssistApp(session)
    async with app.run_test(size=(100, 32)) as pilot:
        await start(app, pilot)
        await pilot.press("f3")  # no target file yet: every stub of the repo is offered, with its file
        await settle(app, pilot)
        await pilot.press(*"count", "enter")
        await pilot.pause()
        assert (app.screen.target, app.screen.function) == ("mathutils.py", "count_even")
        await pilot.press("ctrl+f", *"words", "enter")  # another file: the stub stays with its own
        await pilot.pause()
        assert (app.screen.target, app.screen.function) == ("text/words.py", None)
        await pilot.press("ctrl+f", "ctrl+u", *"mathu", "enter")
        await pilot.pause()
        await pilot.press("f3", *"count", "enter")  # with a target file: its own stubs
        await pilot.pause()
        assert app.screen.function == "count_even"
        await pilot.press("ctrl+g")
        await settle(app, pilot)
        result = app.session.state.result
        assert result.function["function"] == "count_even" and len(result.candidates) == 2
        assert result.edits[0].actions == ("fill count_even",)


def test_session_stub_fill_with_fragments_shows_the_repos_code_instead_of_demonstrations(
    stub_repo: Path, encoder
) -> None:
    """The settings screen's "Stubs: code fragments" switch does what `generate --fragments` does."""
    backend = programs_backend(STUB_PROGRAMS)
    session = make_session(stub_repo, encoder, backend=backend, k=1, fragments=True)
    assert session.retrieve("Count the even numbers.", "mathutils.py", function="count_even") == []
    result = session.generate("", target="mathutils.py", function="count_even", demonstrations=[])
    sent = json.dumps(backend.prompts[-1].to_json())
    assert result.demonstrations == [] and "Code from other places of this repository that may help:" in sent
    assert "# text/words.py:1" in sent and "def word_count" in sent
    plain = programs_backend(STUB_PROGRAMS)
    make_session(stub_repo, encoder, backend=plain, k=1).generate("", target="mathutils.py", function="count_even")
    assert "Code from other places" not in json.dumps(plain.prompts[-1].to_json())


def test_session_stub_fill_honours_a_max_new_tokens_set_for_the_session(stub_repo: Path, encoder) -> None:
    """`assist tui --max-new-tokens 512` (or the settings screen) reaches a stub fill; left empty, the limit is sized
    to the docstring (and free generation gets the default)."""
    backend = programs_backend(STUB_PROGRAMS)
    session = make_session(stub_repo, encoder, backend=backend, k=1, max_new_tokens=512)
    session.generate("", target="mathutils.py", function="count_even")
    assert backend.params[-1].max_new_tokens == 512
    automatic = programs_backend(STUB_PROGRAMS)
    make_session(stub_repo, encoder, backend=automatic, k=1).generate("", target="mathutils.py", function="count_even")
    assert automatic.params[-1].max_new_tokens < 512


async def test_tui_says_when_a_cut_off_sample_went_round_in_a_loop(stub_repo: Path, encoder) -> None:
    from assistant.ui.tui import AssistApp

    loop = "def count_even(values):\n" + "    total += 1\n" * 60  # cut at 64 tokens (256 characters)
    session = make_session(
        stub_repo, encoder, backend=ScriptedBackend([loop], scores=False), k=1, n=1, temperature=0, max_new_tokens=64
    )
    app = AssistApp(session)
    async with app.run_test(size=(100, 32)) as pilot:
        await start(app, pilot)
        await pick_stub(pilot)
        await pilot.press("ctrl+g")
        await settle(app, pilot)
        assert app.session.state.result.cut_off[0].repeating
        notice = " ".join(last_notice(app).split())
    assert "1 of 1 sample ran into the 64-token limit" in notice and "it went round in a loop" in notice
