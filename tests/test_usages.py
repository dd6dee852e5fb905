"""The project's functions a stub's file uses, shown in its prompt (`generate --function --apis`)."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from assistant.code.examples import Example
from assistant.core.usages import is_test_path, outline, used_definitions, used_names
from assistant.errors import UsageError
from assistant.evaluate.repo.run import check_strategies, retrieval_of

from .conftest import assist_here, commit_repo
from .openai_server import Script, openai_server

MODULE = '''\
import os
from pkg.text import slugify, shout
from pkg import far


def title(text):
    """Title-case the words of text."""
    return shout(text).title()


def make_id(text):
    """An id for text: its slug, lower case."""
    ...


def helper(value):
    return far.distant(value) + get(value)
'''


def _example(path: str, name: str, code: str, kind: str = "function") -> Example:
    return Example(requirement="", code=code, name=name, path=path, start_line=1, kind=kind)


POOL = [
    _example(
        "pkg/text.py",
        "slugify",
        'def slugify(text, sep="-"):\n    """Lower-case text, words joined by sep."""\n'
        "    return sep.join(text.lower().split())\n",
    ),
    _example("pkg/text.py", "shout", "def shout(text):\n    return text.upper()\n"),
    _example("pkg/far.py", "distant", 'def distant(x):\n    """Far away."""\n    return x\n'),
    _example("pkg/core.py", "title", "def title(text):\n    return text\n"),  # the file itself: its outline shows it
    _example("tests/test_text.py", "slugify", "def slugify(text):\n    return text\n"),  # a test helper: not an API
    *(_example(f"pkg/m{i}.py", "get", "def get(x):\n    return x\n") for i in range(3)),  # too common to resolve
    _example("pkg/text.py", "Slug.__init__", "    def __init__(self, text):\n        self.text = text\n"),
    _example("pkg/text.py", "fragment", "slugify(x)", kind="fragment"),
]


def test_shows_what_the_file_calls_and_imports_from_other_files_nearest_use_first() -> None:
    tree = ast.parse(MODULE)
    stub_line = MODULE.splitlines().index("def make_id(text):") + 1
    shown, examples = used_definitions(tree, "pkg/core.py", stub_line, POOL, skip=(stub_line, stub_line + 2))
    assert [e.name for e in examples] == ["shout", "distant", "slugify"]
    blocks = shown.split("\n\n")
    # shout is used 4 lines above the stub, distant 6 below, slugify only in the imports (10 above).
    assert [b.splitlines()[0] for b in blocks] == ["# pkg/text.py", "# pkg/far.py", "# pkg/text.py"]
    assert blocks[0] == "# pkg/text.py\ndef shout(text):\n    ..."  # signatures and docstrings, never bodies
    assert blocks[1] == '# pkg/far.py\ndef distant(x):\n    """Far away."""\n    ...'
    assert blocks[2].startswith('# pkg/text.py\ndef slugify(text, sep="-"):\n    """Lower-case text')
    assert "title" not in shown and "tests/" not in shown and "def get" not in shown  # own file, tests, ambiguous


def test_a_class_call_shows_its_init_under_the_class_and_the_budget_is_kept() -> None:
    tree = ast.parse("from pkg.text import Slug\n\n\ndef f():\n    ...\n\n\nSlug('a')\n")
    shown, _ = used_definitions(tree, "pkg/core.py", 4, POOL)
    assert shown == "# pkg/text.py\nclass Slug:\n    def __init__(self, text):\n        ..."
    assert used_definitions(tree, "pkg/core.py", 4, POOL, budget=5) == ("", [])  # too long for the budget
    assert used_definitions(tree, "pkg/core.py", 4, []) == ("", [])


def test_an_outline_ends_before_its_first_members_decorators() -> None:
    source = (
        "class Box:\n    @property\n    def size(self):\n        return 1\n\n\n"
        "def f():\n    @cache\n    def g():\n        pass\n"
    )
    tree = ast.parse(source)
    lines = source.splitlines()
    assert outline(lines, tree.body[0]) == ["class Box:"]  # not `@property`, which belongs to `size`
    assert outline(lines, tree.body[1]) == ["def f():", "    ..."]


def test_test_code_is_not_an_api() -> None:
    for path in ("tests/test_a.py", "pkg/a_test.py", "src/pkg/tests/helpers.py", "test/util.py", "conftest.py"):
        assert is_test_path(path), path
    for path in ("pkg/testing.py", "src/click/testing.py", "pkg/contest.py"):
        assert not is_test_path(path), path


