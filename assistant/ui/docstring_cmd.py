"""`assist docstring` and `assist hook`: document what lacks a docstring, from the CLI or a pre-commit hook.

In write mode nothing is generated for a file that will not be written (unstaged changes with --staged,
read-only, a symlink out of the repo...): it is named with the reason and the run fails. A file edited while
its docstrings were generated is left as it is now, and the run fails too.
"""

from __future__ import annotations

import codecs
import json
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from assistant.config import MAX_K
from assistant.errors import UsageError
from assistant.ui.console import ProgressUI, command, err, out, show_progress
from assistant.ui.errors import said_with_flags
from assistant.ui.options import (
    BASICS,
    NO_BACKEND_FLAGS,
    OUTPUT,
    RETRIEVAL,
    BackendFlags,
    JsonOpt,
    backend_options,
    check_range,
)
from assistant.ui.text import counted

if TYPE_CHECKING:
    from assistant.core.docwriter import ExemplarIndex, FirstOf, Written
    from assistant.pipeline import Pipeline

hook_app = typer.Typer(
    help="Install or remove assist's plain git pre-commit hook.",
    short_help="Install or remove the git pre-commit hook.",
    no_args_is_help=True,
)


@dataclass
class FileJob:
    """One file to document: its name as shown, where it is written, its text and the bytes it came from."""

    name: str  # as shown to the user
    path: Path
    text: str
    raw: bytes = b""  # the bytes `text` was read from: the file must still hold them when it is written
    targets: list = field(default_factory=list)

    @property
    def bom(self) -> bool:
        """Whether the file starts with a UTF-8 byte order mark (kept when it is written back)."""
        return self.raw.startswith(codecs.BOM_UTF8)


def _as_on_disk(job: FileJob, root: Path) -> FileJob:
    """`job` over its working-tree file when that file is the staged content with CRLF line endings (what
    core.autocrlf checks out): the docstrings then go into the file as it is on disk, line endings kept, and
    staging it again gives the staged content plus them. Otherwise `job` itself: any other difference (a clean
    filter that strips a secret, an edit git does not see under assume-unchanged) holds the file back."""
    from assistant.code.edit import python_text
    from assistant.code.git import has_unstaged_changes
    from assistant.paths import read_regular_file

    current = read_regular_file(job.path)
    if current is None or current == job.raw or current.replace(b"\r\n", b"\n") != job.raw:
        return job
    if has_unstaged_changes(root, job.name):  # without autocrlf, CRLF over a staged LF is a real change
        return job
    try:
        return FileJob(job.name, job.path, python_text(current, job.name), current)
    except UsageError:  # the filtered form is not Python source: hold the file back as before
        return job


def _not_writable(job: FileJob, staged: bool, root: Path | None, force: bool) -> str | None:
    """Why the docstrings of `job` could not be written (so none should be generated), or None."""
    from assistant.code.edit import check_compiles
    from assistant.code.git import has_unstaged_changes
    from assistant.paths import write_target

    if staged and root is not None:
        if has_unstaged_changes(root, job.name):
            return "it also has unstaged changes, which would be mixed into what you review (stage or stash them first)"
        try:
            current = job.path.read_bytes()
        except OSError as exc:
            return f"its working-tree file cannot be read ({exc.strerror})"
        if current != job.raw:
            return "its working-tree file differs from the staged content (a git filter or line-ending conversion)"
    try:
        check_compiles(job.raw, job.name, "the file as it is")  # parses, but Python refuses it
        write_target(job.path, root or Path.cwd(), force)
    except UsageError as exc:  # read-only, a symlink out of the repo, hard links
        return str(said_with_flags(exc))
    return None


