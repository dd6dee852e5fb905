import pytest

from assistant.code.edit import apply_edit, merge, plan_edit
from assistant.errors import UsageError

from .conftest import git

FILE = '''"""Module docstring."""
import os


@staticmethod
def target(x):
    # old body
    return x


def other():
    return 2
'''


def test_replaces_by_name_including_decorators_and_keeps_the_rest():
    new, actions = merge(FILE, "def target(x):\n    return x * 2\n")
    assert actions == ["replace target"]
    assert "@staticmethod" not in new and "# old body" not in new
    assert "def target(x):\n    return x * 2\n\n\ndef other():" in new
    assert new.startswith('"""Module docstring."""\nimport os\n')


def test_appends_new_functions_and_adds_missing_imports_after_existing_ones():
    new, actions = merge(FILE, "import os\nimport math\n\ndef area(r):\n    return math.pi * r * r\n\nprint(area(1))\n")
    assert actions == ["insert import math", "insert area"]
    assert new.startswith('"""Module docstring."""\nimport os\nimport math\n')
    assert new.endswith("    return 2\n\n\ndef area(r):\n    return math.pi * r * r\n")
    assert "print(area(1))" not in new  # top-level demo code is not put into the user's file


def test_imports_go_after_docstring_when_file_has_none():
    new, _ = merge('"""Doc."""\n\ndef f():\n    pass\n', "import re\ndef g():\n    return re\n")
    assert new.startswith('"""Doc."""\nimport re\n\n')


def test_unparsable_target_is_refused():
    with pytest.raises(UsageError, match="does not parse"):
        merge("def broken(:\n", "def f():\n    pass\n")


def test_new_file_and_crlf_file(tmp_path):
    edit = plan_edit(tmp_path / "new.py", "def f():\n    return 1\n", root=tmp_path)
    assert not edit.exists and edit.diff.startswith("--- /dev/null\n+++ b/new.py\n")
    crlf = tmp_path / "win.py"
    crlf.write_bytes(b"def f():\r\n    return 0\r\n")
    edit = plan_edit(crlf, "def f():\n    return 1\n", root=tmp_path)
    assert edit.new == "def f():\r\n    return 1\r\n"


def test_apply_changes_only_the_file_and_git_diff_matches(scratch_repo):
    target = scratch_repo / "mathutils.py"
    edit = plan_edit(target, "def is_even(n):\n    return not n % 2\n", root=scratch_repo)
    apply_edit(edit)
    assert git(scratch_repo, "status", "--porcelain") == " M mathutils.py\n"
    ours = [line for line in edit.diff.splitlines() if line[:1] in "+-" and not line.startswith(("+++", "---"))]
    theirs = [
        line
        for line in git(scratch_repo, "diff").splitlines()
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
    ]
    assert ours == theirs and ours


def test_apply_refuses_unstaged_changes_unless_forced(scratch_repo):
    target = scratch_repo / "mathutils.py"
    target.write_text(target.read_text() + "\n# my unsaved work\n")
    edit = plan_edit(target, "def is_even(n):\n    return not n % 2\n", root=scratch_repo)
    with pytest.raises(UsageError, match="unstaged changes"):
        apply_edit(edit)
    assert "# my unsaved work" in target.read_text() and "not n % 2" not in target.read_text()
    apply_edit(edit, force=True)
    assert "not n % 2" in target.read_text() and "# my unsaved work" in target.read_text()


@pytest.mark.parametrize("flag", ["--assume-unchanged", "--skip-worktree"])
def test_apply_refuses_a_file_git_is_told_not_to_look_at(scratch_repo, flag):
    # `git diff` reports no change for such a file, so unsaved work in it passed as restorable.
    import subprocess

    target = scratch_repo / "mathutils.py"
    subprocess.run(["git", "update-index", flag, "mathutils.py"], cwd=scratch_repo, check=True)
    target.write_text(target.read_text() + "\n# my unsaved work\n")
    edit = plan_edit(target, "def is_even(n):\n    return not n % 2\n", root=scratch_repo)
    with pytest.raises(UsageError, match=r"assume-unchanged, skip-worktree or core\.ignoreStat"):
        apply_edit(edit)
    assert "# my unsaved work" in target.read_text() and "not n % 2" not in target.read_text()


