"""Finding definitions without docstrings, and inserting docstrings by syntax position."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from assistant.code.docstrings import (
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


def test_a_propertys_setter_and_overload_signatures_take_no_docstring_of_their_own() -> None:
    source = (
        "import typing\n\n\nclass A:\n    @property\n    def x(self):\n        return 1\n\n    @x.setter\n"
        "    def x(self, v):\n        pass\n\n\n@typing.overload\ndef f(a: int) -> int: ...\ndef f(a):\n    return a\n"
    )
    assert [(t.qualname, t.line) for t in find_missing(source)] == [("A", 4), ("A.x", 6), ("f", 16)]
    out = insert_docstrings(source, {"A": "An A.", "A.x": "The x.", "f": "Echo a."})
    # The getter's docstring is the property's (it once went on the setter, where Python never shows it).
    namespace: dict = {}
    exec(compile(out, "<out>", "exec"), namespace)
    assert namespace["A"].x.__doc__ == "The x." and namespace["f"].__doc__ == "Echo a."
    assert find_missing(out) == []


BLOCKS = """import sys

try:
    from os import fspath
except ImportError:
    def fspath(path):
        return str(path)

if sys.platform == "win32":
    def set_cloexec(fd):
        return None
else:
    def set_cloexec(fd):
        return fd

for _name in ("a",):
    def in_loop():
        return 1

match sys.platform:
    case "linux":
        def matched():
            return 2
"""


def test_definitions_under_if_try_loops_and_match_are_found_and_each_variant_gets_its_own_docstring() -> None:
    found = [(t.key, t.line) for t in find_missing(BLOCKS)]
    assert found == [
        ("fspath", 6),
        ("set_cloexec (line 10)", 10),  # two variants of one name: each is its own target
        ("set_cloexec (line 13)", 13),
        ("in_loop", 17),
        ("matched", 22),
    ]
    out = insert_docstrings(
        BLOCKS,
        {
            "fspath": "F.",
            "set_cloexec (line 10)": "On Windows.",
            "set_cloexec (line 13)": "Elsewhere.",
            "in_loop": "L.",
            "matched": "M.",
        },
    )
    assert find_missing(out) == []
    assert '        """On Windows."""\n        return None' in out
    assert '        """Elsewhere."""\n        return fd' in out
    with pytest.raises(ValueError, match="set_cloexec is not a definition"):
        insert_docstrings(BLOCKS, {"set_cloexec": "Which one?"})


def test_inserted_lines_take_their_definitions_own_line_ending() -> None:
    mixed = "import os\n\ndef f(x):\r\n    return x\r\n\ndef g():\n    return 1\n"  # one stray CRLF function
    out = insert_docstrings(mixed, {"f": "F.", "g": "G."})
    assert out == 'import os\n\ndef f(x):\r\n    """F."""\r\n    return x\r\n\ndef g():\n    """G."""\n    return 1\n'
    assert insert_docstrings("def f(x):\r    return x\r", {"f": "F."}) == 'def f(x):\r    """F."""\r    return x\r'


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
    # A summary that wraps starts beside the opening quotes (it once opened on a line of its own, since the
    # quotes did not count in the first line's room).
    prose = "Converts a string holding an amount of money into whole cents. The string must parse as a Decimal."
    assert render(prose, "    ", width=60) == [
        '    """Converts a string holding an amount of money into',
        "    whole cents. The string must parse as a Decimal.",
        '    """',
    ]
    assert render('Say """hi""".', "")[0] == '"""Say \\"\\"\\"hi\\"\\"\\"."""'
    # A first sentence that fits the opening line is the summary, a blank line after it (PEP 257): the hook once
    # wrote "Initializes the polygon with a list of vertices. Raises ValueError if the" over two lines.
    split = "Initializes the polygon with a list of vertices. Raises ValueError if the list has fewer than 3."
    assert render(split, "        ") == [
        '        """Initializes the polygon with a list of vertices.',
        "",
        "        Raises ValueError if the list has fewer than 3.",
        '        """',
    ]
    # Not at an abbreviation or inside brackets, and not where that sentence would not fit the line anyway.
    abbreviated = render("Pick one, e.g. Foo or a much longer name. Then more words to pass the width.", "", width=60)
    assert abbreviated[:2] == ['"""Pick one, e.g. Foo or a much longer name.', ""]
    assert render("Call f(a. B) with a value long enough. Then it is done.", "", width=50)[:2] == [
        '"""Call f(a. B) with a value long enough.',
        "",
    ]
    assert "" not in render(prose, "    ", width=60)