def _collect(
    files: list[Path], staged: bool, root: Path | None, write: bool = False, force: bool = False
) -> tuple[list[FileJob], list[str], list[str]]:
    """The files to document, the unreadable ones (skipped), and in write mode the ones with missing
    docstrings that could not be written (held back before any generation, each with its reason).

    Staged test files are left out unless `docstring.tests` is on (:func:`_staged_to_document`)."""
    from assistant.code.docstrings import find_missing, read_python_source
    from assistant.code.edit import python_text
    from assistant.code.git import staged_text

    jobs: list[FileJob] = []
    skipped: list[str] = []
    if staged:
        if root is None:
            raise UsageError("--staged needs a git repository")
        for name in _staged_to_document(root):
            try:
                raw = staged_text(root, name)
                text = python_text(raw, name)
            except UsageError as exc:
                skipped.append(f"{exc}, skipped")
                continue
            job = FileJob(name, root / name, text, raw)
            jobs.append(_as_on_disk(job, root) if write else job)
    else:
        if not files:
            raise UsageError("name the files to document, or pass --staged")
        for path in files:
            if not path.is_file():
                raise UsageError(f"{path} is not a file")
            try:
                text, raw = read_python_source(path)
            except UsageError as exc:
                skipped.append(str(exc))
                continue
            jobs.append(FileJob(str(path), path, text, raw))
    held: list[str] = []
    for job in jobs:
        job.targets = find_missing(job.text)
        if write and job.targets:
            reason = _not_writable(job, staged, root, force)
            if reason:
                left = counted(len(job.targets), "definition")
                held.append(f"{job.name}: skipped, {left} left without a docstring: {reason}")
                job.targets = []
    return jobs, skipped, held


def _staged_to_document(root: Path) -> list[str]:
    """The staged Python files, less test files (`test_*.py`, `*_test.py`, `conftest.py`) unless the setting
    `docstring.tests` is on: a test's name says what it checks, and pydocstyle leaves them alone by default too.
    Said in one line when any is left out; a test file named on the command line is always documented."""
    from assistant.code.docstrings import is_test_file
    from assistant.code.git import staged_python_files
    from assistant.config import load_settings

    names = staged_python_files(root)
    tests = [name for name in names if is_test_file(name)]
    if not tests or load_settings(start=root, check_trust=False)["docstring.tests"]:
        return names
    shown = ", ".join(tests[:3]) + (f" and {len(tests) - 3} more" if len(tests) > 3 else "")
    err.print(
        f"left {counted(len(tests), 'test file')} alone ({shown}): `tests = true` under [docstring] in "
        ".assist.toml documents staged tests too, `assist docstring FILE` one file",
        markup=False,
    )
    return [name for name in names if name not in tests]


@dataclass
class Outcome:
    """What a run did to the files."""

    report: dict
    changed: int = 0  # files written
    written: int = 0  # docstrings written to disk
    failed: list[str] = field(default_factory=list)  # why each file was not (wholly) written, a line each
    failed_files: set[str] = field(default_factory=set)  # those files

    def fail(self, name: str, why: str) -> None:
        """Note that file `name` was not (wholly) documented, and why."""
        self.failed.append(f"{name}: {why}")
        self.failed_files.add(name)


def document(
    jobs: list[FileJob],
    generate: Callable[[FileJob], Written],
    *,
    width: int,
    write: bool,
    show_diff: bool,
    json_output: bool,
    root: Path | None,
    force: bool = False,
    report: dict | None = None,
) -> Outcome:
    """Generate each job's docstrings with `generate`, insert them, and show or write the result.

    A write compiles the new text first and refuses a file whose bytes changed since they were read (the
    user edited it while the model was busy): it is reported in `Outcome.failed` and left as it is.
    """
    from assistant.code.docstrings import insert_docstrings
    from assistant.code.edit import unified_diff, write_python
    from assistant.paths import ChangedOnDisk

    outcome = Outcome(report if report is not None else {"files": []})
    for job in jobs:
        if not job.targets:
            continue
        written = generate(job)
        entry: dict = {"file": job.name, "written": written.docstrings, "skipped": written.skipped}
        outcome.report["files"].append(entry)
        for name, why in written.skipped.items():
            err.print(f"{job.name}: {name} skipped: {why}", markup=False)
        if write and written.skipped:  # what the model did not write is still missing: the commit must not pass
            outcome.fail(job.name, f"{counted(len(written.skipped), 'docstring')} not written (skipped above)")
        if not written.docstrings:
            continue
        try:
            new = insert_docstrings(job.text, written.docstrings, width)
        except ValueError as exc:
            outcome.fail(job.name, f"left untouched: {exc}")
            continue
        if not write or show_diff:
            if not json_output:
                out.print(unified_diff(job.text, new, job.name).rstrip("\n"), markup=False, highlight=False)
            entry["diff"] = unified_diff(job.text, new, job.name)
        if not write:
            continue
        try:
            write_python(
                job.path, new, name=job.name, root=root or Path.cwd(), force=force, expected=job.raw, bom=job.bom
            )
        except ChangedOnDisk:
            why = "it changed while its docstrings were generated; your edits are kept, run again to document them"
            outcome.fail(job.name, f"not written: {why}")
            continue
        except UsageError as exc:
            outcome.fail(job.name, f"not written: {said_with_flags(exc)}")
            continue
        entry["written_to_disk"] = True
        outcome.changed += 1
        outcome.written += len(written.docstrings)
    for line in outcome.failed:
        err.print(line, markup=False)
    return outcome


