"""Issue 29 part 1: fill a stub in place (`assist generate --file F --function NAME`).

The library parts run without a model; the command runs end to end against the scripted OpenAI-compatible
server of `openai_server.py` (real HTTP on 127.0.0.1, real `openai` client); one test uses the local model.
"""

from __future__ import annotations

import ast
import json
import os
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from assistant import backends
from assistant.backends import Completion
from assistant.code.edit import source_lines
from assistant.core.candidates import Candidate
from assistant.core.rank import Ranked, Score
from assistant.core.stubs import (
    Taken,
    approximate_tokens,
    attribute_outlines,
    collect_stub,
    default_max_tokens,
    fill_body,
    find_functions,
    find_stub,
    list_stubs,
    stub_context,
    take_body,
)
from assistant.errors import UsageError
from assistant.ui.cli import app

from .conftest import git
from .openai_server import Script, openai_server

SOURCE = '''"""Shapes."""

import math
from typing import Any

UNIT = 1.0


def helper(x):
    """Double x."""
    return 2 * x


def area(radius: float) -> float:
    """Return the area of a circle of this radius."""
    ...


def perimeter(radius):
    """Return the perimeter of a circle."""
    pass


async def load(key):
    """Fetch the shape stored under key."""
    raise NotImplementedError


def todo(x):
    """Not written yet."""
    raise NotImplementedError("later")


def documented(x):
    """Only a docstring so far."""


class Box:
    """A box of items."""

    size: int = 0

    def __init__(self, items):
        self.items = list(items)

    @property
    def count(self) -> int:
        """Return how many items the box holds."""
        ...

    class Lid:
        """The box's lid."""

        @staticmethod
        def weight(material: str) -> float:
            """Return the lid's weight for a material."""
            pass


def after(y):
    return y
'''


def forms() -> dict[str, str]:
    return {stub.qualname: stub.form for stub in find_functions(SOURCE)}


def test_finds_every_stub_form_methods_async_decorators_and_nested_classes() -> None:
    assert forms() == {
        "helper": "body",
        "area": "...",
        "perimeter": "pass",
        "load": "raise NotImplementedError",
        "todo": "raise NotImplementedError",
        "documented": "docstring only",  # a docstring alone does nothing yet: it is a stub
        "Box.__init__": "body",
        "Box.count": "...",
        "Box.Lid.weight": "pass",
        "after": "body",
    }
    assert [s.qualname for s in list_stubs(SOURCE)] == [
        "area",
        "perimeter",
        "load",
        "todo",
        "documented",
        "Box.count",
        "Box.Lid.weight",
    ]
    count = find_stub(SOURCE, "Box.count")
    assert count.head.lstrip().startswith("@property") and count.docstring == "Return how many items the box holds."
    assert find_stub(SOURCE, "count").qualname == "Box.count"  # a bare name finds a unique method
    assert find_stub(SOURCE, "weight").dedented_head().startswith("@staticmethod\ndef weight(material: str)")
    assert find_stub(SOURCE, "load").dedented_head().startswith("async def load(key):")


def test_a_stub_under_try_or_if_is_named_in_the_error_not_guessed() -> None:
    text = (
        'import sys\n\nif sys.platform == \'win32\':\n    def where(cmd):\n        """Find cmd."""\n        ...\n'
        'else:\n    def where(cmd):\n        """Find cmd."""\n        ...\n\n\n'
        'def top():\n    """Top."""\n    ...\n'
    )
    assert [s.qualname for s in list_stubs(text)] == ["top"]  # two variants of `where`: which to fill is a guess
    with pytest.raises(UsageError, match=r"'where' is defined under an if, try.*\(line 4, 8\); assist fills"):
        find_stub(text, "where")


def test_refuses_a_missing_function_a_real_body_and_a_stub_with_nothing_to_go_on() -> None:
    with pytest.raises(UsageError, match=r"there is no function 'nope' in shapes.py; its stubs: area, perimeter"):
        find_stub(SOURCE, "nope", "shapes.py")
    with pytest.raises(UsageError, match=r"helper \(shapes.py:9\) is not a stub: its body has 1 line"):
        find_stub(SOURCE, "helper", "shapes.py")
    bare = "def f(x): ...\n"
    with pytest.raises(UsageError, match="has no docstring; write one, or give the requirement"):
        find_stub(bare, "f")
    assert find_stub(bare, "f", requirement_given=True).form == "..."
    twice = "class A:\n    def f(self): ...\n\n\nclass B:\n    def f(self): ...\n"
    with pytest.raises(UsageError, match=r"ambiguous.*A\.f, B\.f"):
        find_stub(twice, "f", requirement_given=True)


def test_overload_declarations_are_never_the_stub_and_a_docstring_on_the_def_line_is_refused() -> None:
    source = (
        "from typing import overload\n\n\n@overload\ndef f(x: int) -> int: ...\n@overload\n"
        'def f(x: str) -> str: ...\ndef f(x):\n    """Echo x."""\n    ...\n'
    )
    assert find_stub(source, "f").line == 8 and [s.line for s in list_stubs(source)] == [8]
    filled = source.replace('    """Echo x."""\n    ...\n', "    return x\n")
    with pytest.raises(UsageError, match=r"f \(the file:8\) is not a stub"):  # not the second @overload
        find_stub(filled, "f")
    # With a requirement, the implementation's body is the one to rewrite (never an @overload declaration).
    rewrite = find_stub(filled, "f", requirement_given=True)
    assert (rewrite.line, rewrite.form) == (8, "body")
    with pytest.raises(UsageError, match="only declared with @overload; write its implementation"):
        find_stub("import typing\n\n\n@typing.overload\ndef f(x: int) -> int: ...\n", "f", requirement_given=True)
    for inline in ('def f(x): "Add one."; ...\n', 'def f(\n    x,\n): """Add one."""\n'):
        with pytest.raises(UsageError, match="docstring on the `def` line, where no body can follow"):
            find_stub(inline, "f")