def test_render_gives_a_literal_whose_value_is_the_text_whatever_its_quotes_and_backslashes() -> None:
    # A quote or backslash at the end once ran into the closing quotes; triple quotes beside a backslash lost
    # the raw prefix, so `\n` became a newline.
    texts = ['Regex "\\d+"', "Path like C:\\", 'Use """ and \\n escapes', 'Ends in two quotes""', "Match \\d+."]
    for text in [*texts, "Long summary that wraps. " * 6 + 'and "ends"', 'One \\d.\n\nTwo "quoted"']:
        source = "def f():\n" + "\n".join(render(text, "    ")) + "\n    return 1\n"
        written = ast.get_docstring(ast.parse(source).body[0])
        assert " ".join(written.split()) == " ".join(text.split()), source
    assert render("Match \\d+.", "") == ['r"""Match \\d+."""']  # a regex stays readable: raw, not doubled


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

    from assistant.ui.cli import app

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


def test_check_json_is_json_alone_and_unreadable_or_conflicting_input_fails(scratch_repo: Path) -> None:
    import json

    (scratch_repo / "new.py").write_text("def f():\n    return 1\n")
    result = _run(["docstring", "--check", "new.py", "--json"], scratch_repo)
    assert result.exit_code == 1
    assert json.loads(result.stdout)["missing"][0]["name"] == "f"  # nothing else on stdout
    (scratch_repo / "bad.py").write_text("def f(:\n")
    result = _run(["docstring", "--check", "bad.py"], scratch_repo)
    assert result.exit_code == 1 and "could not be checked" in result.output  # a hook must not pass it
    for args, message in (
        (["--check", "--staged", "new.py"], "name files or pass --staged, not both"),
        (["--check", "--write", "new.py"], "drop --write"),
    ):
        result = _run(["docstring", *args], scratch_repo)
        assert result.exit_code != 0 and message in result.output, result.output


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


def test_hook_install_never_writes_through_a_link_nor_into_a_shared_hooks_folder(
    scratch_repo: Path, tmp_path: Path
) -> None:
    from .conftest import git

    hook = scratch_repo / ".git" / "hooks" / "pre-commit"
    hook.parent.mkdir(parents=True, exist_ok=True)
    dotfiles = tmp_path / "dotfiles-pre-commit"
    dotfiles.write_text("#!/bin/sh\necho shared\n")
    hook.symlink_to(dotfiles)
    result = _run(["hook", "install"], scratch_repo)
    assert result.exit_code == 2 and "is a link" in result.output
    assert _run(["hook", "install", "--force"], scratch_repo).exit_code == 0
    assert dotfiles.read_text() == "#!/bin/sh\necho shared\n"  # the shared hook is untouched
    assert not hook.is_symlink() and "docstring --staged" in hook.read_text()
    # A foreign hook replaced with --force is kept beside it.
    hook.write_text("#!/bin/sh\necho mine\n")
    assert _run(["hook", "install", "--force"], scratch_repo).exit_code == 0
    assert (hook.parent / "pre-commit.before-assist").read_text() == "#!/bin/sh\necho mine\n"
    # A hooks folder outside the repository (core.hooksPath) runs in other repositories too.
    shared = tmp_path / "global-hooks"
    git(scratch_repo, "config", "core.hooksPath", str(shared))
    result = _run(["hook", "install"], scratch_repo)
    assert result.exit_code == 2 and "outside this repository" in result.output
    assert not (shared / "pre-commit").exists()


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
    from assistant.core.docwriter import clean

    target = find_missing("def area(r):\n    return 3.14 * r * r\n")[0]
    reply = (
        "area(r):\n    Return the area of a circle.\n\n    Args:\n        r: radius.\n```python\ndef area(r): ...\n```"
    )
    assert clean(reply, target, "google") == "Return the area of a circle.\n\nArgs:\n    r: radius."
    assert clean(reply, target, "plain") == "Return the area of a circle."
    assert clean('```\n"""\n```', target) == ""
    # Quotes that belong to the text stay; a reply wrapped in a literal's quotes is unwrapped.
    assert clean('Return the value stored under "key"', target) == 'Return the value stored under "key"'
    assert clean('"Quoted" words come first.', target) == '"Quoted" words come first.'
    for wrapped in ('"""Return x."""', 'Return x."""', '"Return x."', "'''Return x.", 'r"""Return x.""" trailing'):
        assert clean(wrapped, target) == "Return x."