def test_apply_refuses_when_file_changed_after_planning(scratch_repo):
    target = scratch_repo / "mathutils.py"
    edit = plan_edit(target, "def is_even(n):\n    return not n % 2\n", root=scratch_repo)
    target.write_text("x = 1\n")
    with pytest.raises(UsageError, match="changed since the diff was made"):
        apply_edit(edit, force=True)
    assert target.read_text() == "x = 1\n"


def test_repeating_an_existing_definition_is_not_a_change():
    new, actions = merge(FILE, "def other():\n    return 2\n")
    assert actions == [] and new == FILE


def test_non_utf8_and_directory_targets_are_refused(tmp_path):
    (tmp_path / "latin1.py").write_bytes(b"# caf\xe9\n")
    with pytest.raises(UsageError, match="not UTF-8"):
        plan_edit(tmp_path / "latin1.py", "def f():\n    pass\n")
    with pytest.raises(UsageError, match="is not a file"):
        plan_edit(tmp_path, "def f():\n    pass\n")


def test_a_candidate_importing_from_the_target_itself_does_not_add_a_circular_import(tmp_path) -> None:
    target = tmp_path / "mathutils.py"
    target.write_text("def is_even(n):\n    return n % 2 == 0\n")
    code = "from mathutils import is_even\nimport math\n\ndef is_odd(n):\n    return not is_even(n)\n"
    edit = plan_edit(target, code, tmp_path)
    assert "from mathutils" not in edit.new
    assert edit.new.startswith("import math\n")
    assert edit.actions == ("insert import math", "insert is_odd")


def test_atomic_writes_keep_permissions_and_new_files_follow_the_umask(tmp_path):
    import os
    import stat

    from assistant.paths import atomic_write_text

    script = tmp_path / "run.sh"
    script.write_text("old\n")
    script.chmod(0o750)
    atomic_write_text(script, "new\n")
    assert script.read_text() == "new\n"
    assert stat.S_IMODE(script.stat().st_mode) == 0o750

    previous = os.umask(0o022)
    try:
        atomic_write_text(tmp_path / "report.md", "# report\n")
    finally:
        os.umask(previous)
    assert stat.S_IMODE((tmp_path / "report.md").stat().st_mode) == 0o644
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.md", "run.sh"]  # no temporary file left


# -- issue 26: an edit never writes a broken or lost file ---------------------------------------------------

FORM_FEED = "import os\n\f\ndef f():\n    return 1\n\n\ndef g():\n    return 2\n"
LINE_SEPARATOR = 'S = "a\u2028b"\n\n\ndef f():\n    return 1\n'


def _commit(repo, name: str, data: bytes):
    path = repo / name
    path.write_bytes(data)
    git(repo, "add", name)
    git(repo, "commit", "-qm", name)
    return path


def test_merge_counts_lines_as_python_does_form_feed_and_u2028() -> None:
    new, actions = merge(FORM_FEED, "def g():\n    return 20\n")
    assert actions == ["replace g"]
    assert new == FORM_FEED.replace("return 2\n", "return 20\n")  # old: a dangling `return 2` was left behind
    compile(new, "x.py", "exec")
    new, _ = merge(LINE_SEPARATOR, "def f():\n    return 10\n")
    assert new == LINE_SEPARATOR.replace("return 1\n", "return 10\n")  # old: an unterminated string
    # A lone CR ends a line for Python too: still counted as one.
    new, _ = merge("x = 1\rdef f():\n    return 1\n", "def f():\n    return 2\n")
    assert new == "x = 1\rdef f():\n    return 2\n"


@pytest.mark.parametrize("source", [FORM_FEED, LINE_SEPARATOR], ids=["form-feed", "u2028"])
def test_apply_edit_writes_what_compiles_for_form_feeds_and_u2028(scratch_repo, source: str) -> None:
    target = _commit(scratch_repo, "odd.py", source.encode())
    apply_edit(plan_edit(target, "def f():\n    return 99\n\n\ndef g():\n    return 98\n", root=scratch_repo))
    written = target.read_bytes()
    compile(written, "odd.py", "exec")
    assert b"return 99" in written and written.startswith(source.split("def f")[0].encode())