def test_a_propertys_getter_stub_is_found_before_its_setter() -> None:
    # Both are URL.path; the later definition wins at run time, but the getter is the stub to fill.
    source = (
        'class URL:\n    @property\n    def path(self):\n        """The path."""\n        ...\n\n'
        "    @path.setter\n    def path(self, value):\n        self._path = value\n        self._dirty = True\n"
    )
    stub = find_stub(source, "URL.path")
    assert stub.line == 3 and stub.is_stub
    setter_stub = source.replace("        self._path = value\n        self._dirty = True\n", "        ...\n")
    assert find_stub(setter_stub, "URL.path", requirement_given=True).line == 8  # both stubs: the last wins
    with pytest.raises(UsageError, match="is not a stub"):
        find_stub(source.replace('"""The path."""\n        ...', '"""The path."""\n        return 1'), "URL.path")


def test_context_holds_the_stub_and_its_class_first_then_what_the_budget_allows() -> None:
    stub = find_stub(SOURCE, "Box.count")
    tight = stub_context(SOURCE, stub, budget=10)
    assert tight.splitlines()[0] == "class Box:" and "def count(self) -> int:" in tight
    assert "import math" not in tight and "helper" not in tight
    roomy = stub_context(SOURCE, stub, budget=2000)
    for shown in ("import math", "size: int = 0", "def __init__(self, items):", "class Lid:", "def helper(x):"):
        assert shown in roomy
    assert "...  # <- write this body" in roomy
    # In between, the budget is spent nearest first, and stays under it (beyond what must be shown).
    must = approximate_tokens(tight)
    middle = stub_context(SOURCE, stub, budget=must + 40)
    assert "def __init__" in middle and "def after" not in middle
    assert approximate_tokens(middle) <= must + 40 + 10
    # Long neighbours are shown as signature + docstring summary, whole when short.
    long_body = 'def big(x):\n    """Big."""\n' + "    x += 1\n" * 30 + '    return x\n\n\ndef f():\n    """F."""\n'
    shown = stub_context(long_body, find_stub(long_body, "f"), budget=500)
    assert 'def big(x):\n    """Big."""\n    ...' in shown and "x += 1" not in shown


ATTRIBUTES = '''import threading


class Base:
    """Holds a name and a tag."""

    def __init__(self, name, tag):
        # A base's __init__ long enough to be shown as an outline only.
        #
        #
        #
        #
        #
        #
        #
        #
        #
        #
        #
        self.name = name
        self.tag = tag


class Short:
    """A short base, shown whole."""

    def __init__(self):
        self.short = 1


class Sock(Base, Short):
    """A buffered socket."""

    def __init__(self, sock, name="s"):
        """Wrap sock."""
        super().__init__(name, "t")
        self.opts["mode"] = "r"
        self.sock = sock
        self.rbuf = b""; self.wbuf = b""
        if sock is None:
            self.sbuf = [
                b"",
            ]
        else:
            self.sbuf = []
        self.name = name.upper()

        def later(self):
            self.hidden = 1

        count = 0
        for _ in range(3):
            count += 1
        self.count = count

    @staticmethod
    def make(self):
        self.static = 2

    def reset(self):
        """Forget what was read."""
        self.rbuf = b""
        self.opts = {}

    def buffer(self, data):
        """Buffer data for the next send."""
        ...

    @classmethod
    def build(cls):
        """A classmethod: it reads no instance."""
        ...
'''


def test_attributes_show_what_a_methods_class_sets_on_self() -> None:
    stub = find_stub(ATTRIBUTES, "Sock.buffer")
    plain = stub_context(ATTRIBUTES, stub, budget=2000)
    assert "self.sbuf" not in plain and "self.tag" not in plain  # long __init__s as outlines
    shown = stub_context(ATTRIBUTES, stub, budget=2000, attributes=True)
    # __init__'s assignments under its signature and docstring summary, moved back to its body's indentation (out of
    # their `if`), a line two of them share once, each attribute from its first assignment; not a subscript's
    # (`self.opts[...] = `), a nested function's, nor a staticmethod's; a short method whole.
    init = shown[shown.index("    def __init__(self, sock") :]
    assert init.startswith(
        '    def __init__(self, sock, name="s"):\n        """Wrap sock."""\n        self.sock = sock\n'
        '        self.rbuf = b""; self.wbuf = b""\n        self.sbuf = [\n            b"",\n        ]\n'
        "        self.name = name.upper()\n        self.count = count\n        ...\n"
    )
    assert "self.hidden" not in shown and 'self.opts["mode"]' not in shown and "self.sbuf = []" not in shown
    assert '    def reset(self):\n        """Forget what was read."""\n        self.rbuf = b""\n' in shown
    # A long base as its header and what it sets that the class does not; a short one whole, once.
    base = (
        'class Base:\n    """Holds a name and a tag."""\n\n    def __init__(self, name, tag):\n        self.tag = tag\n'
    )
    assert base in shown and "self.name = name\n" not in shown
    assert shown.count("class Short:") == 1 and "        self.short = 1" in shown
    # What was offered: Sock's methods (a staticmethod's first parameter is not self), then its bases in turn.
    tree = ast.parse(ATTRIBUTES)
    sock = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Sock")
    offered: list[tuple[int, list[str]]] = []
    names = attribute_outlines(
        tree, source_lines(ATTRIBUTES), sock, sock.body[-2], lambda at, s: not offered.append((at, s))
    )
    assert [shown[0].strip() for _, shown in offered] == [
        'def __init__(self, sock, name="s"):',
        "def reset(self):",
        "class Base:",
        "class Short:",
    ]
    assert names == ["sock", "rbuf", "wbuf", "sbuf", "name", "count", "opts", "tag", "short"]
    # Where the budget is short, the attributes come before the nearest definitions, after the must-haves; a base
    # that does not fit leaves out its methods too (never a method without its class's header).
    must = approximate_tokens(stub_context(ATTRIBUTES, stub, budget=0))
    tight = stub_context(ATTRIBUTES, stub, budget=must + 80, attributes=True)
    assert "self.sbuf = [" in tight and "def reset" not in tight and "self.tag" not in tight
    # A classmethod stub, or a function outside a class, shows what it did before.
    for source, name in ((ATTRIBUTES, "Sock.build"), (SOURCE, "area")):
        function = find_stub(source, name)
        assert stub_context(source, function, attributes=True) == stub_context(source, function)