FilesArg = Annotated[list[Path] | None, typer.Argument(help="Python files (or --staged).")]
CheckOpt = Annotated[
    bool, typer.Option("--check", help="List what lacks one (no model); exit 1 if any.", rich_help_panel=BASICS)
]
StagedOpt = Annotated[bool, typer.Option("--staged", help="The staged Python files (hooks).", rich_help_panel=BASICS)]
StyleOpt = Annotated[
    str, typer.Option(help="auto (inferred from the repo), google, numpy, rest or plain.", rich_help_panel=BASICS)
]
DiffOpt = Annotated[
    bool, typer.Option("--diff", help="Show the diff (the default unless --write).", rich_help_panel=OUTPUT)
]
WriteOpt = Annotated[
    bool, typer.Option("--write", help="Write the docstrings into the files (atomically).", rich_help_panel=BASICS)
]
FailOnChangeOpt = Annotated[
    bool,
    typer.Option(
        "--fail-on-change",
        help="Exit 1 when files were changed (hooks: review, then re-stage).",
        rich_help_panel=OUTPUT,
    ),
]
WriteForceOpt = Annotated[
    bool,
    typer.Option(
        "--force", help="With --write: write through a symlink out of the repo, or a hard link.", rich_help_panel=BASICS
    ),
]
MaxFunctionsOpt = Annotated[
    int, typer.Option(help="Refuse to document more definitions than this in one run.", rich_help_panel="Limits")
]
TimeBudgetOpt = Annotated[float, typer.Option(help="Generation seconds per file.", rich_help_panel="Limits")]
ExemplarsOpt = Annotated[
    int, typer.Option("-k", help="Exemplar (code, docstring) pairs from the repo's index.", rich_help_panel=RETRIEVAL)
]


@backend_options("backend", "engine", "model", "base_url")
def docstring(
    files: FilesArg = None,
    check: CheckOpt = False,
    staged: StagedOpt = False,
    style: StyleOpt = "auto",
    diff: DiffOpt = False,
    write: WriteOpt = False,
    fail_on_change: FailOnChangeOpt = False,
    force: WriteForceOpt = False,
    max_functions: MaxFunctionsOpt = 25,
    time_budget: TimeBudgetOpt = 120.0,
    k: ExemplarsOpt = 2,
    backend_flags: BackendFlags = NO_BACKEND_FLAGS,
    json_output: JsonOpt = False,
) -> None:
    """Write missing docstrings in the style of the code around them.

    \b
    Examples:
      assist docstring src/util.py                        # shows the diff
      assist docstring --check --staged                   # a fast hook
      assist docstring --staged --write --fail-on-change  # the writing hook
    """
    _check_flags(files, check, staged, style, write, diff, fail_on_change, max_functions, time_budget, k)
    root = _repo_root()
    jobs, skipped, held = _collect(list(files or []), staged, root, write=write and not check, force=force)
    for line in skipped:
        err.print(line, markup=False)  # e.g. "x.py is not UTF-8 text, skipped"
    for line in held:
        err.print(line, markup=False)  # nothing is generated for a file that will not be written
    missing = [(job, target) for job in jobs for target in job.targets]
    report: dict = {"files": [], "skipped": skipped}
    if held:
        report["not_written"] = held
    if check:
        _report_check(report, missing, skipped, json_output, staged=staged)
        return
    if not missing:
        _report_none_missing(report, held, skipped, json_output)
        return
    if len(missing) > max_functions:
        _limit(jobs, len(missing), max_functions, staged, report)
    write_options = {"write": write, "show_diff": diff, "json_output": json_output, "force": force}
    outcome, style = _generate(jobs, root, style, k, time_budget, backend_flags, write_options, report)
    _report_written(report, outcome, style, len(held) + len(skipped), skipped, write, fail_on_change, json_output)