def test_parameter_names_skip_self_and_keep_stars() -> None:
    from assistant.core.docwriter import parameter_names

    source = "class C:\n    def m(self, a, /, b=1, *rest, key, **extra):\n        pass\n"
    method = next(t for t in find_missing(source) if t.qualname == "C.m")
    assert parameter_names(method) == ["a", "b", "*rest", "key", "**extra"]
    assert parameter_names(find_missing(source)[0]) == []  # the class
    assert parameter_names(find_missing("def f(self):\n    pass\n")[0]) == ["self"]  # not a method


class _Scripted:
    """Replies in turn, recording each prompt's answer prefix (a unit double for one backend call)."""

    name, model = "scripted", "scripted"

    def __init__(self, replies: list[str], prefills_answer: bool = True, finish: str = "stop") -> None:
        self.replies, self.prefixes, self.prefills_answer, self.finish = replies, [], prefills_answer, finish

    def sample(self, prompt, params, step=None):
        from assistant.backends import Completion

        self.prefixes.append(prompt.answer_prefix)
        return [Completion(text=self.replies.pop(0), tokens=5, finish_reason=self.finish)]


def test_a_prose_reply_in_a_sectioned_style_gets_its_parameter_section_opened() -> None:
    from assistant.core.docwriter import write_docstrings

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


def test_a_reply_the_token_limit_cut_off_ends_at_its_last_whole_sentence() -> None:
    from assistant.core.docwriter import write_docstrings

    target = find_missing(
        "def scale_points(points, factor):\n    return [(x * factor, y * factor) for x, y in points]\n"
    )[0]
    cut = "Return the points scaled by a factor. It uses a list comprehension. The function assumes that the input"

    def written(reply: str, style: str = "plain", finish: str = "length"):
        return write_docstrings([target], _Scripted([reply], finish=finish), style=style, max_new_tokens=64)

    assert (
        written(cut).docstrings["scale_points"] == "Return the points scaled by a factor. It uses a list comprehension."
    )
    assert written(cut, finish="stop").docstrings["scale_points"] == cut  # the model ended it: kept as written
    # Cut before any sentence ended: nothing is written, and the reason says so.
    skipped = written("Return the points scaled by a factor that the caller")
    assert skipped.docstrings == {} and "cut off at 64 tokens" in skipped.skipped["scale_points"]
    # The plain style keeps the first paragraph: a cut in a later one leaves it whole, period or not.
    assert (
        written("Scale the points\n\nEach point is multiplied by the").docstrings["scale_points"] == "Scale the points"
    )
    # A sectioned style loses the line the limit cut.
    sectioned = written("Scale.\n\nArgs:\n    points: pairs of x and y.\n    factor: by how mu", style="google")
    assert sectioned.docstrings["scale_points"] == "Scale.\n\nArgs:\n    points: pairs of x and y."
    # ... and a section the cut leaves empty goes with it; a one-line reply keeps its whole sentences.
    returns = written("Scale.\n\nArgs:\n    points: pairs.\n\nReturns:\n    The scaled", style="google")
    assert returns.docstrings["scale_points"] == "Scale.\n\nArgs:\n    points: pairs."
    numpy = _Scripted(["Scale.\n\nParameters\n----------\npoints : list"], prefills_answer=False, finish="length")
    assert write_docstrings([target], numpy, style="numpy").docstrings["scale_points"] == "Scale."
    prose = _Scripted(["Scale the points. Each by the factor. The"], prefills_answer=False, finish="length")
    assert write_docstrings([target], prose, style="google").docstrings["scale_points"] == (
        "Scale the points. Each by the factor."
    )
    # An abbreviation is no sentence's end; a later paragraph that happens to end on the same word is no cut.
    assert written("Scale points, e.g. pairs. Each is moved by the factor, e.g. the").docstrings["scale_points"] == (
        "Scale points, e.g. pairs."
    )
    same_word = written("Scale the points\n\nEach one moves with the points")
    assert same_word.docstrings["scale_points"] == "Scale the points"
    # A reply that held no docstring at all is said to, not to be cut.
    assert written("```").skipped["scale_points"] == "the model's reply held no docstring"