def test_attributes_of_a_method_whose_body_shares_its_header_line() -> None:
    source = (
        "class A:\n    def __init__(\n        self,\n    ): self.a = 1; self.b = [\n"
        + "        0,\n" * 12
        + '    ]\n\n    def f(self):\n        """F."""\n        ...\n'
    )
    shown = stub_context(source, find_stub(source, "A.f"), budget=2000, attributes=True)
    assert shown.count("): self.a = 1; self.b = [") == 1 and shown.count("        0,") == 12


def test_attributes_through_a_generic_base_one_line_clauses_and_form_feeds() -> None:
    pad = "".join(f"        v{i} = {i}\n" for i in range(12))
    source = (
        "from typing import Generic, TypeVar\n\n\nclass Base(Generic[T]):\n    def __init__(self, x):\n"
        + pad
        + "        if x: self.b = 1\n        else: self.c = 2\n        if x:\n\f            self.d = 1\n"
        + "        try: self.e = 3\n        except E: pass\n\n\n"
        + 'class C(Base[int]):\n    def m(self):\n        """Doc."""\n        ...\n'
    )
    shown = stub_context(source, find_stub(source, "C.m"), budget=2000, attributes=True)
    assigned = "".join(f"        self.{name} = {value}\n" for name, value in ("b1", "c2", "d1", "e3"))
    assert "    def __init__(self, x):\n" + assigned in shown
    # A base named like an enclosing class is that class's namesake defined before, never the enclosing one.
    nested = (
        "class Node:\n    def __init__(self):\n        self.first = 1\n\n\n"
        "class Node:\n    def __init__(self):\n        self.second = 1\n\n"
        '    class Sub(Node):\n        def m(self):\n            """D."""\n            ...\n'
    )
    tree = ast.parse(nested)
    sub = tree.body[1].body[1]
    assert attribute_outlines(tree, source_lines(nested), sub, sub.body[0]) == ["first"]


def test_attributes_reach_the_prompt_only_when_asked(tmp_path: Path) -> None:
    from assistant.core.stubs import prepare_stub
    from assistant.core.target import Target

    from .conftest import ScriptedBackend

    path = tmp_path / "sock.py"
    path.write_text(ATTRIBUTES)
    target = Target.read(path)
    backend = ScriptedBackend(prefills_answer=True)
    texts = [
        "\n".join(m["content"] for m in prepare_stub("Sock.buffer", backend, target, attributes=on).prompt.messages)
        for on in (False, True)
    ]
    assert "self.sbuf" not in texts[0] and "self.sbuf = [" in texts[1]


def test_the_limit_grows_with_the_docstring() -> None:
    short = find_stub('def f(x):\n    """Add one."""\n', "f")
    long_doc = "Parse it.\n\n" + "    Args and details that describe a longer body.\n" * 20
    long = find_stub(f'def f(x):\n    """{long_doc}"""\n', "f")
    assert default_max_tokens(short, prefilled=True) == 160
    assert default_max_tokens(short, prefilled=True) < default_max_tokens(long, prefilled=True) <= 1024
    assert default_max_tokens(long, prefilled=False) > default_max_tokens(long, prefilled=True)


def changed_only_between(old: str, new: str, start: int, end: int) -> None:
    """`new` equals `old` outside old[start:end] (byte for byte)."""
    assert new.startswith(old[:start]) and new.endswith(old[end:])


def test_replaces_only_the_body_byte_identical_elsewhere() -> None:
    stub = find_stub(SOURCE, "Box.count")
    new = fill_body(SOURCE, stub, "total = 0\nfor _ in self.items:\n    total += 1\nreturn total\n")
    changed_only_between(SOURCE, new, stub.head_end, stub.body_end)
    assert '        """Return how many items the box holds."""\n        total = 0\n' in new
    assert "        for _ in self.items:\n            total += 1\n        return total\n\n    class Lid:" in new
    documented = find_stub(SOURCE, "documented")
    new = fill_body(SOURCE, documented, "return x\n")
    assert '    """Only a docstring so far."""\n    return x\n\n\nclass Box' in new
    ast.parse(new)


def test_crlf_tabs_form_feed_and_one_line_stubs() -> None:
    crlf = 'import os\r\n\r\ndef f(x):\r\n    """Add one."""\r\n    pass\r\n\r\n\r\ndef g():\r\n    return 1\r\n'
    new = fill_body(crlf, find_stub(crlf, "f"), "y = x + 1\nreturn y\n")
    assert new == crlf.replace("    pass\r\n", "    y = x + 1\r\n    return y\r\n")
    tabs = 'class A:\n\tdef f(self, x):\n\t\t"""Add one."""\n\t\t...\n\n\tdef g(self):\n\t\treturn 1\n'
    new = fill_body(tabs, find_stub(tabs, "A.f"), "if x:\n    return x + 1\nreturn 1\n")
    assert new == tabs.replace("\t\t...\n", "\t\tif x:\n\t\t\treturn x + 1\n\t\treturn 1\n")
    feed = 'x = 1\n\x0c\ndef f(x):\n    """Add one."""\n    ...\n\x0c\ndef g():\n    return 1\n'
    stub = find_stub(feed, "f")
    assert source_lines(feed)[stub.line - 1] == "def f(x):"
    new = fill_body(feed, stub, "return x + 1\n")
    assert new == feed.replace("    ...\n", "    return x + 1\n") and stub.dedented_head().startswith("def f(x):")
    one = "class A:\n    def f(self, x): ...  # later\n\n    def g(self): return 2\n"
    new = fill_body(one, find_stub(one, "f", requirement_given=True), "return x\n")
    assert new == "class A:\n    def f(self, x):\n        return x\n\n    def g(self): return 2\n"
    # A multi-line string in the new body keeps its inner lines as written.
    new = fill_body(SOURCE, find_stub(SOURCE, "Box.count"), 'text = """a\nb"""\nreturn len(text)\n')
    assert '        text = """a\nb"""\n        return len(text)\n' in new


