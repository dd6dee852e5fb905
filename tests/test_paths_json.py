"""paths.read_json_object: what the sandbox reads back from a run's folder, which the run itself could rewrite."""

from __future__ import annotations

import os
from pathlib import Path

from assistant.paths import read_json_object


def test_a_json_object_is_read(tmp_path: Path) -> None:
    path = tmp_path / "results.json"
    path.write_text('{"outcomes": {"t::a": "passed"}}', encoding="utf-8")
    assert read_json_object(path, 1000) == {"outcomes": {"t::a": "passed"}}


def test_anything_else_is_none(tmp_path: Path) -> None:
    cases = {
        "missing.json": None,
        "list.json": b"[1, 2]",
        "broken.json": b'{"a": ',
        "latin1.json": '{"a": "\xe9"}'.encode("latin-1"),
        "deep.json": b"[" * 100_000 + b"]" * 100_000,
        "large.json": b'{"a": "' + b"x" * 2000 + b'"}',
    }
    for name, data in cases.items():
        if data is not None:
            (tmp_path / name).write_bytes(data)
        assert read_json_object(tmp_path / name, 1000 if name == "large.json" else 1_000_000) is None, name


def test_a_link_or_a_fifo_is_not_followed(tmp_path: Path) -> None:
    (tmp_path / "real.json").write_text("{}", encoding="utf-8")
    (tmp_path / "link.json").symlink_to(tmp_path / "real.json")
    (tmp_path / "zero.json").symlink_to("/dev/zero")  # read forever if it were followed
    os.mkfifo(tmp_path / "fifo.json")  # open blocks forever if it were opened for reading without O_NONBLOCK
    for name in ("link.json", "zero.json", "fifo.json"):
        assert read_json_object(tmp_path / name, 1000) is None, name
    assert read_json_object(tmp_path / "real.json", 1000) == {}