def test_apply_edit_refuses_text_that_parses_but_does_not_compile(scratch_repo) -> None:
    from dataclasses import replace

    target = scratch_repo / "mathutils.py"
    before = target.read_bytes()
    edit = plan_edit(target, "def is_even(n):\n    return not n % 2\n", root=scratch_repo)
    broken = replace(edit, new="return 1\n")  # ast.parse accepts it; compile() does not
    with pytest.raises(UsageError, match=r"mathutils\.py: the new text would not compile \(line 1: 'return' outside"):
        apply_edit(broken)
    assert target.read_bytes() == before


def test_future_imports_go_first_and_are_not_repeated() -> None:
    code = "from __future__ import annotations\nimport math\n\ndef area(r: float) -> float:\n    return 3 * r * r\n"
    new, actions = merge(FILE, code)
    assert new.startswith('"""Module docstring."""\nfrom __future__ import annotations\nimport os\nimport math\n')
    assert actions[0] == "insert from __future__ import annotations"
    compile(new, "x.py", "exec")
    again, _ = merge(new, code.replace("3 * r * r", "3 * r**2"))
    assert again.count("from __future__") == 1
    compile(again, "x.py", "exec")
    # No docstring and no imports: before the first statement, under the file's opening comments (a shebang, a
    # coding cookie, which counts only on line 1 or 2, a licence header).
    bare, _ = merge("# header\ndef f():\n    pass\n", code)
    assert bare.startswith("# header\nfrom __future__ import annotations\nimport math\n\ndef f():")
    compile(bare, "x.py", "exec")


def test_a_byte_order_mark_is_read_and_kept(scratch_repo) -> None:
    target = _commit(scratch_repo, "bom.py", b"\xef\xbb\xbfdef f():\n    return 1\n")
    edit = plan_edit(target, "def g():\n    return 2\n", root=scratch_repo)
    apply_edit(edit)
    written = target.read_bytes()
    assert written == b"\xef\xbb\xbfdef f():\n    return 1\n\n\ndef g():\n    return 2\n"
    compile(written, "bom.py", "exec")


def test_apply_edit_will_not_follow_a_symlink_out_of_the_repo_unless_forced(scratch_repo, tmp_path) -> None:
    other = tmp_path / "other-repo"  # a clean, tracked file in another repo: git gives no reason to refuse
    other.mkdir()
    git(other, "init", "-q")
    secret = _commit(other, "secret.py", b"def f():\n    return 1\n")
    (scratch_repo / "x.py").symlink_to(secret)
    git(scratch_repo, "add", "x.py")
    git(scratch_repo, "commit", "-qm", "link")
    edit = plan_edit(scratch_repo / "x.py", "def g():\n    return 2\n", root=scratch_repo)
    with pytest.raises(UsageError, match="outside the repo; not written"):
        apply_edit(edit)
    assert secret.read_text() == "def f():\n    return 1\n"
    apply_edit(edit, force=True)
    assert "def g()" in secret.read_text() and (scratch_repo / "x.py").is_symlink()


def test_a_file_name_is_not_a_pattern_when_apply_asks_git_about_it(scratch_repo) -> None:
    _commit(scratch_repo, "t1.py", b"def f():\n    return 1\n")
    untracked = scratch_repo / "t[1].py"  # `t[1].py` as a pattern matches the tracked t1.py
    untracked.write_text("def f():\n    return 1\n# work git cannot give back\n")
    edit = plan_edit(untracked, "def f():\n    return 2\n", root=scratch_repo)
    with pytest.raises(UsageError, match=r"t\[1\]\.py: it is not tracked by git"):
        apply_edit(edit)
    assert "# work git cannot give back" in untracked.read_text()