def test_take_body_separates_the_function_from_whatever_else_the_sample_wrote() -> None:
    existing = ["helper", "after"]
    prefix = 'def area(radius: float) -> float:\n    """Return the area of a circle of this radius."""\n'
    good = take_body(prefix + "    return math.pi * radius ** 2\n", "area", existing, finished=True)
    assert isinstance(good, Taken) and good.body == "return math.pi * radius ** 2\n" and good.others == ()
    rewrite = prefix + "    return 3.14 * radius ** 2\n\n\ndef helper(x):\n    return x + x\n\ndef extra():\n    pass\n"
    taken = take_body(rewrite, "area", existing, finished=True)
    assert isinstance(taken, Taken) and taken.others == ("rewrites helper()", "adds extra()")
    # Cut off inside the body: reported; cut off while writing something after it: the body counts.
    assert take_body(prefix + "    total = math.pi * (\n", "area", existing, finished=False) == "cut off"
    assert take_body(prefix + "    x = 1\n    return x\n", "area", existing, finished=False) == "cut off"
    after_cut = take_body(prefix + "    return 1.0\n\n\ndef helper(x):\n    return (x +\n", "area", existing, False)
    assert isinstance(after_cut, Taken) and after_cut.body == "return 1.0\n"
    assert take_body("def area(:\n", "area", existing, finished=True) == "syntax"
    # A chat answer: the whole function, maybe inside the class, with an import the file may lack.
    chat = "import re\n\nclass Box:\n    def count(self):\n        return len(self.items)\n"
    taken = take_body(chat, "count", existing, finished=True)
    assert isinstance(taken, Taken) and taken.body == "return len(self.items)\n" and taken.imports == ("import re",)
    wrapped = "class Box:\n    def __init__(self):\n        pass\n\n    def count(self):\n        return 0\n"
    taken = take_body(wrapped, "count", ["__init__"], finished=True)
    assert isinstance(taken, Taken) and taken.others == ("rewrites Box.__init__()",)


def test_collect_reports_cut_off_samples_and_drops_stubs_and_duplicates() -> None:
    stub = find_stub(SOURCE, "area")
    prefix = stub.dedented_head() + "\n"
    texts = [
        ("    return math.pi * radius ** 2\n", "stop"),
        ("    return math.pi * radius**2  # same tree\n", "stop"),
        ("    r2 = radius * radius\n    return math.pi * (\n", "length"),
        ("    pass\n", "stop"),
        ("    return 3.14 * radius ** 2\n\n\ndef helper(x):\n    return x + x\n", "stop"),
    ]
    completions = [Completion(text=t, tokens=9, finish_reason=f) for t, f in texts]
    kept, dropped, cut = collect_stub(completions, stub, prefix, ["helper"])
    assert [c.sample for c, _ in kept] == [0, 4] and kept[1][0].dropped == ("rewrites helper()",)
    assert dict(dropped) == {"duplicate": 1, "cut off": 1, "still a stub": 1}
    assert [c.sample for c in cut] == [2] and cut[0].tokens == 9
    assert kept[0][0].code.startswith("def area(radius: float) -> float:\n") and "    return math.pi" in kept[0][0].code


def test_bodies_that_do_not_compile_or_need_another_signature_are_dropped() -> None:
    stub = find_stub('def f(x):\n    """Add one."""\n    ...\n', "f")
    texts = [
        "    return await x\n",  # parses, but `await` outside an async function does not compile
        "    nonlocal x\n    return x\n",
        "def f(x, y=1):\n    return x + y\n",  # the whole function, with a parameter the stub lacks
        "def f(value):\n    return 1\n",  # renamed, but the body uses none of it: it fits the stub
        "def f(x, y=None):\n    y = x + 2\n    return y\n",  # `y` is bound in the body: it fits too
    ]
    completions = [Completion(text=f"```python\n{t}```", tokens=9, finish_reason="stop") for t in texts]
    kept, dropped, _ = collect_stub(completions, stub, "", [])
    assert dict(dropped) == {"syntax": 2, "another signature": 1}
    assert [c.sample for c, _ in kept] == [3, 4] and "def f(x):" in kept[0][0].code


def test_a_body_whose_first_indented_line_continues_a_bracket_keeps_its_nesting() -> None:
    stub = find_stub('class A:\n    def f(self, x, y):\n        """Sum of products."""\n        ...\n', "A.f")
    body = "r = g(\n        a, b)\nfor p in x:\n    for q in y:\n        r += p * q\nreturn r\n"
    text = 'class A:\n    def f(self, x, y):\n        """Sum of products."""\n        ...\n'
    new = fill_body(text, stub, body)
    ast.parse(new)  # the first indented line (8 spaces, a continuation) once set the unit: `r +=` left its loop
    assert "            for q in y:\n                r += p * q\n        return r" in new