def _limit(jobs: list[FileJob], missing: int, most: int, staged: bool, report: dict) -> None:
    """More definitions lack a docstring than --max-functions allows. Named files: refused, the user chooses.
    Staged ones (the hook): the first `most` in file order are documented now and the rest on the next commit,
    so a large new module makes progress instead of blocking every commit with a flag the hook's user never set."""
    if not staged:
        raise UsageError(
            f"{missing} definitions lack a docstring, more than --max-functions {most}; "
            "document some files at a time, or raise the limit"
        )
    room = most
    for job in jobs:
        job.targets, room = job.targets[:room], max(room - len(job.targets), 0)
    report["left_for_next_run"] = missing - most
    err.print(f"{missing} definitions lack a docstring: the first {most} now, {missing - most} on the next commit")


def _check_flags(
    files: list[Path] | None,
    check: bool,
    staged: bool,
    style: str,
    write: bool,
    diff: bool,
    fail_on_change: bool,
    max_functions: int,
    time_budget: float,
    k: int,
) -> None:
    """Refuse, with one line, numbers out of range, an unknown style and flags that do not go together."""
    from assistant.code.docstrings import STYLES

    check_range("--max-functions", max_functions, 1)
    check_range("--time-budget", time_budget, 0, low_open=True)
    check_range("-k", k, 0, MAX_K)
    if style != "auto" and style not in STYLES:
        raise UsageError(f"unknown style {style!r}; choose from: auto, {', '.join(STYLES)}")
    if staged and files:
        raise UsageError("--staged documents the staged files; name files or pass --staged, not both")
    if check:
        flags = (("--write", write), ("--diff", diff), ("--fail-on-change", fail_on_change))
        conflicting = [flag for flag, given in flags if given]
        if conflicting:
            raise UsageError(f"--check only lists what lacks a docstring; drop {', '.join(conflicting)}")


def _repo_root() -> Path | None:
    """The git repository around the working folder, or None outside one."""
    from assistant.indexing.index import repo_root

    try:
        return repo_root(Path.cwd())
    except UsageError:
        return None


def _report_check(
    report: dict, missing: list[tuple[FileJob, Any]], skipped: list[str], json_output: bool, *, staged: bool
) -> None:
    """--check: list what lacks a docstring (or print the report as JSON), with the command that writes them (for
    the `staged` files, or the files that lack one); exit 1 if anything does, or a file could not be read (a file
    that could not be checked is not a file that passed: the hook must not let it through)."""
    if json_output:  # stdout holds the JSON alone
        report["missing"] = [{"file": job.name, **target.to_json()} for job, target in missing]
        out.print_json(json.dumps(report))
    else:
        for job, target in missing:
            out.print(f"{job.name}:{target.line}: {target.kind} {target.qualname} has no docstring", markup=False)
    if missing:
        names = list(dict.fromkeys(job.name for job, _ in missing))
        # A command that runs as printed: `--write` alone names no files ("name the files to document").
        dashed = any(name.startswith("-") for name in names)  # `-x.py` would read as an option
        what = "--staged" if staged else ("-- " if dashed else "") + shlex.join(names)
        err.print(
            f"{counted(len(missing), 'definition')} in {counted(len(names), 'file')} lack a docstring; "
            f"`assist docstring --write {what}` writes them"
        )
        raise typer.Exit(1)
    if skipped:
        err.print(f"{counted(len(skipped), 'file')} could not be checked (above)")
        raise typer.Exit(1)