def test_classes_are_shown_as_an_outline() -> None:
    from assistant.core.docwriter import shown_code

    source = "class P:\n    size = 2\n\n    def grow(self, by):\n        self.size += by\n        return self.size\n"
    outline = shown_code(find_missing(source)[0])
    assert "def grow(self, by):" in outline and "size = 2" in outline and "self.size += by" not in outline


@pytest.mark.model
def test_the_default_model_documents_a_function_in_place(backend) -> None:
    from assistant.core.docwriter import write_docstrings

    source = "import math\n\n\ndef circle_area(radius):\n    return math.pi * radius ** 2\n"
    targets = find_missing(source)
    written = write_docstrings(targets, backend, style="plain")
    assert list(written.docstrings) == ["circle_area"] and not written.skipped
    text = written.docstrings["circle_area"]
    assert "area" in text.lower() and '"""' not in text and "def " not in text
    out = insert_docstrings(source, written.docstrings)
    assert find_missing(out) == [] and ast.get_docstring(ast.parse(out).body[1]) == text


# -- issue 26: writing docstrings never breaks or loses a file (no model: a deterministic writer) ----------


def _fake_generation(monkeypatch: pytest.MonkeyPatch, during=None, skip: tuple[str, ...] = ()) -> list[str]:
    """Run `assist docstring` without models: the loaders return placeholders and the docstring writer is a
    deterministic one ("Document <name>."). `during` runs inside generation, as a user editing the file while
    the model works; the targets in `skip` get none, as when the time budget runs out. Returns the files
    generation was asked for, in order."""
    import assistant.backends
    import assistant.backends.encoder
    import assistant.core.docwriter
    import assistant.indexing.sources
    import assistant.pipeline.pipeline
    from assistant.core.docwriter import Written

    calls: list[str] = []

    def write_docstrings(targets, backend, **options) -> Written:
        calls.append(options["path"])
        if during is not None:
            during()
        return Written(
            docstrings={t.qualname: f"Document {t.qualname}." for t in targets if t.qualname not in skip},
            skipped={t.qualname: "the time budget ran out" for t in targets if t.qualname in skip},
        )

    monkeypatch.setattr(assistant.backends.encoder.Encoder, "load", classmethod(lambda cls, spec=None: object()))
    monkeypatch.setattr(assistant.indexing.sources, "open_source", lambda *args, **kwargs: None)
    # Where the pipeline calls it (it imports the name): patched only in assistant.backends, the real default
    # model loaded here, unseen, until the tests' models folder refused the 1.5B.
    monkeypatch.setattr(assistant.backends, "load_backend", lambda *args, **kwargs: object())
    monkeypatch.setattr(assistant.pipeline.pipeline, "load_backend", lambda *args, **kwargs: object())
    monkeypatch.setattr(assistant.core.docwriter, "write_docstrings", write_docstrings)
    return calls


WRITE = ["docstring", "--write", "--style", "plain", "-k", "0"]


def test_find_missing_and_insert_count_lines_as_python_does() -> None:
    from assistant.core.docwriter import split_docstring

    for source in (
        "import os\n\f\ndef f(x):\n    return x\n\n\ndef g(y):\n    return y\n",  # a form feed on its own line
        'S = "a\u2028b"\n\n\ndef f(x):\n    return x\n\n\ndef g(y):\n    return y\n',  # U+2028 in a string
    ):
        assert [(t.qualname, t.line) for t in find_missing(source)] == [
            ("f", source.count("\n", 0, source.index("def f")) + 1),
            ("g", source.count("\n", 0, source.index("def g")) + 1),
        ]
        out = insert_docstrings(source, {"f": "Return x.", "g": "Return y."})
        tree = ast.parse(out)
        assert [ast.get_docstring(n) for n in tree.body if isinstance(n, ast.FunctionDef)] == ["Return x.", "Return y."]
        assert out.replace('    """Return x."""\n', "").replace('    """Return y."""\n', "") == source
    code = 'def f():\n    """Doc."""\n    s = "a\u2028b"\n    return s\n'
    assert split_docstring(code) == ('def f():\n    s = "a\u2028b"\n    return s', "Doc.")


