import json

import pytest

from assistant.code.examples import Example, read_bank
from assistant.errors import UsageError


def write(tmp_path, lines):
    path = tmp_path / "bank.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_reads_bank_and_mbpp_style_records(tmp_path):
    path = write(
        tmp_path,
        [
            json.dumps(
                {
                    "requirement": "add",
                    "code": "def add(a, b):\n    return a + b",
                    "tests": ["assert add(1, 2) == 3"],
                    "entry_point": "add",
                }
            ),
            "",
            json.dumps(
                {
                    "text": "Write a function to negate.",
                    "code": "def neg(x): return -x",
                    "test_list": ["assert neg(1) == -1"],
                }
            ),
        ],
    )
    first, second = read_bank(path)
    assert first.tests == ("assert add(1, 2) == 3",) and first.entry_point == "add"
    assert second.requirement == "Write a function to negate." and second.start_line == 3
    assert Example.from_json(first.to_json()) == first


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{not json", "bank.jsonl:2: not valid JSON"),
        ("[1, 2]", "bank.jsonl:2: expected a JSON object"),
        ('{"code": "x = 1"}', "bank.jsonl:2: missing a non-empty string 'requirement'"),
        ('{"requirement": "r", "code": "x", "tests": [1]}', "bank.jsonl:2: 'tests' must be a list of strings"),
    ],
)
def test_bad_lines_name_file_and_line(tmp_path, line, message):
    path = write(tmp_path, [json.dumps({"requirement": "ok", "code": "x = 1"}), line])
    with pytest.raises(UsageError, match=message):
        read_bank(path)


def test_missing_bank(tmp_path):
    with pytest.raises(UsageError, match="does not exist"):
        read_bank(tmp_path / "nope.jsonl")
