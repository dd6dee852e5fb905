"""What the sandbox's layer lines say when a layer cannot hold, in both runs that report them: the candidates' runner
and the project launcher share the attempt and the Landlock preconditions (assistant.sandbox.boundary)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from assistant.sandbox import boundary, boundary_layers
from assistant.sandbox.project import ProjectLimits, run_pytest
from tests.conftest import landlock_abi

needs_landlock = pytest.mark.skipif(landlock_abi() < 1, reason="the kernel has no Landlock")


def test_landlock_refusal_names_the_first_missing_precondition() -> None:
    assert boundary.landlock_refusal(True, 0, False) == "disabled by ASSIST_SANDBOX_DISABLE"
    assert boundary.landlock_refusal(False, 0, True) == "the kernel has no Landlock"
    assert boundary.landlock_refusal(False, 3, False) == "needs no_new_privs"
    assert boundary.landlock_refusal(False, 3, True) is None


def test_attempt_layer_records_held_disabled_and_failed() -> None:
    layers: dict[str, tuple[bool, str]] = {}

    def broken() -> str:
        raise OSError("no such thing")

    assert boundary.attempt_layer(layers, "caps", set(), lambda: "dropped", str)
    assert not boundary.attempt_layer(layers, "dumpable", {"dumpable"}, lambda: "never called", str)
    assert not boundary.attempt_layer(layers, "landlock", set(), broken, lambda exc: type(exc).__name__)
    assert layers == {
        "caps": (True, "dropped"),
        "dumpable": (False, "disabled by ASSIST_SANDBOX_DISABLE"),
        "landlock": (False, "failed: OSError"),
    }


@needs_landlock
@pytest.mark.filterwarnings("ignore:sandbox layers disabled:RuntimeWarning")
def test_without_no_new_privs_both_runs_say_landlock_and_seccomp_need_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ASSIST_SANDBOX_DISABLE", "no_new_privs")
    (tmp_path / "test_a.py").write_text("def test_a():\n    assert True\n", encoding="utf-8")
    project_run = run_pytest(tmp_path, Path(sys.executable), limits=ProjectLimits(timeout_s=60))
    assert project_run.ok
    for layers in (boundary_layers(), project_run.layers):
        assert layers["no_new_privs"] == (False, "disabled by ASSIST_SANDBOX_DISABLE")
        # startswith: once a run in this process had Landlock off, assist is non-dumpable and the line says so too.
        assert not layers["landlock"][0] and layers["landlock"][1].startswith("needs no_new_privs")
        assert layers["seccomp"] == (False, "needs no_new_privs")