def test_a_candidate_that_rewrote_a_neighbour_ranks_last_whatever_its_score() -> None:
    clean = Ranked(Candidate("a", 0), {"logprob": Score(-2.0, "")})
    copier = Ranked(Candidate("b", 1, dropped=("rewrites helper()",)), {"logprob": Score(-0.1, "")})
    assert sorted([copier, clean], key=lambda r: r.key(["logprob"])) == [clean, copier]


# -- the command, end to end against a scripted server ---------------------------------------------------------


class _LocalTripwire:
    @classmethod
    def load(cls, *args: Any, **kwargs: Any) -> None:
        raise AssertionError("the local model was loaded")


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setitem(backends.BACKENDS, "local", f"{__name__}:_LocalTripwire")
    path = tmp_path / "repo"
    path.mkdir()
    (path / "shapes.py").write_bytes(SOURCE.replace("\n", "\r\n").encode())  # CRLF: kept as it is
    bank = {"requirement": "return one", "code": "def one():\n    return 1\n"}
    (path / "bank.jsonl").write_text(json.dumps(bank) + "\n", encoding="utf-8")
    git(path, "init", "-q")
    git(path, "add", ".")
    git(path, "-c", "core.autocrlf=false", "commit", "-qm", "init")
    monkeypatch.chdir(path)
    return path


def run(args: list[str], url: str) -> Any:
    common = ["--backend", "openai", "--base-url", url, "--model", "tiny-coder", "--bank", "bank.jsonl", "-k", "0"]
    common += ["--ranker", "first"]  # the scripted answers carry no log-probabilities
    return CliRunner().invoke(app, [*args, *common], env={**os.environ, "OPENAI_API_KEY": "sk-test"})


GOOD = "    return math.pi * radius ** 2\n```\n"
CUT = "    r2 = radius * radius\n    return math.pi * (r2 +"
NEIGHBOUR = "    return 3.14 * radius ** 2\n\n\ndef helper(x):\n    return x + x\n```\n"


def test_generate_function_prefilled_reports_cut_off_and_neighbours_and_applies_only_the_body(repo: Path) -> None:
    script = Script(answers=[(NEIGHBOUR, "stop"), (CUT, "length"), (GOOD, "stop")])
    before = (repo / "shapes.py").read_bytes()
    with openai_server(script) as (url, _):
        args = ["generate", "--file", "shapes.py", "--function", "area", "-n", "3", "--api", "completions"]
        result = run([*args, "--json"], url)
        assert result.exit_code == 0, result.output
        data = json.loads(result.stdout)
        sent = script.requests[0]
        # The answer is prefilled with the stub's own signature and docstring; the limit is sized to the stub.
        assert sent["prompt"].endswith(
            '```python\ndef area(radius: float) -> float:\n    """Return the area of a circle of this radius."""\n'
        )
        assert sent["max_tokens"] == data["max_new_tokens"] == 160
        assert "import math" in sent["prompt"] and "...  # <- write this body" in sent["prompt"]
        assert data["function"]["function"] == "area" and data["function"]["form"] == "..."
        assert [c["other_functions"] for c in data["candidates"]] == [[], ["rewrites helper()"]]
        assert data["cut_off"] and data["cut_off"][0]["sample"] == 1 and data["dropped"]["cut off"] == 1
        assert "warning: 1 of 3 samples ran into the 160-token limit" in result.stderr
        best = data["candidates"][0]["edit"]
        assert best["actions"] == ["fill area"]
        assert "dropped: rewrites helper()" in data["candidates"][1]["edit"]["actions"]
        changed = [
            line for line in best["diff"].split("\n") if line and line[:1] in "+-" and line[:3] not in ("+++", "---")
        ]
        assert changed == ["-    ...\r", "+    return math.pi * radius ** 2\r"]

        shown = run([*args, "--explain"], url)
        assert shown.exit_code == 0, shown.output
        assert "Filling area (line 14, body ...) from its docstring" in shown.stdout
        assert "also rewrote helper(): left out of its edit" in shown.stdout
        assert "Cut off at 160 tokens" in shown.stdout

        applied = run([*args, "--apply"], url)
        assert applied.exit_code == 0, applied.output
    after = (repo / "shapes.py").read_bytes()
    assert after == before.replace(b'radius."""\r\n    ...\r\n', b'radius."""\r\n    return math.pi * radius ** 2\r\n')


def test_generate_function_over_chat_takes_the_body_of_the_whole_function(repo: Path) -> None:
    code = "class Box:\n    @property\n    def count(self) -> int:\n        return len(self.items)\n"
    answer = f"Sure:\n```python\n{code}```\n"
    script = Script(answers=[(answer, "stop")])
    with openai_server(script) as (url, _):
        result = run(["generate", "--file", "shapes.py", "--function", "Box.count", "-n", "1", "--json"], url)
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    request = script.requests[0]["messages"][-1]["content"]
    assert "Reply with the whole function `count`" in request
    assert data["candidates"][0]["other_functions"] == []
    assert "+        return len(self.items)\r" in data["candidates"][0]["edit"]["diff"]


def test_a_method_that_reads_an_attribute_its_class_never_has_ranks_last_and_says_why(repo: Path) -> None:
    # `self.contents`: Box sets `items`, nothing sets `contents` (an AttributeError when it runs);
    # results/correctness-undefined-attributes: of 43 such samples of the 1.5B, none passed its tests.
    wrong = "class Box:\n    @property\n    def count(self) -> int:\n        return len(self.contents)\n"
    right = "class Box:\n    @property\n    def count(self) -> int:\n        return len(self.items) + self.size\n"
    script = Script(answers=[(f"```python\n{wrong}```\n", "stop"), (f"```python\n{right}```\n", "stop")])
    with openai_server(script) as (url, _):
        args = ["generate", "--file", "shapes.py", "--function", "Box.count", "-n", "2", "--no-repo-tests"]
        shown = run([*args, "--json"], url)
        text = run(args, url).stdout
    first, second = json.loads(shown.stdout)["candidates"]
    assert (first["undefined"], second["undefined"]) == ([], ["self.contents"])
    said = "reads `self.contents`, defined nowhere in the file (an AttributeError when it runs): ranked below"
    assert said in " ".join(text.split())


