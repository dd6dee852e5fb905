from assistant.console import ProgressUI


def test_hidden_progress_logs_a_line_per_tenth_when_asked(capsys):
    with ProgressUI(enabled=False, plain=True) as ui:
        for done in range(101):
            ui("parse", done, 100)
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == "Parsing files: 0/100" and lines[-1] == "Parsing files: 100/100" and len(lines) == 11


def test_hidden_progress_is_silent_by_default(capsys):
    with ProgressUI(enabled=False) as ui:
        ui("encode", 5, 10)
    assert capsys.readouterr().err == ""