def test_used_names_skip_the_stub_builtins_and_the_files_own_definitions() -> None:
    tree = ast.parse("def a():\n    len(b())\n\n\ndef b():\n    return zed() + x.method()\n")
    assert used_names(tree, around=5) == {"zed": 1, "method": 1}
    assert used_names(tree, around=5, skip=(5, 6)) == {}


def test_eval_strategies_take_apis_on_function_tasks_only() -> None:
    check_strategies(["zero", "hybrid+apis", "zero+apis"], "function")
    assert retrieval_of("hybrid+apis") == "hybrid" and retrieval_of("bm25") == "bm25"
    with pytest.raises(UsageError, match="unknown strategy 'nope\\+apis'"):
        check_strategies(["nope+apis"], "function")
    with pytest.raises(UsageError, match="for function tasks only"):
        check_strategies(["hybrid+apis"], "line")


def two_file_repo(tmp_path: Path) -> Path:
    """A committed repo whose pkg/core.py has the stub make_id and imports slugify from pkg/text.py."""
    text = (
        'def slugify(text, sep="-"):\n    """Lower-case text, its words joined by sep."""\n'
        "    return sep.join(text.lower().split())\n"
    )
    core = MODULE.replace("from pkg import far\n", "").replace("far.distant", "abs")
    return commit_repo(tmp_path / "repo", {"pkg/__init__.py": "", "pkg/text.py": text, "pkg/core.py": core})


def test_generate_apis_puts_the_used_functions_in_the_prompt(tmp_path: Path) -> None:
    root = two_file_repo(tmp_path)
    assert assist_here("index", "--json", cwd=root).returncode == 0
    args = ["generate", "--file", "pkg/core.py", "--function", "make_id", "-n", "1", "-k", "0", "--ranker", "first"]
    answer = ("    return slugify(text)\n```\n", "stop")
    with openai_server(Script(answers=[answer, answer, answer])) as (url, script):
        common = ["--base-url", url, "--api", "completions", "--json"]
        with_apis = assist_here(*args, "--apis", *common, cwd=root, env={"OPENAI_API_KEY": "sk-test"})
        assert with_apis.returncode == 0, with_apis.stderr
        without = assist_here(*args, *common, cwd=root, env={"OPENAI_API_KEY": "sk-test"})
        assert without.returncode == 0, without.stderr
        human = assist_here(*args, "--apis", *common[:-1], cwd=root, env={"OPENAI_API_KEY": "sk-test"})
        assert "Used APIs shown: slugify (pkg/text.py:1)" in human.stdout, human.stderr
        sent = [request["prompt"] for request in script.requests]
    heading = "These definitions from the project's other files are used in `pkg/core.py`"
    assert heading in sent[0] and '# pkg/text.py\ndef slugify(text, sep="-"):' in sent[0]
    assert heading not in sent[1] and "def slugify" not in sent[1]
    data = json.loads(with_apis.stdout)
    assert data["candidates"][0]["code"].endswith("return slugify(text)\n")
    assert data["function"]["apis"] == [{"name": "slugify", "source": "pkg/text.py:1"}]
    assert "apis" not in json.loads(without.stdout)["function"]  # not asked for: not reported

    bank = root / "bank.jsonl"
    bank.write_text(json.dumps({"requirement": "one", "code": "def one():\n    return 1\n"}) + "\n")
    refused = assist_here(*args, "--apis", "--bank", bank, "--base-url", "http://127.0.0.1:9", cwd=root)
    assert refused.returncode == 2 and "run `assist index` in the repo first" in refused.stderr
    alone = assist_here("generate", "add two numbers", "--apis", cwd=root)
    assert alone.returncode == 2 and "--apis is for filling a stub" in alone.stderr


