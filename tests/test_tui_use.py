"""The TUI as a new user meets it (issues 68 and 69): Escape cancels in under a second and says so, the key table
shows how to quit, the settings survive a restart, the Backend field names the engine that runs, and at 80x24 the
candidate's code can be zoomed and read whole."""

from __future__ import annotations

import asyncio
import time
import tomllib
from pathlib import Path

from assistant.config import user_config_path

from .conftest import ScriptedBackend
from .test_cancel import CANCEL_LIMIT_S
from .test_tui import PROGRAMS, REQUIREMENT, ask, last_notice, make_session, programs_backend, settle, start
from .test_tui import indexed_repo as indexed_repo  # the fixture, for these tests too


def slow_backend() -> ScriptedBackend:
    """A generator that reports its progress 20 times a second and would take 60 s to finish: a model's pace."""
    return ScriptedBackend(list(PROGRAMS), delay=0.05, steps=400, tokens=5, scores=False)


async def cancel_latency(app, pilot) -> float:
    """Press Escape while generating; the seconds until the worker thread has ended (the job's `busy` clears)."""
    await start(app, pilot)
    await pilot.click("#requirement")
    await pilot.press(*REQUIREMENT)
    await pilot.press("ctrl+g")
    await pilot.pause(0.5)
    assert app.screen.busy == "Generating"
    pressed = time.monotonic()
    await pilot.press("escape")
    while app.screen.busy is not None and time.monotonic() - pressed < 5:
        await asyncio.sleep(0.02)
    return time.monotonic() - pressed


async def test_escape_ends_generation_within_seconds_and_the_status_says_cancelled(indexed_repo: Path, encoder):
    from assistant.ui.tui import AssistApp

    app = AssistApp(make_session(indexed_repo, encoder, backend=slow_backend()))
    async with app.run_test(size=(100, 32)) as pilot:
        seconds = await cancel_latency(app, pilot)
        await pilot.pause()
        assert seconds < CANCEL_LIMIT_S
        # Before: the line kept "Cancelling Generating…" after the job had ended, as if it never finished.
        assert app.screen.status.message == "Generating cancelled"
        assert "cancelled" in last_notice(app)
        assert app.session.state.result is None
        assert not [w for w in app.workers if w.is_running]


async def test_the_key_table_shows_how_to_quit(indexed_repo: Path, encoder) -> None:
    from textual.widgets import Footer

    from assistant.ui.tui import AssistApp

    app = AssistApp(make_session(indexed_repo, encoder))
    async with app.run_test(size=(80, 24)) as pilot:
        await start(app, pilot)
        shown = [binding for (_, binding, enabled, _) in app.active_bindings.values() if binding.show]
        assert any(b.description == "Quit" and b.action == "app.quit" for b in shown)
        assert app.screen.query_one(Footer).display
        visible = {key.description for key in app.screen.query("FooterKey") if key.region.right <= 80}
        assert {"Quit", "Generate", "Zoom"} <= visible  # on screen at 80 columns, not cut off the edge
        await pilot.press("ctrl+q")
        await pilot.pause()
    assert app.return_code == 0 and not app.is_running


async def test_settings_are_saved_to_the_user_config_and_survive_a_restart(indexed_repo: Path, encoder) -> None:
    from textual.widgets import Input

    from assistant.ui.session import Session
    from assistant.ui.tui import AssistApp

    repo_file = indexed_repo / ".assist.toml"
    app = AssistApp(Session(indexed_repo, backend=programs_backend(), encoder=encoder))
    async with app.run_test(size=(100, 32)) as pilot:
        await start(app, pilot)
        await pilot.press("ctrl+o")
        await pilot.pause()
        app.screen.query_one("#n", Input).value = "4"
        app.screen.query_one("#temperature", Input).value = "0.6"
        await pilot.press("ctrl+s")
        await settle(app, pilot)
        assert app.session.options.n == 4
    saved = tomllib.loads(user_config_path().read_text())
    assert saved["generate"] == {"n": 4, "temperature": 0.6}  # only what was changed
    assert not repo_file.exists()
    again = Session(indexed_repo, backend=programs_backend(), encoder=encoder)  # a restart reads the file
    assert again.options.n == 4 and again.options.temperature == 0.6


class EngineBackend(ScriptedBackend):
    """What the local backend's default engine says it is."""

    name = "local-ov"
    description = "the local model through OpenVINO int8 on this machine's CPU (the default local engine)"


async def test_the_backend_field_names_the_engine_that_runs(indexed_repo: Path, encoder) -> None:
    from textual.widgets import Select

    from assistant.ui.tui import AssistApp

    backend = EngineBackend(list(PROGRAMS), tokens=5, scores=False)
    app = AssistApp(make_session(indexed_repo, encoder, backend=backend))
    async with app.run_test(size=(100, 32)) as pilot:
        await start(app, pilot)
        await pilot.press("ctrl+o")
        await pilot.pause()
        select = app.screen.query_one("#backend", Select)
        shown = dict((value, str(label)) for label, value in select._options)["local"]
        assert "OpenVINO" in shown and "transformers" not in shown


LONG = "def square_all(values):\n    return [value * value for value in values if value is not None]  # " + "x" * 90


async def test_at_80x24_f11_zooms_the_code_pane_and_long_lines_wrap(indexed_repo: Path, encoder) -> None:
    from assistant.ui.tui import AssistApp

    programs = [(LONG + "\n" + "\n".join(f"    # line {i}" for i in range(12)), -0.1)]
    app = AssistApp(make_session(indexed_repo, encoder, backend=programs_backend(programs), n=1))
    async with app.run_test(size=(80, 24)) as pilot:
        await ask(app, pilot)
        pane = app.screen.query_one("#code-pane")
        assert pane.size.height < 8  # the few lines left to it at 80x24
        await pilot.press("f11")
        await pilot.pause()
        assert app.screen.maximized is pane and app.focused is pane
        assert pane.size.height >= 18
        code = app.screen.query_one("#code")
        assert code.virtual_size.width <= pane.size.width  # wrapped, not cut at the pane's edge
        assert code.virtual_size.height >= 16  # the long line took more than one row
        await pilot.press("f11")
        await pilot.pause()
        assert app.screen.maximized is None


def test_saving_keeps_the_user_configs_other_keys_and_removes_a_cleared_one(tmp_path: Path) -> None:
    from assistant.ui.tui.saved import save_user_settings

    path = tmp_path / "config.toml"
    path.write_text('backend = "openai"\nmodel = "big"\n\n[openai]\nbase_url = "http://127.0.0.1:8080/v1"\n')
    save_user_settings({"generate.n": 7, "model": None, "generate.ranker": 'exec "x"'}, path)
    assert tomllib.loads(path.read_text()) == {
        "backend": "openai",
        "openai": {"base_url": "http://127.0.0.1:8080/v1"},
        "generate": {"n": 7, "ranker": 'exec "x"'},
    }
