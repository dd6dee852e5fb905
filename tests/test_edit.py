import pytest

from assistant.edit import apply_edit, merge, plan_edit
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