def test_write_keeps_edits_made_while_the_model_was_generating(scratch_repo: Path, monkeypatch) -> None:
    path = scratch_repo / "work.py"
    path.write_text("def f():\n    return 1\n")

    def user_saves() -> None:
        path.write_text(path.read_text() + "\n\ndef mine():\n    return 2\n")

    calls = _fake_generation(monkeypatch, during=user_saves)
    result = _run([*WRITE, "work.py"], scratch_repo)
    assert calls == ["work.py"]
    assert path.read_text() == "def f():\n    return 1\n\n\ndef mine():\n    return 2\n"  # theirs, untouched
    assert result.exit_code == 1
    assert "work.py: not written: it changed while its docstrings were generated" in result.output


def test_write_skips_a_partially_staged_file_before_generating_and_fails(scratch_repo: Path, monkeypatch) -> None:
    from .conftest import git

    part = scratch_repo / "part.py"
    part.write_text("def f():\n    return 1\n")
    (scratch_repo / "whole.py").write_text("def g():\n    return 2\n")
    git(scratch_repo, "add", "part.py", "whole.py")
    part.write_text(part.read_text() + "\n# work in progress, not staged\n")
    calls = _fake_generation(monkeypatch)
    result = _run(["docstring", "--staged", "--write", "--style", "plain", "-k", "0"], scratch_repo)
    assert calls == ["whole.py"]  # no model time for a file that will not be written
    assert "part.py: skipped, 1 definition left without a docstring: it also has unstaged changes" in result.output
    assert "wrote 1 docstring in 1 file" in result.output
    assert result.exit_code == 1  # even without --fail-on-change: part.py was not documented
    assert "Document" not in part.read_text() and "Document g." in (scratch_repo / "whole.py").read_text()
    # Only the partially staged file: nothing generated, and the hook's command fails.
    git(scratch_repo, "add", "whole.py")
    calls.clear()
    result = _run(["docstring", "--staged", "--write", "--fail-on-change", "--style", "plain", "-k", "0"], scratch_repo)
    assert calls == [] and result.exit_code == 1 and "part.py: skipped" in result.output


def test_staged_beyond_max_functions_documents_the_first_ones_now_and_the_rest_on_the_next_commit(
    scratch_repo: Path, monkeypatch
) -> None:
    # A first commit of a 30-function module once failed the hook with "more than --max-functions 25", a flag
    # its user never set, at every commit; named files are still refused, so the user chooses.
    from .conftest import git

    many = scratch_repo / "many.py"
    many.write_text("\n\n".join(f"def f{i}(x):\n    return x + {i}" for i in range(30)) + "\n")
    git(scratch_repo, "add", "many.py")
    _fake_generation(monkeypatch)
    hook = ["docstring", "--staged", "--write", "--fail-on-change", "--style", "plain", "-k", "0"]
    first = _run(hook, scratch_repo)
    assert "30 definitions lack a docstring: the first 25 now, 5 on the next commit" in first.output
    assert first.exit_code == 1 and "wrote 25 docstrings in 1 file" in first.output
    assert len(find_missing(many.read_text())) == 5 and find_missing(many.read_text())[0].qualname == "f25"
    git(scratch_repo, "add", "many.py")
    second = _run(hook, scratch_repo)
    assert "wrote 5 docstrings in 1 file" in second.output and find_missing(many.read_text()) == []
    many.write_text("\n\n".join(f"def g{i}(x):\n    return x" for i in range(30)) + "\n")
    named = _run([*WRITE, "many.py"], scratch_repo)
    assert named.exit_code != 0 and "more than --max-functions 25" in named.output