def test_a_refused_apply_makes_no_folder(scratch_repo, tmp_path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (scratch_repo / "out").symlink_to(elsewhere)
    edit = plan_edit(scratch_repo / "out" / "new" / "x.py", "def g():\n    return 2\n", root=scratch_repo)
    with pytest.raises(UsageError, match="outside the repo; not written"):
        apply_edit(edit)
    assert list(elsewhere.iterdir()) == []


def test_a_file_declaring_another_coding_is_read_and_written_in_it(scratch_repo):
    target = scratch_repo / "legacy.py"
    raw = b"# -*- coding: latin-1 -*-\nGREETING = 'h\xe9'\n"
    target.write_bytes(raw)
    edit = plan_edit(target, "def accent():\n    return '\u00fc'\n", root=scratch_repo)
    assert "GREETING = 'h\u00e9'" in edit.old  # read as latin-1, not refused as "not UTF-8"
    apply_edit(edit, force=True)
    # Written as latin-1: Python reads these bytes back as the same text (UTF-8 bytes would read as 'Ã¼').
    assert target.read_bytes().startswith(raw) and b"return '\xfc'" in target.read_bytes()
    before = target.read_bytes()
    euro = plan_edit(target, "def price():\n    return '\u20ac'\n", root=scratch_repo)
    with pytest.raises(UsageError, match=r"holds '€', which its coding \(iso8859-1\) cannot; not written"):
        apply_edit(euro, force=True)
    assert target.read_bytes() == before
    target.write_bytes(b"# coding: klingon\nx = 1\n")
    with pytest.raises(UsageError, match=r"names an unknown coding \('klingon'\)"):
        plan_edit(target, "def f():\n    return 1\n", root=scratch_repo)
    target.write_bytes(b"# coding: rot13\nx = 1\n")  # a codec, but not one Python reads source in
    with pytest.raises(UsageError, match="'rot13', which is not a text coding"):
        plan_edit(target, "def f():\n    return 1\n", root=scratch_repo)
    target.write_bytes(b"\xef\xbb\xbf# coding: utf-8-sig\nx = 1\n")
    assert "x = 1" in plan_edit(target, "def f():\n    return 1\n", root=scratch_repo).new
    # A new import goes below the cookie: above it, the cookie would no longer count and the file would turn UTF-8.
    target.write_bytes(b"# -*- coding: latin-1 -*-\nX = 'h\xe9'\n")
    apply_edit(plan_edit(target, "import math\n\n\ndef f():\n    return math.pi\n", root=scratch_repo), force=True)
    written = target.read_bytes()
    assert written.startswith(b"# -*- coding: latin-1 -*-\nimport math\n") and b"'h\xe9'" in written


def test_a_file_mixing_line_endings_keeps_each_line_s_and_new_lines_take_the_usual_one():
    mixed = "import os\n\ndef f(x):\r\n    return x\r\n\ndef h():\n    return 1\n"  # one stray CRLF function
    new, actions = merge(mixed, "import math\ndef g():\n    return 2\n")
    assert actions == ["insert import math", "insert g"]
    # Once the whole file turned CRLF, a diff of every line; now only the new lines are new, ending as most do.
    assert new == mixed.replace("os\n", "os\nimport math\n", 1) + "\n\ndef g():\n    return 2\n"
    crlf = "import os\r\n\r\ndef f():\r\n    return 1\r\n"
    assert merge(crlf, "import math\n")[0] == "import os\r\nimport math\r\n\r\ndef f():\r\n    return 1\r\n"


def test_an_import_goes_after_the_last_import_even_when_a_definition_above_it_shrinks():
    # The insertion point was taken from the file as it was, after the replacements had moved its lines:
    # `import math` once landed inside HELP's string.
    old = (
        "import os\n\n\ndef f():\n    a = 1\n    b = 2\n    return a + b\n\n\n"
        'import sys\n\nHELP = """usage:\n  run it\n"""\n'
    )
    new, actions = merge(old, "import math\n\n\ndef f():\n    return math.pi\n")
    assert actions == ["insert import math", "replace f"]
    assert 'HELP = """usage:\n  run it\n"""\n' in new and "import sys\nimport math\n" in new
    namespace: dict = {}
    exec(compile(new, "m.py", "exec"), namespace)
    assert namespace["HELP"] == "usage:\n  run it\n" and abs(namespace["f"]() - 3.14159) < 1e-4


def test_overloads_and_their_implementation_are_replaced_as_one_run():
    old = "from typing import overload\n\n\ndef f(x):\n    return x\n\n\ndef g():\n    return 1\n"
    code = "@overload\ndef f(x: int) -> int: ...\n@overload\ndef f(x: str) -> str: ...\ndef f(x):\n    return x * 2\n"
    new, actions = merge(old, code)
    assert actions == ["replace f"] and new.count("def f(") == 3 and "return x * 2" in new and "return x\n" not in new
    again, more = merge(new, code)
    assert more == [] and again == new  # the same run again is not a change


def test_new_definitions_go_above_a_main_guard_that_may_call_them():
    old = 'def main():\n    print("hi")\n\n\nif __name__ == "__main__":\n    main()\n'
    new, actions = merge(old, 'def main():\n    print(greeting())\n\n\ndef greeting():\n    return "hi"\n')
    assert actions == ["replace main", "insert greeting"]
    assert new.index("def greeting") < new.index('if __name__ == "__main__":')
    compile(new, "m.py", "exec")


def test_filling_a_stub_never_imports_the_file_itself(tmp_path):
    from assistant.code.edit import own_module_names
    from assistant.core.stubs import Taken, find_stub, plan_fill

    package = tmp_path / "src" / "pkg"
    package.mkdir(parents=True)
    target = package / "utils.py"
    target.write_text('def clamp(x):\n    return max(0, x)\n\n\ndef clamp_all(xs):\n    """Clamp each."""\n    ...\n')
    assert {"utils", "pkg.utils", "src.pkg.utils"} <= own_module_names(target, tmp_path)
    stub = find_stub(target.read_text(), "clamp_all", str(target))
    for own in ("from pkg.utils import clamp", "from .utils import clamp", "import src.pkg.utils"):
        taken = Taken("return [clamp(x) for x in xs]", (), (own, "import math"))
        edit = plan_fill(target, stub, taken, root=tmp_path)
        assert edit.actions == ("fill clamp_all", "insert import math"), own


def test_a_body_rewritten_on_request_is_labelled_a_rewrite_not_a_fill(tmp_path):
    # `--function clamp` with a requirement rewrites a working body; the diff's heading said "fill clamp".
    from assistant.core.stubs import Taken, find_stub, plan_fill

    target = tmp_path / "utils.py"
    target.write_text('def clamp(x):\n    """At least 0."""\n    return max(0, x)\n')
    stub = find_stub(target.read_text(), "clamp", str(target), requirement_given=True)
    edit = plan_fill(target, stub, Taken("return x if x > 0 else 0\n", (), ()), root=tmp_path)
    assert edit.actions == ("rewrite clamp",)


def test_a_class_the_file_has_is_merged_member_by_member():
    # A sample that wrote `class Stack` with one method once replaced the user's whole class.
    old = (
        "class Stack:\n    def __init__(self):\n        self.items = []\n\n"
        "    def push(self, x):\n        self.items.append(x)\n\n"
        "    def pop(self):\n        return self.items.pop()\n\n\nX = 1\n"
    )
    code = (
        "class Stack:\n  def push(self, x):\n    self.items.append(x)\n    return self\n\n"
        "  def is_empty(self):\n    return not self.items\n"
    )
    new, actions = merge(old, code)
    assert actions == ["replace Stack.push", "insert Stack.is_empty"]
    namespace: dict = {}
    exec(compile(new, "m.py", "exec"), namespace)
    stack = namespace["Stack"]()
    assert stack.push(1) is stack and stack.pop() == 1 and stack.is_empty() and namespace["X"] == 1
    # At the class's own member indent (the candidate's deeper lines keep their offset under it).
    assert "\n    def is_empty(self):\n      return not self.items\n\n\nX = 1\n" in new
    # Other bases: another class, replaced whole.
    replaced, more = merge(old, "class Stack(list):\n    pass\n")
    assert more == ["replace Stack"] and "def pop" not in replaced
    # Only what `replace` names may be replaced (issue 66): a re-typed method is left out and named, a new one goes in.
    kept, said = merge(old, code, replace=())
    assert said == ["dropped: rewrites Stack.push()", "insert Stack.is_empty"]
    added = "\n\n    def is_empty(self):\n      return not self.items"
    assert kept.replace(added, "") == old  # push (and the rest) as it was, byte for byte
    assert merge(old, code, replace=("Stack.push",))[1] == actions
    assert merge(old, code, replace=("Stack",))[1] == actions  # a class named lets its methods be replaced
    assert merge(old, "class Stack(list):\n    pass\n", replace=())[1] == ["dropped: rewrites Stack()"]