def test_generate_fragments_shows_the_repos_code_instead_of_demonstrations(tmp_path: Path) -> None:
    root = two_file_repo(tmp_path)
    args = ["generate", "--file", "pkg/core.py", "--function", "make_id", "-n", "1", "-k", "2", "--ranker", "first"]
    env = {"OPENAI_API_KEY": "sk-test"}
    answer = ("    return slugify(text)\n```\n", "stop")
    with openai_server(Script(answers=[answer])) as (url, script):
        common = ["--base-url", url, "--api", "completions"]
        unindexed = assist_here(*args, "--fragments", *common, cwd=root, env=env)
        assert unindexed.returncode == 2 and "run `assist index` in the repo first" in unindexed.stderr
        assert assist_here("index", "--json", cwd=root).returncode == 0
        shown = assist_here(*args, "--fragments", *common, "--json", cwd=root, env=env)
        assert shown.returncode == 0, shown.stderr
        human = assist_here(*args, "--fragments", *common, cwd=root, env=env)
        sent = script.requests[0]["prompt"]
    data = json.loads(shown.stdout)
    # Only the other file's code: the target file is in the prompt already; no demonstration turns.
    assert data["function"]["fragments"] == ["pkg/text.py:1"] and data["demonstrations"] == []
    assert "Code from other places of this repository that may help:" in sent and "# pkg/text.py:1\n" in sent
    assert "# pkg/core.py" not in sent
    assert "Code fragments shown (instead of demonstrations): pkg/text.py:1" in human.stdout, human.stderr
    assert "Demonstrations" not in human.stdout
    alone = assist_here("generate", "add two numbers", "--fragments", cwd=root)
    assert alone.returncode == 2 and "--fragments is for filling a stub" in alone.stderr


def stale_index_repo(tmp_path: Path) -> Path:
    """two_file_repo indexed while make_id had a body (it was cut back to a stub since): the index holds its old
    body, which must never be a demonstration."""
    root = two_file_repo(tmp_path)
    core = root / "pkg" / "core.py"
    stub = core.read_text()
    core.write_text(stub.replace("    ...\n", "    return slugify(text).lower()  # the old body\n"))
    assert assist_here("index", "--json", cwd=root).returncode == 0
    core.write_text(stub)
    return root


def test_generate_own_file_lets_the_files_other_functions_be_demonstrations(tmp_path: Path) -> None:
    root = stale_index_repo(tmp_path)
    args = ["generate", "--file", "pkg/core.py", "--function", "make_id", "-n", "1", "-k", "4", "--ranker", "first"]
    env = {"OPENAI_API_KEY": "sk-test"}
    answer = ("    return slugify(text)\n```\n", "stop")
    with openai_server(Script(answers=[answer, answer])) as (url, script):
        common = ["--base-url", url, "--api", "completions", "--json"]
        own = assist_here(*args, *common, cwd=root, env=env)  # the default
        assert own.returncode == 0, own.stderr
        other = assist_here(*args, "--no-own-file", *common, cwd=root, env=env)
        assert other.returncode == 0, other.stderr
        sent = [request["prompt"] for request in script.requests]
    shown = [(d["source"].split(":")[0], d["name"]) for d in json.loads(own.stdout)["demonstrations"]]
    assert ("pkg/core.py", "title") in shown and "make_id" not in [name for _, name in shown]
    assert all(not d["source"].startswith("pkg/core.py") for d in json.loads(other.stdout)["demonstrations"])
    # `title` is short, so the code around the stub shows it whole either way; +own-file also as a demonstration.
    assert sent[0].count("return shout(text).title()") == 2 and sent[1].count("return shout(text).title()") == 1
    assert not any("the old body" in prompt for prompt in sent)
    alone = assist_here("generate", "add two numbers", "--own-file", cwd=root)
    assert alone.returncode == 2 and "--own-file is for filling a stub" in alone.stderr
    moot = assist_here(*args, "--own-file", "--fragments", cwd=root)
    assert moot.returncode == 2 and "--own-file would change nothing" in moot.stderr
    banked = assist_here(*args, "--own-file", "--bank", root / "bank.jsonl", cwd=root)
    assert banked.returncode == 2 and "not a bank: drop --bank" in banked.stderr


def test_the_tui_session_retrieves_own_file_demonstrations_as_generate_does(tmp_path: Path) -> None:
    from assistant.ui.session import Options, Session

    root = stale_index_repo(tmp_path)
    query = "An id for text: its slug, lower case."

    def shown(own_file: bool) -> list[tuple[str, str]]:
        session = Session(root, options=Options(k=4, retriever="bm25", own_file=own_file))
        hits = session.retrieve(query, "pkg/core.py", function="make_id")
        return [(hit.example.path, hit.example.name) for hit in hits]

    own = shown(True)
    assert ("pkg/core.py", "title") in own and ("pkg/core.py", "make_id") not in own
    assert all(path != "pkg/core.py" for path, _ in shown(False))
