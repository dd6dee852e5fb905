"""Issue 66 item 1 in the TUI: a plain request's candidates never rewrite the target file's own definitions unless
the user allows it, as `generate --replace NAME` does on the command line. `f4` (or "Allow rewriting a definition" in
the ctrl+p palette) picks the definitions of the target file the next requests may rewrite; they belong to that file.

A scripted backend (no model); git, the file writes and the Textual app (driven by its Pilot) are real."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from assistant.errors import UsageError
from assistant.ui.session import Options, Session

from .conftest import ScriptedBackend, assist_here, enter_repo, git, register_scripted
from .test_edit_rules import segments
from .test_tui import last_notice, settle, start, type_requirement

TARGET = "shop/cart.py"
CART = '''"""A shopping cart."""


def helper(price):
    """The price in cents."""
    return round(price * 100)


class Cart:
    def __init__(self):
        self.prices = []

    def total(self):
        return sum(self.prices)
'''
# What a small model writes: the function asked for, and `helper` re-typed with another body.
WRITTEN = '''
def helper(price):
    """The price in cents."""
    return int(price * 100)


def cents_total(prices):
    """The total of the prices, in cents."""
    return sum(helper(price) for price in prices)
'''
RETYPED = WRITTEN + "```"  # a scripted reply ends its code block
# The same, with `Cart.total` re-typed too.
RETYPED_CLASS = WRITTEN + "\n\nclass Cart:\n    def total(self):\n        return cents_total(self.prices)\n```"
OTHER = 'def other():\n    """Return one."""\n    ...\n'  # a stub
REQUIREMENT = "the total of a list of prices, in cents"


@pytest.fixture
def cart(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    files = {"shop/__init__.py": "", TARGET: CART, "shop/other.py": OTHER}
    return enter_repo(monkeypatch, tmp_path / "cart", files)


def session_for(root: Path, replies: list) -> Session:
    return Session(root, options=Options(n=1, k=0, ranker="logprob"), backend=ScriptedBackend(replies))


async def pick(pilot, key: str, query: str) -> None:
    """Open a picker with `key`, type `query` and pick what it highlights (with no query: its "none" entry)."""
    await pilot.press(key)
    await pilot.pause()
    await pilot.press(*query, "enter")
    await pilot.pause()


async def request(app, pilot) -> None:
    """Start the app, type the requirement and generate, waiting for the result."""
    await start(app, pilot)
    await type_requirement(pilot, REQUIREMENT)
    await pilot.press("ctrl+g")
    await settle(app, pilot)


async def test_a_plain_request_leaves_the_files_definitions_as_they_are(cart: Path) -> None:
    from assistant.ui.tui import AssistApp

    path = cart / TARGET
    session = session_for(cart, [RETYPED])
    app = AssistApp(session, target=TARGET)
    async with app.run_test(size=(100, 32)) as pilot:
        await request(app, pilot)
        assert "dropped: rewrites helper()" in session.state.result.edits[0].actions
        await pilot.press("ctrl+s")
        await settle(app, pilot)
    applied = path.read_text(encoding="utf-8")
    assert segments(applied)["helper"] == segments(CART)["helper"]  # byte for byte
    assert "def cents_total" in applied


async def test_when_every_candidate_only_rewrote_a_definition_the_code_pane_names_it_and_the_way_out(
    cart: Path,
) -> None:
    from textual.widgets import Static

    from assistant.ui.tui import AssistApp

    only_helper = WRITTEN.split("def cents_total")[0] + "```"
    session = session_for(cart, [only_helper])
    app = AssistApp(session, target=TARGET)
    async with app.run_test(size=(100, 32)) as pilot:
        await request(app, pilot)
        assert session.state.result.candidates == [] and session.state.result.rewrote == ["helper"]
        shown = str(app.screen.query_one("#code", Static).content)
    assert shown.startswith("No candidate left: each only rewrote helper, which the file has already.")
    assert "allow rewriting it (f4)" in shown and "f3" not in shown  # helper is no stub
    assert (cart / TARGET).read_text(encoding="utf-8") == CART


def test_the_hint_points_a_stub_among_the_rewritten_to_f3() -> None:
    from assistant.core.generation import GenerateResult
    from assistant.ui.tui.main_screen import none_left

    result = GenerateResult(
        requirement="r", model="m", backend="b", retriever="none", rankers=["logprob"], demonstrations=[],
        candidates=[], edits=[], prompt=None, prompt_tokens=1, samples=2,
        dropped={"only rewrote existing code": 2}, rewrote=["helper", "other"],
    )  # fmt: skip
    assert none_left(result, ["other"]).endswith("other is a stub: to fill it, pick it (f3).")
    assert "f3" not in none_left(result, [])
    assert none_left(replace(result, dropped={"no change": 2})).startswith("No candidate parsed")


async def test_f4_lets_a_plain_request_rewrite_the_picked_definition(cart: Path) -> None:
    from assistant.ui.tui import AssistApp

    path = cart / TARGET
    session = session_for(cart, [RETYPED])
    app = AssistApp(session, target=TARGET)
    async with app.run_test(size=(100, 32)) as pilot:
        await start(app, pilot)
        await pick(pilot, "f4", "helper")
        assert app.screen.may_rewrite == ["helper"] and app.screen.info.border_title == "May rewrite: helper"
        await type_requirement(pilot, REQUIREMENT)
        await pilot.press("ctrl+g")
        await settle(app, pilot)
        assert "replace helper" in session.state.result.edits[0].actions
        await pilot.press("ctrl+s")
        await settle(app, pilot)
        assert app.screen.may_rewrite == ["helper"]  # kept for the next request to the same file
    applied = path.read_text(encoding="utf-8")
    assert segments(applied)["helper"] == segments(WRITTEN)["helper"]
    assert "def cents_total" in applied


def test_the_session_keeps_the_rule_when_it_plans_again_and_resamples(cart: Path) -> None:
    session = session_for(cart, [RETYPED_CLASS])
    result = session.generate(REQUIREMENT, target=TARGET, replace=["Cart.total"])
    actions = result.edits[0].actions
    assert "replace Cart.total" in actions and "dropped: rewrites helper()" in actions
    session.apply(0)
    assert "cents_total(self.prices)" in (cart / TARGET).read_text(encoding="utf-8")
    session.undo()  # the edit is planned again against the file as it is, by the same rule
    assert session.state.result.edits[0].actions == actions
    assert session.resample(0).edits[0].actions == actions
    assert session.definitions(TARGET) == ["helper", "Cart", "Cart.__init__", "Cart.total"]
    # A request prepared without the names is not reused for one with them.
    session.prepare(REQUIREMENT, TARGET, None)
    result = session.generate(REQUIREMENT, target=TARGET, replace=["helper"])
    assert "replace helper" in result.edits[0].actions and "dropped: rewrites Cart.total()" in result.edits[0].actions


async def test_the_definitions_that_may_be_rewritten_belong_to_the_target_file(cart: Path) -> None:
    from assistant.ui.tui import AssistApp
    from assistant.ui.tui.screens import FilePicker

    app = AssistApp(session_for(cart, [RETYPED]))
    async with app.run_test(size=(100, 32)) as pilot:
        await start(app, pilot)
        await pilot.press("f4")
        await pilot.pause()
        assert "Pick the target file first (ctrl+f); then f4 lists its definitions" in last_notice(app)
        await pick(pilot, "ctrl+f", "cart")
        await pick(pilot, "f4", "total")
        await pick(pilot, "f4", "helper")
        screen = app.screen
        assert screen.may_rewrite == ["Cart.total", "helper"]
        assert screen.info.border_title == "May rewrite: Cart.total, helper"
        await pick(pilot, "f4", "total")  # picked again: taken back
        assert screen.may_rewrite == ["helper"] and "May rewrite: helper" in screen.status.message
        await pick(pilot, "ctrl+f", "cart")  # the same file again: kept
        assert screen.may_rewrite == ["helper"]
        await pick(pilot, "ctrl+f", "other")  # another file: cleared
        assert screen.target == "shop/other.py" and screen.may_rewrite == [] and screen.info.border_title is None
        await pilot.press("f4")
        await pilot.pause()
        assert isinstance(app.screen, FilePicker) and app.screen.files == ["other"]  # the new target's definitions
        await pilot.press("enter")  # "(none)" first, highlighted
        await pilot.pause()
        await pick(pilot, "f4", "other")
        assert screen.may_rewrite == ["other"]
        await pick(pilot, "f4", "")  # "(none)" takes them all back
        assert screen.may_rewrite == [] and "May rewrite nothing" in screen.status.message
        # Filling a stub (f3) rewrites its body and nothing else: the choice is cleared, and f4 says why it is off.
        await pick(pilot, "f4", "other")
        await pick(pilot, "f3", "other")
        assert screen.function == "other" and screen.may_rewrite == []
        assert screen.status.message == "Filling other: ctrl+g writes its body; nothing else may be rewritten"
        await pilot.press("f4")
        await pilot.pause()
        assert app.screen is screen and "Filling other rewrites its body only" in last_notice(app)


async def test_a_name_the_file_no_longer_defines_is_refused_as_generate_replace_refuses_it(
    cart: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from assistant.ui.tui import AssistApp

    register_scripted(monkeypatch, ScriptedBackend([RETYPED]))
    args = ("generate", REQUIREMENT, "--file", TARGET, "-k", "0", "--backend", "scripted", "--replace", "no_such")
    cli = assist_here(*args, cwd=cart)
    assert cli.returncode == 2 and len(cli.stderr.strip().splitlines()) == 1, cli.stderr
    session = session_for(cart, [RETYPED])
    with pytest.raises(UsageError) as refused:
        session.generate(REQUIREMENT, target=TARGET, replace=["no_such"])
    error = str(refused.value)
    assert error.startswith("there is no function or class 'no_such' in shop/cart.py to replace")
    assert cli.stderr.strip().endswith(error)  # the CLI's line is this error, after its prefix
    # In the TUI: `helper` picked, then renamed in the file; the next request is refused before anything is sampled.
    app = AssistApp(session, target=TARGET)
    async with app.run_test(size=(100, 32)) as pilot:
        await start(app, pilot)
        await pick(pilot, "f4", "helper")
        (cart / TARGET).write_text(CART.replace("helper", "to_cents"), encoding="utf-8")
        git(cart, "commit", "-qam", "helper renamed")
        await type_requirement(pilot, REQUIREMENT)
        await pilot.press("ctrl+g")
        await settle(app, pilot)
        # The library's line, as for no_such above (it lists what the file defines, methods as `Class.method`).
        stale = "there is no function or class 'helper' in shop/cart.py to replace (it defines: to_cents, Cart, "
        assert last_notice(app) == stale + "Cart.__init__, Cart.total)"
        assert session.pipeline.loaded_backend.calls == 0 and session.state.result is None