def test_write_staged_documents_a_file_git_converts_to_crlf_in_the_working_tree(
    scratch_repo: Path, monkeypatch
) -> None:
    # core.autocrlf=true (Git for Windows' default): the index holds LF, the working tree CRLF. Git counts the
    # two as the same content, so the hook documents the file as it is on disk and keeps its line endings.
    from .conftest import git

    git(scratch_repo, "config", "core.autocrlf", "true")
    path = scratch_repo / "crlf.py"
    path.write_bytes(b"def f():\r\n    return 1\r\n")
    git(scratch_repo, "add", "crlf.py")
    assert git(scratch_repo, "show", ":0:crlf.py") == "def f():\n    return 1\n"  # LF in the index
    calls = _fake_generation(monkeypatch)
    result = _run(["docstring", "--staged", "--write", "--style", "plain", "-k", "0"], scratch_repo)
    assert calls == ["crlf.py"], result.output
    assert result.exit_code == 0, result.output
    assert path.read_bytes() == b'def f():\r\n    """Document f."""\r\n    return 1\r\n'
    git(scratch_repo, "add", "crlf.py")
    assert git(scratch_repo, "show", ":0:crlf.py") == 'def f():\n    """Document f."""\n    return 1\n'
    # A real unstaged edit is still held back, CRLF or not.
    path.write_bytes(b"def g():\r\n    return 2\r\n")
    git(scratch_repo, "add", "crlf.py")
    path.write_bytes(b"def g():\r\n    return 2\r\n# not staged\r\n")
    calls.clear()
    result = _run(["docstring", "--staged", "--write", "--style", "plain", "-k", "0"], scratch_repo)
    assert calls == [] and result.exit_code == 1 and "it also has unstaged changes" in result.output
    # An edit git does not see (assume-unchanged) is more than line endings: held back, not documented.
    path.write_bytes(b"def g():\r\n    return 2\r\n")
    git(scratch_repo, "add", "crlf.py")
    git(scratch_repo, "update-index", "--assume-unchanged", "crlf.py")
    path.write_bytes(b"def g():\r\n    return 3\r\n")
    result = _run(["docstring", "--staged", "--write", "--style", "plain", "-k", "0"], scratch_repo)
    assert calls == [] and result.exit_code == 1 and "differs from the staged content" in result.output
    assert path.read_bytes() == b"def g():\r\n    return 3\r\n"


def test_the_writing_hook_fails_while_anything_is_left_undocumented(scratch_repo: Path, monkeypatch) -> None:
    from .conftest import git

    hook = ["docstring", "--staged", "--write", "--fail-on-change", "--style", "plain", "-k", "0"]
    (scratch_repo / "late.py").write_text("def f():\n    return 1\n")  # the model writes nothing for it
    git(scratch_repo, "add", "late.py")
    _fake_generation(monkeypatch, skip=("f",))
    result = _run(hook, scratch_repo)
    assert result.exit_code == 1 and "late.py: 1 docstring not written (skipped above)" in result.output
    # A docstring that cannot go in (a backslash after the header): the file is left as it was, and it fails.
    odd = scratch_repo / "odd.py"
    odd.write_text("def g(): \\\n    return 2\n")
    git(scratch_repo, "rm", "-q", "--cached", "late.py")
    git(scratch_repo, "add", "odd.py")
    _fake_generation(monkeypatch)
    result = _run(hook, scratch_repo)
    assert result.exit_code == 1 and "odd.py: left untouched: inserting docstrings would break" in result.output
    assert odd.read_text() == "def g(): \\\n    return 2\n"


def test_a_staged_rename_is_checked_like_any_staged_file(scratch_repo: Path) -> None:
    from .conftest import git

    body = "".join(f'def f{i}():\n    """Return {i}."""\n    return {i}\n\n\n' for i in range(20))
    (scratch_repo / "old.py").write_text(body)
    git(scratch_repo, "add", "old.py")
    git(scratch_repo, "commit", "-qm", "old")
    git(scratch_repo, "mv", "old.py", "new.py")
    (scratch_repo / "new.py").write_text(body + "def added(x):\n    return x\n")
    git(scratch_repo, "add", "new.py")
    assert "R" in git(scratch_repo, "status", "--porcelain")  # git sees a rename, not a new file
    result = _run(["docstring", "--staged", "--check"], scratch_repo)
    assert result.exit_code == 1 and "new.py:101: function added has no docstring" in result.output


def test_write_keeps_a_byte_order_mark(scratch_repo: Path, monkeypatch) -> None:
    path = scratch_repo / "bom.py"
    path.write_bytes(b"\xef\xbb\xbfdef f():\n    return 1\n")
    assert read_python(path) == "def f():\n    return 1\n"
    calls = _fake_generation(monkeypatch)
    result = _run([*WRITE, "bom.py"], scratch_repo)
    assert result.exit_code == 0 and calls == ["bom.py"]
    assert path.read_bytes() == b'\xef\xbb\xbfdef f():\n    """Document f."""\n    return 1\n'


def test_write_goes_through_a_symlink(scratch_repo: Path, monkeypatch) -> None:
    (scratch_repo / "real.py").write_text("def f():\n    return 1\n")
    (scratch_repo / "link.py").symlink_to("real.py")
    _fake_generation(monkeypatch)
    assert _run([*WRITE, "link.py"], scratch_repo).exit_code == 0
    assert (scratch_repo / "link.py").is_symlink()  # old: replaced by a regular file
    assert (scratch_repo / "real.py").read_text() == 'def f():\n    """Document f."""\n    return 1\n'


