"""The `assist` command as a user runs it: a real subprocess, real models, a scratch git repo."""

import ast
import json
import os
import subprocess
import sys

import pytest

from .conftest import git


def assist(*args, cwd, env=None):
    return subprocess.run(
        [sys.executable, "-m", "assistant", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=900,
    )


def one_line_error(result, code, fragment):
    assert result.returncode == code, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and fragment in lines[0], result.stderr


def test_help_explains_the_commands(tmp_path):
    result = assist("--help", cwd=tmp_path)
    assert result.returncode == 0
    for command in ("index", "generate", "models"):
        assert command in result.stdout


def test_bad_input_gives_one_line_errors_and_writes_nothing(tmp_path):
    one_line_error(assist("index", str(tmp_path), cwd=tmp_path), 2, "is not inside a git repository")
    one_line_error(assist("index", str(tmp_path / "missing"), cwd=tmp_path), 2, "does not exist")
    one_line_error(assist("generate", "   ", cwd=tmp_path), 2, "the requirement is empty")
    one_line_error(assist("generate", "x", "--apply", cwd=tmp_path), 2, "--apply needs --file")
    one_line_error(assist("generate", "x", "--test", "assert (", cwd=tmp_path), 2, "test 1 does not parse")
    bank = tmp_path / "bank.jsonl"
    bank.write_text('{"requirement": "a", "code": "x = 1"}\nnot json\n')
    one_line_error(assist("index", "--bank", str(bank), cwd=tmp_path), 2, "bank.jsonl:2: not valid JSON")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bank.jsonl"]


def test_corrupt_model_file_is_reported_with_the_fix(tmp_path, backend):
    models = tmp_path / "models"
    source = backend.spec.cache_dir
    target = models / source.name
    (target / "hf").mkdir(parents=True)
    for item in (source / "hf").iterdir():
        if item.name != "model.safetensors":
            (target / "hf" / item.name).symlink_to(item)
    size = (source / "hf" / "model.safetensors").stat().st_size
    with open(target / "hf" / "model.safetensors", "wb") as handle:  # right size, garbage content
        handle.truncate(size)
    (target / "manifest.json").write_text((source / "manifest.json").read_text())
    result = assist("generate", "add two numbers", "-k", "0", cwd=tmp_path, env={"ASSIST_MODELS_DIR": str(models)})
    one_line_error(result, 1, "run `assist models pull qwen2.5-coder-0.5b --force`")


@pytest.mark.model
def test_index_generate_json_and_apply_in_a_scratch_repo(scratch_repo):
    result = assist("index", "--json", cwd=scratch_repo)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["examples"] == 3

    request = ["generate", "return the squares of the even numbers in a list", "--json", "--max-new-tokens", "96"]
    result = assist(*request, "-n", "2", "--seed", "0", cwd=scratch_repo)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert {d["source"] for d in data["demonstrations"]} == {"mathutils.py:1", "mathutils.py:6", "text/words.py:1"}
    best = data["candidates"][0]
    ast.parse(best["code"])
    assert isinstance(best["score"], float) and best["scores"]["logprob"]["why"].startswith("mean log-prob")
    assert git(scratch_repo, "status", "--porcelain") == ""  # no --apply: nothing written

    result = assist(*request, "-n", "3", "--seed", "0", "--file", "mathutils.py", "--apply", cwd=scratch_repo)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["applied"] is True and data["candidates"]
    # The target file's own functions are in the prompt already, so they are not demonstrations too.
    assert [d["source"] for d in data["demonstrations"]] == ["text/words.py:1"]
    best = data["candidates"][0]

    # Only the target file changed, and git shows exactly the printed diff.
    assert git(scratch_repo, "status", "--porcelain") == " M mathutils.py\n"
    printed = [line for line in best["edit"]["diff"].splitlines() if not line.startswith(("---", "+++", "@@"))]
    shown = [
        line
        for line in git(scratch_repo, "diff").splitlines()
        if line[:1] in " +-" and not line.startswith(("---", "+++"))
    ]
    assert printed == shown


def test_unparsable_target_file_fails_before_any_model_loads(tmp_path):
    (tmp_path / "broken.py").write_text("def broken(:\n")
    result = assist("generate", "add two numbers", "--file", "broken.py", cwd=tmp_path)
    one_line_error(result, 2, "broken.py does not parse (line 1")
