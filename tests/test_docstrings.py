"""Finding definitions without docstrings, and inserting docstrings by syntax position."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from assistant.docstrings import (
    detect_style,
    find_missing,
    insert_docstrings,
    line_length,
    read_python,
    render,
)
from assistant.errors import UsageError

SOURCE = '''import os


@decorator
def f(a: dict[str, int] = {"x": 1},
      b=lambda: 2) -> int:  # keep me
    # a comment
    return 1


def g(): return 2


class Outer:
    """Documented."""

    class Inner: pass

    async def run(self):
        def helper():
            pass
        return helper


async def documented():
    """Has one."""
'''


def test_find_missing_lists_functions_methods_and_classes_in_file_order() -> None:
    found = [(t.qualname, t.kind, t.line, t.one_line) for t in find_missing(SOURCE)]
    assert found == [
        ("f", "function", 5, False),
        ("g", "function", 11, True),
        ("Outer.Inner", "class", 17, True),
        ("Outer.run", "async method", 19, False),
    ]  # closures (helper) are left out; documented definitions too
    assert find_missing(SOURCE)[0].code.startswith("@decorator\ndef f(")


def test_insert_keeps_everything_else_and_is_idempotent() -> None:
    docs = {"f": "Return one.", "g": "Return two.", "Outer.Inner": "Nothing inside.", "Outer.run": "Run it."}
    out = insert_docstrings(SOURCE, docs)
    assert find_missing(out) == []
    tree = ast.parse(out)
    names = {n.name: ast.get_docstring(n) for n in ast.walk(tree) if hasattr(n, "name") and hasattr(n, "body")}
    assert names["f"] == "Return one." and names["g"] == "Return two." and names["Inner"] == "Nothing inside."
    assert '      b=lambda: 2) -> int:  # keep me\n    """Return one."""\n    # a comment\n' in out
    assert 'def g():\n    """Return two."""\n    return 2\n' in out
    assert '    class Inner:\n        """Nothing inside."""\n        pass\n' in out
    # Apart from the split one-line definitions, only lines were added: the original ones stay, in order.
    kept = iter(out.splitlines())
    untouched = [line for line in SOURCE.splitlines() if "def g()" not in line and "Inner" not in line]
    assert all(any(line == other for other in kept) for line in untouched)
    assert insert_docstrings(out, {}) == out


def test_tabs_and_windows_line_endings_are_kept() -> None:
    source = "class A:\r\n\tdef m(self):\r\n\t\treturn 1\r\n\tclass B: pass\r\n"
    out = insert_docstrings(source, {"A": "An A.", "A.m": "Return one.", "A.B": "A B."})
    assert "\n" not in out.replace("\r\n", "")
    assert '\tdef m(self):\r\n\t\t"""Return one."""\r\n\t\treturn 1\r\n' in out
    assert '\tclass B:\r\n\t\t"""A B."""\r\n\t\tpass\r\n' in out
    assert find_missing(out) == []


def test_render_wraps_to_the_line_length_and_keeps_sections() -> None:
    long = "Compute the thing. " * 8 + "\n\nArgs:\n    x: the input.\n\nReturns:\n    The output."
    lines = render(long, "    ", width=60)
    assert all(len(line) <= 60 for line in lines)
    assert lines[0].startswith('    """') and lines[-1] == '    """'
    assert "    Args:" in lines and "        x: the input." in lines
    assert render("Short.", "    ") == ['    """Short."""']
    assert render('Say """hi""".', "")[0] == '"""Say \\"\\"\\"hi\\"\\"\\"."""'


def test_detect_style() -> None:
    google = "Do it.\n\nArgs:\n    x: a thing.\n\nReturns:\n    Another."
    numpy = "Do it.\n\nParameters\n----------\nx : int\n    A thing."
    rest = "Do it.\n\n:param x: a thing.\n:returns: another."
    assert detect_style([google, google, "Plain."]) == "google"
    assert detect_style([numpy, numpy, numpy, "Plain."]) == "numpy"
    assert detect_style([rest, rest, "x"]) == "rest"
    assert detect_style(["One line.", "Another line."]) == "plain"


def test_line_length_from_the_repo_config(tmp_path: Path) -> None:
    assert line_length(tmp_path) == 88
    (tmp_path / "setup.cfg").write_text("[flake8]\nmax-line-length = 100\n")
    assert line_length(tmp_path) == 100
    (tmp_path / "pyproject.toml").write_text("[tool.black]\nline-length = 79\n")
    assert line_length(tmp_path) == 79


def test_unreadable_files_are_skipped_with_a_reason(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("def f(:\n")
    with pytest.raises(UsageError, match="does not parse"):
        read_python(bad)
    latin = tmp_path / "latin.py"
    latin.write_bytes(b"# caf\xe9\ndef f():\n    pass\n")
    with pytest.raises(UsageError, match="not UTF-8"):
        read_python(latin)


# -- the CLI's check mode and the plain git hook (no model) ----------------------------------------------


def _run(args: list[str], cwd: Path):
    import os

    from typer.testing import CliRunner

    from assistant.cli import app

    old = os.getcwd()
    os.chdir(cwd)
    try:
        return CliRunner().invoke(app, args)
    finally:
        os.chdir(old)


def test_check_lists_what_is_missing_and_fails(scratch_repo: Path) -> None:
    (scratch_repo / "new.py").write_text(
        "def f():\n    return 1\n\n\nclass A:\n    async def go(self):\n        pass\n"
    )
    result = _run(["docstring", "--check", "new.py", "mathutils.py"], scratch_repo)
    assert result.exit_code == 1
    assert "new.py:1: function f has no docstring" in result.output
    assert "new.py:5: class A has no docstring" in result.output
    assert "new.py:6: async method A.go has no docstring" in result.output
    assert "mathutils" not in result.output.split("lack a docstring")[0]
    assert _run(["docstring", "--check", "mathutils.py"], scratch_repo).exit_code == 0


def test_check_staged_reads_the_index_not_the_working_tree(scratch_repo: Path) -> None:
    from .conftest import git

    path = scratch_repo / "staged.py"
    path.write_text("def f():\n    return 1\n")
    git(scratch_repo, "add", "staged.py")
    path.write_text('def f():\n    """Documented, but not staged."""\n    return 1\n')
    result = _run(["docstring", "--check", "--staged"], scratch_repo)
    assert result.exit_code == 1 and "staged.py:1: function f has no docstring" in result.output
    (scratch_repo / "broken.py").write_text("def broken(:\n")
    git(scratch_repo, "add", "broken.py")
    result = _run(["docstring", "--check", "--staged"], scratch_repo)
    assert "broken.py does not parse (line 1: invalid syntax), skipped" in result.output


def test_hook_install_refuses_a_foreign_hook_and_uninstalls_its_own(scratch_repo: Path) -> None:
    hook = scratch_repo / ".git" / "hooks" / "pre-commit"
    hook.parent.mkdir(parents=True, exist_ok=True)
    hook.write_text("#!/bin/sh\necho mine\n")
    result = _run(["hook", "install"], scratch_repo)
    assert result.exit_code == 2 and "was not written by assist" in result.output
    assert hook.read_text() == "#!/bin/sh\necho mine\n"
    hook.unlink()
    assert _run(["hook", "install", "--check-only"], scratch_repo).exit_code == 0
    assert "docstring --staged --check" in hook.read_text() and hook.stat().st_mode & 0o111
    assert _run(["hook", "install"], scratch_repo).exit_code == 0  # its own hook may be replaced
    assert "--write --fail-on-change" in hook.read_text()
    assert _run(["hook", "uninstall"], scratch_repo).exit_code == 0
    assert not hook.exists()


def test_the_check_hook_blocks_a_commit_with_undocumented_code(scratch_repo: Path) -> None:
    import subprocess

    from .conftest import git

    assert _run(["hook", "install", "--check-only"], scratch_repo).exit_code == 0
    (scratch_repo / "bare.py").write_text("def f():\n    return 1\n")
    git(scratch_repo, "add", "bare.py")
    commit = subprocess.run(
        ["git", "-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-qm", "bare"],
        cwd=scratch_repo,
        capture_output=True,
        text=True,
    )
    assert commit.returncode != 0
    assert "bare.py:1: function f has no docstring" in commit.stdout + commit.stderr


# -- generation: cleaning replies, and one real docstring from the default model ------------------------


def test_clean_keeps_the_docstring_and_drops_what_small_models_add() -> None:
    from assistant.docwriter import clean

    target = find_missing("def area(r):\n    return 3.14 * r * r\n")[0]
    reply = (
        "area(r):\n    Return the area of a circle.\n\n    Args:\n        r: radius.\n```python\ndef area(r): ...\n```"
    )
    assert clean(reply, target, "google") == "Return the area of a circle.\n\nArgs:\n    r: radius."
    assert clean(reply, target, "plain") == "Return the area of a circle."
    assert clean('```\n"""\n```', target) == ""


def test_parameter_names_skip_self_and_keep_stars() -> None:
    from assistant.docwriter import parameter_names

    source = "class C:\n    def m(self, a, /, b=1, *rest, key, **extra):\n        pass\n"
    method = next(t for t in find_missing(source) if t.qualname == "C.m")
    assert parameter_names(method) == ["a", "b", "*rest", "key", "**extra"]
    assert parameter_names(find_missing(source)[0]) == []  # the class
    assert parameter_names(find_missing("def f(self):\n    pass\n")[0]) == ["self"]  # not a method


class _Scripted:
    """Replies in turn, recording each prompt's answer prefix (a unit double for one backend call)."""

    name, model = "scripted", "scripted"

    def __init__(self, replies: list[str], prefills_answer: bool = True) -> None:
        self.replies, self.prefixes, self.prefills_answer = replies, [], prefills_answer

    def sample(self, prompt, params, step=None):
        from assistant.backends import Completion

        self.prefixes.append(prompt.answer_prefix)
        return [Completion(text=self.replies.pop(0), tokens=5, finish_reason="stop")]


def test_a_prose_reply_in_a_sectioned_style_gets_its_parameter_section_opened() -> None:
    from assistant.docwriter import write_docstrings

    target = find_missing("def scale(xs, factor):\n    return [x * factor for x in xs]\n")[0]
    backend = _Scripted(["Multiply every number.\n\nIt returns a new list.", " the numbers.\n    factor: by how much."])
    written = write_docstrings([target], backend, style="google")
    assert backend.prefixes == ['"""', '"""Multiply every number.\n\nArgs:\n    xs:']
    assert (
        written.docstrings["scale"] == "Multiply every number.\n\nArgs:\n    xs: the numbers.\n    factor: by how much."
    )
    # Already sectioned, or plain style, or a chat endpoint that cannot continue a prefix: one call only.
    for style, reply, prefills in (
        ("google", "Scale.\n\nArgs:\n    xs: numbers.", True),
        ("plain", "Scale.", True),
        ("rest", "Scale.", False),
    ):
        backend = _Scripted([reply], prefills_answer=prefills)
        assert write_docstrings([target], backend, style=style).docstrings["scale"] == reply
        assert len(backend.prefixes) == 1


def test_classes_are_shown_as_an_outline() -> None:
    from assistant.docwriter import shown_code

    source = "class P:\n    size = 2\n\n    def grow(self, by):\n        self.size += by\n        return self.size\n"
    outline = shown_code(find_missing(source)[0])
    assert "def grow(self, by):" in outline and "size = 2" in outline and "self.size += by" not in outline


@pytest.mark.model
def test_the_default_model_documents_a_function_in_place(backend) -> None:
    from assistant.docwriter import write_docstrings

    source = "import math\n\n\ndef circle_area(radius):\n    return math.pi * radius ** 2\n"
    targets = find_missing(source)
    written = write_docstrings(targets, backend, style="plain")
    assert list(written.docstrings) == ["circle_area"] and not written.skipped
    text = written.docstrings["circle_area"]
    assert "area" in text.lower() and '"""' not in text and "def " not in text
    out = insert_docstrings(source, written.docstrings)
    assert find_missing(out) == [] and ast.get_docstring(ast.parse(out).body[1]) == text