def _report_none_missing(report: dict, held: list[str], skipped: list[str], json_output: bool) -> None:
    """Nothing to generate: say so (or print the report as JSON), and exit 1 when a file was held back or could not
    be read or parsed (not a file that passed: the writing hook fails on it as the checking one does)."""
    if json_output:
        out.print_json(json.dumps(report))
    elif not held and not skipped:
        err.print("every function, method and class has a docstring")
    if held or skipped:
        err.print(f"{counted(len(held) + len(skipped), 'file')} not documented (see above); nothing was written")
        raise typer.Exit(1)


def _generate(
    jobs: list[FileJob],
    root: Path | None,
    style: str,
    k: int,
    time_budget: float,
    backend_flags: BackendFlags,
    write_options: dict[str, bool],
    report: dict,
) -> tuple[Outcome, str]:
    """Load the model `backend_flags` names and :func:`document` the jobs in `style`
    (auto: the repo's), with `k` exemplars from the repo's index: (what was done, the style used)."""
    from assistant.code.docstrings import detect_style, line_length, repo_docstrings, repo_style
    from assistant.code.git import tracked_python_files
    from assistant.core.docwriter import own_exemplars, write_docstrings
    from assistant.pipeline import Pipeline

    base = root or Path.cwd()
    width = line_length(base)
    tracked = tracked_python_files(root) if root else []
    if style == "auto":
        style = repo_style(root, tracked) if root else detect_style(repo_docstrings(j.path for j in jobs))
    settings = backend_flags.settings(start=base)
    pipeline = Pipeline(settings=settings, start=base)
    with ProgressUI(show_progress(write_options["json_output"])) as ui:
        exemplars = _exemplars(pipeline, root, tracked, ui) if k > 0 else None
        ui.status("Loading the model")
        generator = pipeline.backend(ui)

        def generate(job: FileJob) -> Written:
            ui.status(f"{job.name}: {counted(len(job.targets), 'definition')} to document ({style} style)")
            return write_docstrings(
                job.targets,
                generator,
                style=style,
                exemplars=exemplars,
                k=k,
                path=job.name,
                own=own_exemplars(job.text, job.name) if k > 0 else None,
                time_budget_s=time_budget,
                progress=ui,
            )

        outcome = document(jobs, generate, width=width, root=root, report=report, **write_options)
    return outcome, style


def _exemplars(pipeline: Pipeline, root: Path | None, tracked: list[str], ui: ProgressUI) -> ExemplarIndex | FirstOf:
    """Where exemplars come from after the file's own: the repo's index; in a repo never indexed, the documented
    functions of its tracked files, then the embedded default bank (for 200 functions of four real projects
    documented as if their file were new, sentence BLEU-4 +1.74 [+0.40, +3.14] over the bank alone:
    docs/results/docstrings.md)."""
    from assistant.code.docstrings import repo_functions
    from assistant.core.docwriter import ExemplarIndex, FirstOf

    settings = pipeline.settings
    asked = settings["docstring.exemplars"] == "jointcom"
    trained = _jointcom(root, pipeline.generator_name()) if asked else None  # None: by code tokens (RAF_BM25)
    source = pipeline.source(ui)
    pool = ExemplarIndex(source.index.examples, trained)
    if source.kind != "default" or root is None:
        return pool
    ui.status(f"Reading this repo's documented functions ({counted(len(tracked), 'file')})")
    return FirstOf(ExemplarIndex(repo_functions(root, tracked), trained), pool)


