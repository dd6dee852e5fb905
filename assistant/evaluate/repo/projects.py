"""The repository benchmark's projects: real packages that ship their test suites in their PyPI sdists.

Each project is pinned (version and the sdist's sha256). Preparing one, once per user cache:

1. `pip download --no-binary :all: --no-deps --require-hashes` of NAME==VERSION: pip checks the sha256 as it
   downloads, before it builds anything, and it is checked again before anything is unpacked;
2. the sdist unpacked to `<cache>/repo-bench/NAME-VERSION/src` (the pristine tree, never modified afterwards);
3. a virtual environment beside it with pytest and the project's test dependencies (pinned);
4. the whole suite run once in the project sandbox (:mod:`assistant.sandbox.project`) with call tracing: which
   tests pass on the pristine tree and which of the project's functions each test executes (`suite.json`).

Nothing of the projects is committed; the figures say which versions they come from.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from assistant.errors import UsageError
from assistant.paths import atomic_write_text, cache_dir, file_sha256
from assistant.progress import Progress
from assistant.sandbox.project import ProjectLimits, ProjectRun, run_pytest

PYTEST = "pytest==8.4.2"
SUITE_VERSION = 1  # bump when suite.json's meaning changes


@dataclass(frozen=True)
class ProjectSpec:
    """A pinned project: where its code and tests sit in the sdist, and what its tests need."""

    name: str
    version: str
    sha256: str
    package: str  # the code's folder, relative to the sdist's root
    tests: str  # the tests' folder
    pythonpath: tuple[str, ...] = (".",)  # put first on sys.path, so the copy under test is what is imported
    requirements: tuple[str, ...] = ()  # test dependencies beside pytest, pinned
    install_self: bool = False  # some tests read the installed distribution's metadata (click's deprecations)
    # The benchmark's four (issue 29's) are standard; the others are held out: added after every design decision
    # on the four, they are where a gain found there is checked on code nothing here was tuned on.
    standard: bool = True

    @property
    def key(self) -> str:
        return f"{self.name}-{self.version}"


PROJECTS: dict[str, ProjectSpec] = {
    spec.name: spec
    for spec in (
        ProjectSpec(
            "boltons",
            "26.2.0",
            "d39cfd15c1a1c3bd4d705c82252fa9edb8e4f5e8cc039f8e39afac7b1b47e92c",
            package="boltons",
            tests="tests",
        ),
        ProjectSpec(
            "click",
            "8.5.1",
            "9bbfada76703fd1d784b83eea012e3e8c6a001a876543ef104fa56aaaeb072b4",
            package="src/click",
            tests="tests",
            pythonpath=("src",),
            install_self=True,
        ),
        ProjectSpec(
            "tabulate",
            "0.10.0",
            "e2cfde8f79420f6deeffdeda9aaec3b6bc5abce947655d17ac662b126e48a60d",
            package="tabulate",
            tests="test",
            requirements=("wcwidth==0.2.13",),
        ),
        ProjectSpec(
            "cachetools",
            "8.0.1",
            "deb1d376d4d28c2f33f3e3058043b005e0af75c35c094bd54053e27d2906ad95",
            package="src/cachetools",
            tests="tests",
            pythonpath=("src",),
        ),
        ProjectSpec(
            "jinja2",
            "3.1.6",
            "0137fb05990d35f1275a587e9aee6d56da821fc83491a0fb838183be43f66d6d",
            package="src/jinja2",
            tests="tests",
            pythonpath=("src",),
            # MarkupSafe is jinja2's one dependency; trio and the rest its async tests'.
            requirements=(
                "MarkupSafe==3.0.4",
                "trio==0.35.0",
                "attrs==26.1.0",
                "idna==3.20",
                "outcome==1.3.0.post0",
                "sniffio==1.3.1",
                "sortedcontainers==2.4.0",
            ),
            standard=False,
        ),
        ProjectSpec(
            "marshmallow",
            "4.4.0",
            "9e6ffa8511012ca89732324c1c253efd7b4d35632dcbdf80aa793fe01804af3e",
            package="src/marshmallow",
            tests="tests",
            pythonpath=("src", "."),  # the tests import their fixtures as `tests.base`
            requirements=("simplejson==4.3.0",),
            standard=False,
        ),
    )
}
STANDARD = [name for name, spec in PROJECTS.items() if spec.standard]
HELD_OUT = [name for name, spec in PROJECTS.items() if not spec.standard]


def parse_projects(spec: str | None) -> list[ProjectSpec]:
    """`boltons,click` → their specs; None or "all" is the benchmark's four (`STANDARD`), "held-out" the projects
    kept apart from them (`HELD_OUT`), and either may stand among names. An unknown name is a one-line error."""
    names: list[str] = []
    for part in (part.strip() for part in ((spec or "").strip() or "all").split(",")):
        names.extend(STANDARD if part == "all" else HELD_OUT if part == "held-out" else [part] if part else [])
    unknown = [n for n in names if n not in PROJECTS]
    if unknown:
        raise UsageError(f"unknown project {unknown[0]!r}; choose from {', '.join(PROJECTS)}, all or held-out")
    return [PROJECTS[n] for n in dict.fromkeys(names)]


@dataclass
class Project:
    """A prepared project: its pristine tree, its interpreter, and its suite's pristine results."""

    spec: ProjectSpec
    root: Path  # the pristine tree
    python: Path
    passing: list[str]  # node ids that pass on the pristine tree
    calls: dict[str, list[tuple[str, int]]]  # node id -> (path, first line) of the project's functions it runs
    suite_s: float = 0.0
    meta: dict = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.spec.name

    def source_files(self) -> list[str]:
        """The code's .py files (not the tests'), relative to the root, sorted."""
        base = self.root / self.spec.package
        return sorted(str(p.relative_to(self.root)) for p in base.rglob("*.py") if "__pycache__" not in p.parts)

    def all_files(self) -> list[str]:
        """Every .py file of the tree (code and tests), relative to the root, sorted: what gets indexed."""
        return python_files(self.root)

    def is_test_file(self, path: str) -> bool:
        return path == self.spec.tests or path.startswith(self.spec.tests.rstrip("/") + "/")

    def run_tests(self, tests: Sequence[str], path: str, text: str, limits: ProjectLimits) -> ProjectRun:
        """Run `tests` in the project sandbox with `path` replaced by `text`, stopping at the first failure."""
        return run_pytest(
            self.root,
            self.python,
            list(tests),
            files={path: text},
            pythonpath=self.spec.pythonpath,
            stop_first=True,
            limits=limits,
        )

    def covering(self) -> dict[tuple[str, int], list[str]]:
        """(path, first line) of a function → the passing tests that execute it, sorted."""
        passing = set(self.passing)
        found: dict[tuple[str, int], list[str]] = {}
        for node, calls in self.calls.items():
            if node not in passing:
                continue
            for path, line in calls:
                found.setdefault((path, line), []).append(node)
        return {key: sorted(nodes) for key, nodes in found.items()}