def test_write_refuses_a_read_only_file_before_generating(scratch_repo: Path, monkeypatch) -> None:
    import stat

    frozen = scratch_repo / "frozen.py"
    frozen.write_text("def g():\n    return 2\n")
    frozen.chmod(0o444)
    calls = _fake_generation(monkeypatch)
    result = _run([*WRITE, "frozen.py"], scratch_repo)
    assert calls == [] and result.exit_code == 1
    assert "frozen.py: skipped, 1 definition left without a docstring: frozen.py is read-only" in result.output
    assert frozen.read_text() == "def g():\n    return 2\n" and stat.S_IMODE(frozen.stat().st_mode) == 0o444


def test_write_refuses_a_file_python_would_not_compile(scratch_repo: Path, monkeypatch) -> None:
    late = scratch_repo / "late.py"  # ast.parse accepts it, compile() does not: a late __future__ import
    late.write_text("x = 1\nfrom __future__ import annotations\n\n\ndef h():\n    return x\n")
    calls = _fake_generation(monkeypatch)
    result = _run([*WRITE, "late.py"], scratch_repo)
    assert calls == [] and result.exit_code == 1
    assert "late.py: the file as it is would not compile (line 2: from __future__ imports" in result.output
    assert "Document" not in late.read_text()


@pytest.mark.parametrize(
    ("option", "message"),
    [
        (["--max-functions", "0"], "--max-functions must be at least 1, not 0"),
        (["--max-functions", "-3"], "--max-functions must be at least 1, not -3"),
        (["--time-budget", "0"], "--time-budget must be above 0, not 0"),
        (["--time-budget", "nan"], "--time-budget must be above 0, not nan"),
        (["-k", "-1"], "-k must be at least 0 and at most 64, not -1"),
    ],
)
def test_numeric_options_are_checked_before_any_work(scratch_repo: Path, option: list[str], message: str) -> None:
    result = _run(["docstring", "--check", *option, "mathutils.py"], scratch_repo)
    assert result.exit_code == 2
    assert result.output.strip() == f"error: {message}"


def test_a_staged_file_named_like_an_index_stage_is_read_as_itself(scratch_repo: Path) -> None:
    from assistant.code.git import staged_text

    from .conftest import git

    (scratch_repo / "0:x.py").write_text("def f():\n    return 1\n")  # `:0:x.py` once meant stage 0 of `x.py`
    git(scratch_repo, "add", "0:x.py")
    assert staged_text(scratch_repo, "0:x.py") == b"def f():\n    return 1\n"
    result = _run(["docstring", "--staged", "--check"], scratch_repo)
    assert result.exit_code == 1 and "0:x.py:1: function f has no docstring" in result.output


OWN_FILE = '''"""Word helpers."""


def words(text):
    """The words of `text`, lower-cased, in order."""
    return text.lower().split()


def longest_word(text):
    return max(words(text), key=len)
'''


def test_exemplars_come_from_the_files_own_documented_functions_first_then_the_pool() -> None:
    from assistant.code.examples import Example
    from assistant.core.docwriter import ExemplarIndex, choose_exemplars, own_exemplars

    target = find_missing(OWN_FILE)[-1]
    own = own_exemplars(OWN_FILE, "util.py")
    pool = ExemplarIndex(
        [
            Example("", 'def longest(xs):\n    """Return the longest item."""\n    return max(xs)', "longest", "a.py"),
            Example("", 'def stale(text):\n    """An old copy of this file."""\n    return text', "stale", "util.py"),
        ]
    )
    chosen = choose_exemplars(target, 2, own, pool, "util.py")
    # The file's own function nearest the request (last); the pool fills the rest, never with its copy of this file.
    assert [e.name for e in chosen] == ["longest", "words"]
    assert [e.name for e in choose_exemplars(target, 1, own, pool, "util.py")] == ["words"]
    assert choose_exemplars(target, 0, own, pool, "util.py") == []
    # A definition of the target's own name is never its exemplar (one defined twice, under `if`/`else`).
    twice = OWN_FILE + '\n\nif True:\n    def longest_word(text):\n        """Elsewhere."""\n        return text\n'
    assert [e.name for e in choose_exemplars(target, 2, own_exemplars(twice, "util.py"), None, "util.py")] == ["words"]