def _jointcom(root: Path | None, generator: str | None):  # -> Encoder
    """The repo's trained JOINTCOM encoder for `generator`, asked for by `docstring.exemplars = "jointcom"`; a
    one-line error where there is none (it is never chosen by itself: it did not beat plain exemplars)."""
    from assistant.methods.jointcom import retriever_dir, trained_encoder

    if root is None:
        raise UsageError("docstring.exemplars is jointcom, which is trained per repository: run inside a git repo")
    encoder = trained_encoder(retriever_dir([], root), generator)
    if encoder is None:
        raise UsageError(
            f"docstring.exemplars is jointcom, but no JOINTCOM retriever in {root} serves {generator}: train one "
            "with `assist train docstring-retriever`, or set docstring.exemplars to bm25"
        )
    return encoder


def _report_written(
    report: dict,
    outcome: Outcome,
    style: str,
    held_back: int,
    skipped: list[str],
    write: bool,
    fail_on_change: bool,
    json_output: bool,
) -> None:
    """After generation: the JSON report, or what was written or proposed, and exit 1 when a file was not
    documented (`held_back` of them before generation), files changed under --fail-on-change, or a file could
    not be read."""
    if outcome.failed:
        report.setdefault("not_written", []).extend(outcome.failed)
    if json_output:
        out.print_json(json.dumps(report))
    not_written = held_back + len(outcome.failed_files)
    if write:
        err.print(
            f"wrote {counted(outcome.written, 'docstring')} in {counted(outcome.changed, 'file')} ({style} style); "
            "review with `git diff`"
        )
        if not_written:
            err.print(f"{counted(not_written, 'file')} not documented (see above)")
            raise typer.Exit(1)
        if fail_on_change and outcome.changed:
            err.print("files were changed: review the docstrings, `git add` them, and commit again")
            raise typer.Exit(1)
    else:
        if not json_output:
            total = sum(len(entry["written"]) for entry in report["files"])
            err.print(f"{counted(total, 'docstring')} proposed ({style} style); pass --write to write them")
        if skipped:
            err.print(f"{counted(len(skipped), 'file')} could not be read (above)")
            raise typer.Exit(1)


@command(hook_app, "install", short_help="Install a git pre-commit hook that documents staged files.", guarded=False)
def hook_install(
    check_only: Annotated[bool, typer.Option("--check-only", help="Only fail on missing ones (no model).")] = False,
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            help="Replace a pre-commit hook assist did not write (kept as pre-commit.before-assist, which assist's "
            "hook runs first and uninstall puts back) or a symlinked one (the link, not its target), or install into "
            "a hooks folder other repositories share (core.hooksPath).",
        ),
    ] = False,
) -> None:
    """Install a plain git pre-commit hook that documents staged Python files (fails so you can review)."""
    from assistant.code.git import install_hook
    from assistant.indexing.index import repo_root

    done = install_hook(repo_root(Path.cwd()), check_only=check_only, force=force)
    out.print(f"installed {done.path}: " + ("checks for" if check_only else "writes") + " missing docstrings on commit")
    if done.kept is not None:
        runs = (
            "assist's hook runs it first" if done.runs_first else "not executable, so assist's hook skips it as git did"
        )
        out.print(f"moved your previous hook to {done.kept} ({runs}); `assist hook uninstall` puts it back")
    elif done.runs_first is not None:
        out.print(f"assist's hook runs {done.runs_first} first (the hook an earlier install replaced)")


@command(hook_app, "uninstall", short_help="Remove assist's hook; put back the one it replaced.", guarded=False)
def hook_uninstall() -> None:
    """Remove the pre-commit hook that `assist hook install` wrote, putting back the one it replaced."""
    from assistant.code.git import uninstall_hook
    from assistant.indexing.index import repo_root

    done = uninstall_hook(repo_root(Path.cwd()))
    if done.restored:
        said = f"removed assist's hook and put your previous one back at {done.path}"
    elif done.removed:
        said = f"removed {done.path}"
    else:
        said = f"no assist hook installed at {done.path}; nothing to do"
    if done.kept is not None:  # left alone: say so, it is a hook of the user's that no longer runs
        said += f" (a hook an earlier install replaced is still at {done.kept}: rename it to pre-commit to use it)"
    out.print(said)