def python_files(root: Path) -> list[str]:
    """Every .py file under `root` (caches aside), relative to it, sorted."""
    return sorted(str(p.relative_to(root)) for p in root.rglob("*.py") if "__pycache__" not in p.parts)


def bench_dir() -> Path:
    """Where prepared projects live: `<cache>/repo-bench`."""
    path = cache_dir() / "repo-bench"
    path.mkdir(parents=True, exist_ok=True)
    return path


# What preparation passes on of our environment: where pip finds packages and certificates, not API keys or tokens
# (building a pinned sdist runs its build code, outside any sandbox).
_PREPARE_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR", "LD_LIBRARY_PATH", "XDG_CONFIG_HOME",
                "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "HTTP_PROXY", "HTTPS_PROXY",
                "ALL_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "all_proxy", "no_proxy")  # fmt: skip


def prepare_env() -> dict[str, str]:
    """The environment of a preparation step (venv, pip): :data:`_PREPARE_ENV` and pip's own ``PIP_*`` settings."""
    return {k: v for k, v in os.environ.items() if k in _PREPARE_ENV or k.startswith("PIP_")}


def _run(argv: list[str], what: str, cwd: Path | None = None) -> None:
    """Run a preparation step; its failure is a one-line error with the tool's last line."""
    result = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, check=False, env=prepare_env())
    if result.returncode != 0:
        if "DO NOT MATCH THE HASHES" in result.stderr:  # pip's --require-hashes refusal: its last line is a digest
            raise UsageError(f"{what} failed: the file's sha256 is not the pinned one (pip refused it unbuilt)")
        lines = (result.stderr or result.stdout).strip().splitlines()
        raise UsageError(f"{what} failed: {lines[-1] if lines else f'exit {result.returncode}'}")


def fetch(spec: ProjectSpec, folder: Path) -> Path:
    """The verified sdist in `folder` (downloaded when missing); a wrong sha256 is an error, nothing unpacked."""
    folder.mkdir(parents=True, exist_ok=True)
    found = sorted(folder.glob(f"{spec.name}-{spec.version}.tar.gz"))
    if not found:
        # Hash-pinned: pip checks the sha256 as it downloads, before it builds the sdist's metadata (which runs
        # the package's build backend); our own check below stands for a file that was already there.
        with tempfile.TemporaryDirectory(prefix="assist-pin-") as pins:
            requirements = Path(pins) / "requirements.txt"
            requirements.write_text(f"{spec.name}=={spec.version} --hash=sha256:{spec.sha256}\n", encoding="utf-8")
            _run(
                [sys.executable, "-P", "-m", "pip", "download", "--quiet", "--no-binary", ":all:", "--no-deps",
                 "--require-hashes", "-r", str(requirements), "-d", str(folder)],
                f"downloading {spec.name} {spec.version}",
            )  # fmt: skip
        found = sorted(folder.glob(f"{spec.name}-{spec.version}.tar.gz"))
    if not found:
        raise UsageError(f"pip did not leave {spec.name}-{spec.version}.tar.gz in {folder}")
    sdist = found[0]
    digest = file_sha256(sdist)
    if digest != spec.sha256:
        sdist.unlink()
        raise UsageError(f"{sdist.name} has sha256 {digest[:16]}…, expected {spec.sha256[:16]}…; removed it")
    return sdist