def test_function_without_its_file_finds_the_one_stub_in_the_repo_and_fills_it(repo: Path) -> None:
    # From a subfolder, as a user working deep in a project would type it: the stub is looked for in the repo.
    (repo / "docs").mkdir()
    os.chdir(repo / "docs")
    script = Script(answers=[(GOOD, "stop")])
    with openai_server(script) as (url, _):
        result = run(["generate", "--function", "area", "-n", "1", "--api", "completions", "--apply", "--json"], url)
    assert result.exit_code == 0, result.output
    assert "Found the stub area in ../shapes.py" in result.stderr
    assert json.loads(result.stdout)["file"] == "../shapes.py"
    assert b"    return math.pi * radius ** 2\r\n" in (repo / "shapes.py").read_bytes()


def test_locating_a_stub_finds_untracked_files_and_names_every_other_outcome(tmp_path: Path) -> None:
    from assistant.core.stubs.find import locate_stub

    stub, body = 'def parse(text):\n    """Parse it."""\n    ...\n', "def parse(text):\n    return text\n"
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "a.py").write_text(stub)
    (tmp_path / "b.py").write_text(body + 'class C:\n    def run(self):\n        """Run."""\n        pass\n')
    (tmp_path / "broken.py").write_text("def parse(:\n")  # does not parse: passed over
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", "pkg/a.py", "b.py")
    (tmp_path / "new.py").write_text('def fresh():\n    """New."""\n    pass\n')  # untracked, not ignored
    (tmp_path / ".gitignore").write_text("ignored.py\n")
    (tmp_path / "ignored.py").write_text('def hidden():\n    """No."""\n    ...\n')
    assert locate_stub("parse", tmp_path / "pkg") == tmp_path / "pkg" / "a.py"
    assert locate_stub("C.run", tmp_path) == locate_stub("run", tmp_path) == tmp_path / "b.py"
    assert locate_stub("fresh", tmp_path) == tmp_path / "new.py"
    with pytest.raises(UsageError, match=r"no Python file .* has a stub 'hidden'") as nowhere:
        locate_stub("hidden", tmp_path)
    assert nowhere.value.setting == "function:nowhere"
    (tmp_path / "b.py").write_text(stub)
    with pytest.raises(UsageError, match=r"'parse' is a stub in 2 files of .* \(b.py, pkg/a.py\)") as two:
        locate_stub("parse", tmp_path)
    assert two.value.setting == "function:ambiguous"
    (tmp_path / "b.py").write_text(body)
    (tmp_path / "pkg" / "a.py").write_text(body)
    with pytest.raises(UsageError, match=r"\('parse' has a body in b.py, pkg/a.py\)"):
        locate_stub("parse", tmp_path)
    outside = tmp_path.parent / f"{tmp_path.name}-plain"
    outside.mkdir()
    with pytest.raises(UsageError, match="no git work tree") as none:
        locate_stub("parse", outside)
    assert none.value.setting == "function:no_repo"


def test_locating_a_stub_reads_no_file_a_repo_links_to_and_picks_what_the_fill_fills(tmp_path: Path) -> None:
    from assistant.core.stubs.find import locate_stub

    secret = tmp_path / "elsewhere.py"
    secret.write_text('def leak():\n    """Outside the repo."""\n    ...\n')
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "util.py").symlink_to(secret)  # a repo's link never has a file outside it read
    (repo / "zero.py").symlink_to("/dev/zero")  # nor one that never ends
    (repo / "bom.py").write_bytes('\ufeffdef marked():\n    """A BOM first."""\n    ...\n'.encode())
    # `run` by name: the module-level function with a body, as the fill reads it, not the method stub beside it.
    (repo / "c.py").write_text(
        'def run():\n    return 1\n\n\nclass A:\n    def run(self):\n        """Run."""\n        ...\n'
    )
    git(repo, "init", "-q")
    with pytest.raises(UsageError, match="has a stub 'leak'"):
        locate_stub("leak", repo)
    assert locate_stub("marked", repo) == repo / "bom.py"
    with pytest.raises(UsageError, match=r"\('run' has a body in c.py\)"):
        locate_stub("run", repo)
    assert locate_stub("A.run", repo) == repo / "c.py"
    # Ambiguous in its file, or written so that it cannot be filled: found all the same, the fill says which.
    (repo / "two.py").write_text('class B:\n    def go(self):\n        """Go."""\n        ...\n\n\n' * 1)
    (repo / "two.py").write_text(
        (repo / "two.py").read_text() + 'class C:\n    def go(self):\n        """Go."""\n        ...\n'
    )
    assert locate_stub("go", repo) == repo / "two.py"


def test_every_sample_cut_off_retries_once_with_twice_the_limit(repo: Path) -> None:
    script = Script(answers=[(CUT, "length"), (CUT, "length"), (GOOD, "stop")])
    with openai_server(script) as (url, _):
        args = ["generate", "--file", "shapes.py", "--function", "area", "-n", "2", "--api", "completions", "--json"]
        result = run(args, url)
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert [r["max_tokens"] for r in script.requests] == [160, 320]
    # The retry asks for as many samples as were cut off (2): one finishes, one is cut off again.
    assert (
        data["max_new_tokens"] == 320 and [c["sample"] for c in data["cut_off"]] == [0, 1, 3] and data["samples"] == 4
    )
    assert len(data["candidates"]) == 1