def test_assist_docstring_shows_the_model_the_files_own_docstrings(
    scratch_repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from .conftest import ScriptedBackend, register_scripted

    (scratch_repo / "util.py").write_text(OWN_FILE)
    backend = register_scripted(monkeypatch, ScriptedBackend(["The longest word of `text`."]))
    result = _run(["docstring", "util.py", "--backend", "scripted", "--diff"], scratch_repo)
    assert result.exit_code == 0, result.output
    shown = " ".join(message["content"] for message in backend.prompts[0].to_json()["messages"])
    assert "The words of `text`, lower-cased, in order." in shown


def test_in_a_repo_never_indexed_a_new_files_exemplars_come_from_the_repos_other_files(
    scratch_repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A new file has no documented functions of its own, and the hook does not index: its exemplars came from the
    # standard library's bank, in the standard library's style, not the repo's.
    from .conftest import ScriptedBackend, git, register_scripted

    (scratch_repo / "shout.py").write_text("def shout_words(text):\n    return [w.upper() for w in text.split()]\n")
    outside = scratch_repo.parent / "outside.py"
    outside.write_text('def shout_all(text):\n    """Read through a link: never."""\n    return text.split()\n')
    (scratch_repo / "linked.py").symlink_to(outside)
    git(scratch_repo, "add", "shout.py", "linked.py")
    backend = register_scripted(monkeypatch, ScriptedBackend(["Each word of `text`, in capitals."]))
    result = _run(["docstring", "shout.py", "--backend", "scripted", "--diff"], scratch_repo)
    assert result.exit_code == 0, result.output
    shown = " ".join(message["content"] for message in backend.prompts[0].to_json()["messages"])
    assert "Count the words in a string." in shown  # text/words.py, the repo's function nearest by code tokens
    assert "Read through a link" not in shown


def test_first_of_fills_from_each_index_in_turn() -> None:
    from assistant.code.examples import Example
    from assistant.core.docwriter import ExemplarIndex, FirstOf

    def example(name: str, body: str) -> Example:
        return Example("", f'def {name}(xs):\n    """{name}."""\n    {body}', name, f"{name}.py")

    bodies = {"near": "return sorted(xs)", "len": "return len(xs)", "sum": "return sum(xs)", "max": "return max(xs)"}
    bank = ExemplarIndex([example(name, body) for name, body in bodies.items()])
    both = FirstOf(ExemplarIndex([example("mine", "pass")]), bank)
    query = "def f(xs):\n    return sorted(xs)"
    assert [e.name for e in both.search(query, 2)] == ["mine", "near"]  # the first index first, however far
    assert [e.name for e in both.search(query, 1)] == ["mine"]
    assert both.search(query, 2, lambda e: e.name == "mine")[0].name == "near"  # `exclude` holds in every index
    assert len(both) == 5


def test_the_repos_style_is_remembered_until_a_tracked_python_file_changes(scratch_repo: Path, monkeypatch) -> None:
    # The hook detected the style from every docstring of the repo at every commit (about 1 s for 270 files).
    import os

    import assistant.code.docstrings as docstrings
    from assistant.code.git import tracked_python_files

    from .conftest import git

    read: list[int] = []
    real = docstrings.repo_docstrings
    monkeypatch.setattr(docstrings, "repo_docstrings", lambda paths: read.append(1) or real(paths))
    names = tracked_python_files(scratch_repo)
    assert docstrings.repo_style(scratch_repo, names) == "plain" and len(read) == 1
    assert docstrings.repo_style(scratch_repo, names) == "plain" and len(read) == 1  # remembered
    google = 'def g(x):\n    """Do it.\n\n    Args:\n        x: a thing.\n\n    Returns:\n        Another.\n    """\n'
    for number in range(3):
        (scratch_repo / f"g{number}.py").write_text(google)
    git(scratch_repo, "add", ".")
    names = tracked_python_files(scratch_repo)
    assert docstrings.repo_style(scratch_repo, names) == "google" and len(read) == 2  # a tracked file changed
    cache = next((Path(os.environ["ASSIST_CACHE_DIR"]) / "docstring-styles").glob("*.json"))
    cache.write_text('{"key": "x", "style": "../../evil"}')  # not a style: detected again, not trusted
    assert docstrings.repo_style(scratch_repo, names) == "google" and len(read) == 3
    cache.unlink()
    cache.mkdir()  # a cache entry that cannot be written (root writes through permissions): still detected
    assert docstrings.repo_style(scratch_repo, names) == "google" and len(read) == 4
