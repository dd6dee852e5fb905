from assistant.ui.console import ProgressUI


def test_hidden_progress_logs_a_line_per_tenth_when_asked(capsys):
    with ProgressUI(enabled=False, plain=True) as ui:
        for done in range(101):
            ui("parse", done, 100)
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == "Parsing files: 0/100" and len(lines) == 11
    # After the first, each line says the rate and what is left; the last only the rate.
    assert lines[5].startswith("Parsing files: 50/100 (") and "/min, ~0m00s left)" in lines[5]
    assert lines[-1].startswith("Parsing files: 100/100 (") and lines[-1].endswith("/min)")


def test_a_resumed_stage_counts_only_this_runs_rate(capsys, monkeypatch):
    clock = iter([0.0, 60.0, 120.0])
    monkeypatch.setattr("assistant.ui.console.time.monotonic", lambda: next(clock))
    with ProgressUI(enabled=False, plain=True) as ui:
        ui("label", 500, 1000)  # half was cached
        ui("label", 600, 1000)
        ui("label", 700, 1000)
    lines = capsys.readouterr().err.splitlines()
    assert lines == [
        "Labeling pairs with the LLM: 500/1000",
        "Labeling pairs with the LLM: 600/1000 (100.0/min, ~4m00s left)",
        "Labeling pairs with the LLM: 700/1000 (100.0/min, ~3m00s left)",
    ]


def test_the_rate_after_a_sweep_through_cached_items_is_the_slow_items_rate(capsys, monkeypatch):
    now = [0.0]
    monkeypatch.setattr("assistant.ui.console.time.monotonic", lambda: now[0])
    with ProgressUI(enabled=False, plain=True) as ui:
        ui("generate", 0, 1164)
        for done in range(1, 235):  # a resumed benchmark: 234 cached items in 47 s
            now[0] = done * 0.2
            ui("generate", done, 1164)
        for i in range(1, 11):  # then one item every 76 s
            now[0] = 60 + 76 * i
            ui("generate", 234 + i, 1164)
    last = capsys.readouterr().err.splitlines()[-1]
    # Over the whole stage it would read 17.9/min and ~51m left; the last five minutes say 0.8/min, ~19 hours.
    assert last.startswith("Generating candidates: 244/1164 (0.8/min, ~19h"), last


def test_hidden_progress_is_silent_by_default(capsys):
    with ProgressUI(enabled=False) as ui:
        ui("encode", 5, 10)
    assert capsys.readouterr().err == ""


def test_hidden_progress_logs_at_least_once_a_minute_while_work_moves(capsys, monkeypatch):
    now = [0.0]
    monkeypatch.setattr("assistant.ui.console.time.monotonic", lambda: now[0])
    with ProgressUI(enabled=False, plain=True) as ui:
        # the first line; 30 s later: too soon; 61 s after the first: a line; 29 s later: too soon; a minute
        # after the last line, with work done since: a line; a minute later, nothing moved: none; then it moved
        for clock, done in [(0, 0), (30, 1), (61, 2), (90, 3), (200, 3), (300, 3), (301, 4)]:
            now[0] = float(clock)
            ui("label", done, 1000)
    lines = capsys.readouterr().err.splitlines()
    assert [line.split(" (")[0] for line in lines] == [
        "Labeling pairs with the LLM: 0/1000",
        "Labeling pairs with the LLM: 2/1000",
        "Labeling pairs with the LLM: 3/1000",
        "Labeling pairs with the LLM: 4/1000",
    ]


def test_control_characters_in_printed_text_are_written_out_not_sent() -> None:
    # A repo's docstring or a candidate may hold ESC sequences: retitle the terminal, hide text (SGR 8), or C1 CSI.
    import io
    import json

    from assistant.ui import console

    assert isinstance(console.out, console.SafeConsole) and isinstance(console.err, console.SafeConsole)
    screen = console.SafeConsole(file=io.StringIO(), force_terminal=True, highlight=False, markup=False)
    screen.print("a\x1b]0;TITLE\x07 b\x1b[8m c\x9b1m\td", style="bold")
    shown = screen.file.getvalue()
    assert shown.startswith("\x1b[1m") and shown.endswith("\x1b[0m\n")  # rich's own styling still reaches it
    assert shown.count("\x1b") == 2 and "\x9b" not in shown and "\x07" not in shown
    assert "a\\u001b]0;TITLE\\u0007 b\\u001b[8m c\\u009b1m" in shown  # BEL too (rich alone dropped it unseen)
    piped = console.SafeConsole(file=io.StringIO(), highlight=False, markup=False)
    piped.print(json.dumps({"code": "x\x9by\u00e9\tz\u200b\b"}, ensure_ascii=False))
    assert json.loads(piped.file.getvalue()) == {"code": "x\x9by\u00e9\tz\u200b\b"}  # --json keeps its meaning


def test_bidi_overrides_are_written_out_and_a_limited_read_does_not_reserve_its_limit(tmp_path) -> None:
    from assistant.paths import read_regular_file
    from assistant.ui.console import printable

    assert printable("if admin\u202e {") == "if admin\\u202e {" and printable("caf\u00e9\t") == "caf\u00e9\t"
    path = tmp_path / "f"
    path.write_bytes(b"x" * 3_000_000)
    assert read_regular_file(path, limit=3_000_000) == b"x" * 3_000_000
    assert read_regular_file(path, limit=2_999_999) is None
    assert read_regular_file(path, limit=1 << 40) == b"x" * 3_000_000  # a terabyte limit reserves nothing