def test_a_cut_off_greedy_sample_is_carried_on_not_decoded_again(repo: Path) -> None:
    # Greedy: a draw at twice the limit would repeat the cut-off tokens, so the retry prefills them and asks
    # only for the rest (a sampled retry, above, draws afresh).
    script = Script(answers=[(CUT, "length"), (" 0)\n```\n", "stop")])
    with openai_server(script) as (url, _):
        args = ["generate", "--file", "shapes.py", "--function", "area", "--temperature", "0", "--api", "completions"]
        result = run([*args, "--json"], url)
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    first, retry = script.requests
    assert first["max_tokens"] == retry["max_tokens"] == 160 and retry["temperature"] == 0
    assert retry["prompt"] == first["prompt"] + CUT
    assert data["max_new_tokens"] == 320 and [c["sample"] for c in data["cut_off"]] == [0] and data["samples"] == 2
    assert "+    return math.pi * (r2 + 0)\r" in data["candidates"][0]["edit"]["diff"]


def test_a_cut_off_greedy_sample_going_round_in_a_loop_is_not_retried(repo: Path) -> None:
    # More room would only lengthen a greedy loop: no second request, and the warning says why.
    loop = "    r2 = radius * radius\n" + "    if r2:\n        r2 = r2 * r2\n" * 5 + "    if r2:\n        r2 ="
    script = Script(answers=[(loop, "length")])
    with openai_server(script) as (url, _):
        args = ["generate", "--file", "shapes.py", "--function", "area", "--temperature", "0", "--api", "completions"]
        result = run([*args, "--json"], url)
        shown = run(args, url)
    assert result.exit_code == shown.exit_code == 1, result.output  # no candidate
    data = json.loads(result.stdout)
    assert len(script.requests) == 2  # one each run: neither retried
    assert data["max_new_tokens"] == 160 and data["samples"] == 1 and data["candidates"] == []
    assert data["cut_off"][0]["repeating"] is True
    assert "was left out; it went round in a loop" in " ".join(shown.stderr.split())


def test_samples_that_wrote_nothing_are_drawn_once_more_in_their_place(repo: Path) -> None:
    echo = "    ...  # <- write this body\n```\n"  # the small model's habit: it copies the marker it was shown
    alt = "    return radius * radius * math.pi\n```\n"
    # Three samples: an echo, a body, one that ends after the docstring; the two empty ones are drawn again,
    # and the one that echoes again stays dropped.
    script = Script(answers=[(echo, "stop"), (GOOD, "stop"), ("```\n", "stop"), (alt, "stop"), (echo, "stop")])
    args = ["generate", "--file", "shapes.py", "--function", "area", "-n", "3", "--api", "completions"]
    first = Script(answers=[(echo, "stop"), (GOOD, "stop"), ("```\n", "stop")])
    with openai_server(first) as (url, _):
        plain = run([*args, "--no-redraw", "--json"], url)  # asked not to: the empty samples are only dropped
    assert plain.exit_code == 0, plain.output
    assert json.loads(plain.stdout)["redrawn"] == 0 and len(first.requests) == 1
    with openai_server(script) as (url, _):
        result = run([*args, "--json"], url)  # on by default
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert [r.get("n", 1) for r in script.requests] == [3, 1, 1]  # each redraw on its own seed
    assert data["redrawn"] == 2 and data["samples"] == 3 and data["dropped"] == {"still a stub": 1}
    assert sorted(c["sample"] for c in data["candidates"]) == [0, 1]

    with openai_server(Script(answers=[(echo, "stop"), (alt, "stop")])) as (url, _):
        shown = run(
            ["generate", "--file", "shapes.py", "--function", "area", "-n", "1", "--api", "completions", "--redraw"],
            url,
        )
    assert shown.exit_code == 0, shown.output
    assert "(1 of 1 samples; 1 redrawn after writing nothing)" in shown.stdout


def test_function_errors_are_one_line_before_any_request(repo: Path) -> None:
    script = Script()
    with openai_server(script) as (url, _):
        cases = [
            (["generate", "--function", "helper"], "no Python file of"),  # --function alone looks in the repo
            (["generate", "--function", "nope"], "has a stub 'nope'"),
            (["generate", "--file", "shapes.py", "--function", "helper"], "helper (shapes.py:9) is not a stub"),
            (["generate", "--file", "shapes.py", "--function", "nope"], "there is no function 'nope'"),
            (["generate", "--file", "shapes.py"], "the requirement is empty"),
        ]
        for args, fragment in cases:
            result = run(args, url)
            lines = result.stderr.strip().splitlines()
            assert result.exit_code == 2 and len(lines) == 1 and fragment in lines[0], result.stderr
    assert script.requests == []


@pytest.mark.model
def test_fills_a_real_stub_with_the_local_model(tmp_path: Path, backend: Any) -> None:
    from assistant.core.stubs import fill_stub

    path = tmp_path / "mathutils.py"
    text = (
        'def is_even(n):\n    """Return True when n is even."""\n    return n % 2 == 0\n\n\n'
        'def count_even(values):\n    """Return how many numbers in the list are even."""\n    ...\n\n\n'
        'def cube_all(values):\n    """Return the cubes of the numbers in a list."""\n'
        "    return [v ** 3 for v in values]\n"
    )
    path.write_text(text)
    from assistant.backends import SamplingParams

    result = fill_stub("count_even", backend, file=path, k=0, params=SamplingParams(n=2, seed=0))
    assert result.candidates, result.dropped
    edit = result.edits[0]
    assert edit is not None
    removed = [line for line in edit.diff.splitlines() if line.startswith("-") and not line.startswith("---")]
    assert removed == ["-    ..."]
    new = edit.new
    assert new.startswith(text.split("    ...\n")[0]) and new.endswith(text.split("    ...\n")[1])
    ast.parse(new)