def _unpack(sdist: Path, spec: ProjectSpec, target: Path) -> None:
    """Unpack the sdist's single top folder into `target` (atomically: a temporary folder, then a rename)."""
    work = Path(tempfile.mkdtemp(prefix=".unpack-", dir=target.parent))
    try:
        with tarfile.open(sdist) as archive:
            archive.extractall(work, filter="data")  # "data": no links out, no device files, no absolute paths
        top = work / spec.key
        if not (top / spec.package).is_dir() or not (top / spec.tests).is_dir():
            raise UsageError(f"{sdist.name} has no {spec.package}/ and {spec.tests}/ folders")
        top.rename(target)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _make_venv(spec: ProjectSpec, sdist: Path, venv: Path) -> Path:
    """A virtual environment with pytest and the project's test dependencies; returns its interpreter."""
    work = venv.with_name(venv.name + ".partial")
    shutil.rmtree(work, ignore_errors=True)
    _run([sys.executable, "-P", "-m", "venv", str(work)], f"creating {spec.name}'s environment")
    python = work / "bin" / "python"
    packages = [PYTEST, *spec.requirements]
    _run([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *packages],
         f"installing {spec.name}'s test dependencies")  # fmt: skip
    if spec.install_self:
        _run([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-deps", str(sdist)],
             f"installing {spec.name}")  # fmt: skip
    shutil.rmtree(venv, ignore_errors=True)
    work.rename(venv)
    # The venv's scripts name their own path: they were made under the .partial name. Only the interpreter is
    # used, and pip inside it is never run again, so that does not matter.
    return venv / "bin" / "python"


def prepare(spec: ProjectSpec, progress: Progress | None = None, limits: ProjectLimits | None = None) -> Project:
    """The prepared project (fetched, unpacked, its venv built, its suite run and traced once; all cached)."""
    report = progress or (lambda stage, done, total: None)
    folder = bench_dir() / spec.key
    folder.mkdir(parents=True, exist_ok=True)
    root = folder / "src"
    venv = folder / "venv"
    suite_path = folder / "suite.json"
    if suite_path.exists():
        data = json.loads(suite_path.read_text(encoding="utf-8"))
        if data.get("version") == SUITE_VERSION and root.is_dir() and (venv / "bin" / "python").exists():
            return _project(spec, root, venv / "bin" / "python", data)
    report(f"prepare {spec.name}", 0, 4)
    sdist = fetch(spec, folder / "sdist")
    report(f"prepare {spec.name}", 1, 4)
    if not root.is_dir():
        _unpack(sdist, spec, root)
    report(f"prepare {spec.name}", 2, 4)
    python = venv / "bin" / "python"
    if not python.exists():
        python = _make_venv(spec, sdist, venv)
    report(f"prepare {spec.name}", 3, 4)
    started = time.perf_counter()
    run = run_pytest(
        root,
        python,
        [spec.tests],
        pythonpath=spec.pythonpath,
        trace=True,
        limits=limits or ProjectLimits(timeout_s=900, cpu_s=900, memory_mb=4096),
    )
    elapsed = time.perf_counter() - started
    passing = sorted(run.passed())
    if not passing:
        tail = run.output.strip().splitlines()[-1:] or [run.status]
        raise UsageError(f"{spec.name}'s test suite passed no test on the pristine tree: {tail[0]}")
    data = {
        "version": SUITE_VERSION,
        "project": spec.name,
        "project_version": spec.version,
        "sdist_sha256": spec.sha256,
        "python": sys.version.split()[0],
        "pytest": PYTEST,
        "tests": len(run.outcomes),
        "passing": passing,
        "failing": sorted(run.failed()),
        "suite_s": round(elapsed, 2),
        "calls": {node: [list(c) for c in calls] for node, calls in run.calls.items()},
        "layers": {name: list(value) for name, value in run.layers.items()},
    }
    atomic_write_text(suite_path, json.dumps(data))
    report(f"prepare {spec.name}", 4, 4)
    return _project(spec, root, python, data)


def _project(spec: ProjectSpec, root: Path, python: Path, data: dict) -> Project:
    calls = {node: [(str(p), int(line)) for p, line in found] for node, found in data["calls"].items()}
    meta = {k: v for k, v in data.items() if k not in ("calls", "passing", "failing")}
    return Project(spec, root, python, list(data["passing"]), calls, float(data.get("suite_s", 0.0)), meta)


def environment_note() -> str:
    """One line for reports: the interpreter the projects' suites run under."""
    return f"Python {sys.version.split()[0]} on {os.uname().sysname} {os.uname().machine}, {PYTEST}"
