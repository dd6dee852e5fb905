import subprocess

from assistant.code.examples import Example
from assistant.code.extract import extract_python, first_paragraph, git_blob_hash, humanize_identifier
from assistant.code.tokenize import tokenize

SOURCE = '''import functools


def documented(a, b=1):
    """Add two numbers.

    More detail here.
    """
    return a + b


@functools.cache
def undocumented_helper(xs: list[int]) -> int:
    return sum(xs)


class Shape:
    def area(self):
        """Compute the area."""
        return 0

    class Inner:
        async def fetch(self):
            return 1
'''


def test_extracts_functions_methods_with_spans_and_requirements():
    examples = {e.name: e for e in extract_python(SOURCE, "pkg/mod.py", "abc")}
    assert set(examples) == {"documented", "undocumented_helper", "Shape.area", "Shape.Inner.fetch"}
    doc = examples["documented"]
    assert doc.requirement == "Add two numbers."
    assert (doc.start_line, doc.end_line, doc.path, doc.blob) == (4, 9, "pkg/mod.py", "abc")
    helper = examples["undocumented_helper"]
    # No docstring: the name in words plus the signature; the decorator belongs to the span.
    assert helper.requirement == "undocumented helper: undocumented_helper(xs: list[int]) -> int"
    assert helper.start_line == 12 and helper.code.startswith("@functools.cache\ndef undocumented_helper")
    assert examples["Shape.area"].code.startswith("def area(self):")  # dedented


def test_broken_file_yields_nothing():
    assert extract_python("def broken(:\n", "x.py") == []


def test_blob_hash_matches_git(tmp_path):
    data = b"print('hi')\n"
    (tmp_path / "f.py").write_bytes(data)
    expected = subprocess.run(["git", "hash-object", "f.py"], cwd=tmp_path, capture_output=True, text=True).stdout
    assert git_blob_hash(data) == expected.strip()


def test_identifier_helpers():
    assert humanize_identifier("parseHTTPResponse_v2") == "parse http response v 2"
    assert first_paragraph("  Line one\n  continues.\n\n  Second.") == "Line one continues."


def test_tokenizer_splits_identifiers_and_keeps_compounds():
    tokens = tokenize("getUserName from user_records, then sort")
    assert {"get", "user", "name", "getusername", "records", "user_records", "sort"} <= set(tokens)
    assert "from" not in tokens and "the" not in tokenize("the list")


def test_code_spans_follow_ast_lines_across_form_feeds_and_u2028():
    source = 'X = "a\u2028b"\n\x0c\ndef first():\n    """One."""\n    return 1\n\n\ndef second():\n    return 2\n'
    first, second = extract_python(source, "m.py")
    assert first.code == 'def first():\n    """One."""\n    return 1'
    assert second.code == "def second():\n    return 2"


def test_read_tests_chunks_follow_ast_lines(tmp_path):
    from assistant.core.generation import read_tests

    path = tmp_path / "t.py"
    path.write_text('S = "x\u2028y"\nassert len(S) == 3\n\x0c\nassert 1 + 1 == 2\n', encoding="utf-8")
    assert read_tests(path) == ['S = "x\u2028y"\nassert len(S) == 3', "assert 1 + 1 == 2"]


def test_written_requirement_tells_a_docstring_from_a_made_up_requirement() -> None:
    from assistant.code.extract import written_requirement

    source = '@cache\ndef documented(x):\n    """Say what it does."""\n    return x\n\n\ndef bare(x):\n    return x\n'
    documented, bare = extract_python(source, "pkg/m.py")
    assert written_requirement(documented) and not written_requirement(bare)
    assert written_requirement(Example("Double a number.", "def f(x):\n    return 2 * x"))  # a bank's prompt