class _Fragments:
    """A fragment retriever isolated from any index: the given fragments in order, less those excluded."""

    def __init__(self, fragments: list) -> None:
        self.fragments = fragments
        self.queries: list[str] = []

    def search(self, query: str, k: int, exclude=None) -> list:
        from assistant.core.retrieve import Hit

        self.queries.append(query)
        kept = [f for f in self.fragments if exclude is None or not exclude(f)]
        return [Hit(f, 1.0 / (i + 1), "test", "") for i, f in enumerate(kept[:k])]


def test_fragments_of_other_files_come_first_in_the_prompt_queried_by_the_code_before_the_body(repo: Path) -> None:
    from assistant.core.stubs import fragment_query, prepare_stub
    from assistant.core.target import Target
    from assistant.indexing.fragments import split_fragments

    from .conftest import ScriptedBackend

    other = "def circle_area(r):\n    return math.pi * r * r\n"
    pool = [
        *split_fragments(SOURCE, "shapes.py"),  # the target file's own: its code is in the prompt already
        *split_fragments(other, "geometry.py"),
        *split_fragments("UNIT = 2\n", "units.py"),
    ]
    fragments = _Fragments(pool)
    target = Target.read(repo / "shapes.py")
    request = prepare_stub("area", ScriptedBackend(prefills_answer=True), target, k=2, root=repo, fragments=fragments)
    text = target.text
    stub = request.stub
    assert fragments.queries == [fragment_query(text, stub)]
    query_lines = fragments.queries[0].splitlines()
    docstring = '    """Return the area of a circle of this radius."""'
    assert query_lines[-2:] == ["def area(radius: float) -> float:", docstring]
    assert len(query_lines) == 15  # the whole file above the body: it is shorter than the 20-line window
    assert request.hits == [] and [h.example.path for h in request.fragments] == ["geometry.py", "units.py"]
    asked = request.prompt.messages[-1]["content"]
    assert asked.startswith("Code from other places of this repository that may help:")
    # The likeliest fragment last, nearest the file; no demonstration turns.
    assert asked.index("# units.py:1") < asked.index("# geometry.py:1") < asked.index("This is `shapes.py`")
    assert "# shapes.py:" not in asked and len(request.prompt.messages) == 2
    assert request.stub.qualname == "area" and _described_fragments(request) == ["geometry.py:1", "units.py:1"]


def _described_fragments(request) -> list[str]:
    from assistant.core.stubs import _described

    return _described(request)["fragments"]


def test_own_file_demonstrations_let_the_files_other_functions_in_but_never_the_stub(repo: Path) -> None:
    from assistant.code.extract import extract_python
    from assistant.core.stubs import prepare_stub
    from assistant.core.target import Target

    from .conftest import ScriptedBackend

    # The index holds an older `area` with a body (written before its body was cut back to a stub).
    old_area = 'def area(radius: float) -> float:\n    """Old."""\n    return math.pi * radius**2\n'
    pool = [
        *extract_python(old_area, "shapes.py"),  # first: only the filter keeps it out of the top 3
        *[e for e in extract_python(SOURCE, "shapes.py") if e.name != "area"],
        *extract_python("def circle_area(r):\n    return math.pi * r * r\n", "geometry.py"),
    ]
    retriever = _Fragments(pool)  # returns the pool in order, less what the caller excludes
    target = Target.read(repo / "shapes.py")
    backend = ScriptedBackend(prefills_answer=True)
    default = prepare_stub("area", backend, target, retriever=retriever, k=3, root=repo)
    own = prepare_stub("area", backend, target, retriever=retriever, k=3, root=repo, own_file=True)
    assert [h.example.source for h in default.hits] == ["geometry.py:1"]
    assert [h.example.name for h in own.hits] == ["helper", "perimeter", "load"]
    assert all(h.example.name != "area" for h in own.hits)
    # The siblings are demonstration turns, whole; the old body of the stub is in none of the prompts.
    turns = [m["content"] for m in own.prompt.messages]
    assert any("return 2 * x" in turn for turn in turns[:-1])
    assert not any("math.pi * radius**2" in m["content"] for p in (default, own) for m in p.prompt.messages)


def test_a_stubs_docstring_examples_become_tests_only_where_they_cannot_be_misread() -> None:
    from assistant.core.stubs.examples import example_tests

    source = '''import re

LIMIT = 3


def digits(n):
    """The digits of `n`.

    >>> digits(-507)
    [5, 0, 7]
    >>> digits(LIMIT)
    [3]
    >>> print(digits(1))
    [1]
    >>> d = digits(42)
    >>> digits(12)
    [1,
     2]
    >>> digits(9)
    Traceback (most recent call last):
    >>> [digits(x) for x in range(2)]
    [[0], [1]]
    >>> other(1)
    1
    assert digits(10) == [1, 0]
    >>> digits(5) == [5]
    True
    >>> digits(1), digits(2)
    ([1], [2])
    >>> digits(7)  # one digit
    [7]
    """
    ...


class Box:
    def size(self):
        """The size.

        >>> size()
        1
        """
        ...
'''
    tree = ast.parse(source)
    tests = example_tests(find_stub(source, "digits"), tree)
    # A literal value on one line, names the module has: taken. Output printed, a value over two lines, a name the
    # example binds itself, an exception, another function's example: left to agree.
    assert tests[:3] == (
        "assert digits(-507) == [5, 0, 7]",
        "assert digits(LIMIT) == [3]",
        "assert digits(10) == [1, 0]",
    )
    # Parenthesized where it must be, the comment dropped: `digits(5) == [5] == True` would chain and fail, and
    # `digits(1), digits(2) == ...` would be an assert with a message, passing whatever digits returns.
    assert tests[3:] == (
        "assert (digits(5) == [5]) == True",
        "assert (digits(1), digits(2)) == ([1], [2])",
        "assert digits(7) == [7]",
    )
    assert example_tests(find_stub(source, "Box.size"), tree) == ()  # a method's example needs an instance
