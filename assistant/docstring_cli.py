"""`assist docstring` and `assist hook`: document what lacks a docstring, from the CLI or a pre-commit hook."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated

import typer

from .cli_options import BackendOpt, BaseUrlOpt, ModelOpt, backend_settings
from .console import ProgressUI, err, friendly_errors, out, show_progress
from .errors import UsageError

hook_app = typer.Typer(help="Install or remove assist's plain git pre-commit hook.", no_args_is_help=True)


@dataclass
class FileJob:
    name: str  # as shown to the user
    path: Path
    text: str
    targets: list = field(default_factory=list)


def _collect(files: list[Path], staged: bool, root: Path | None) -> tuple[list[FileJob], list[str]]:
    from .docstrings import find_missing, read_python
    from .edit import python_text
    from .hooks import staged_python_files, staged_text

    jobs: list[FileJob] = []
    skipped: list[str] = []
    if staged:
        if root is None:
            raise UsageError("--staged needs a git repository")
        for name in staged_python_files(root):
            try:
                text = python_text(staged_text(root, name), name)
            except UsageError as exc:
                skipped.append(f"{exc}, skipped")
                continue
            jobs.append(FileJob(name, root / name, text))
    else:
        if not files:
            raise UsageError("name the files to document, or pass --staged")
        for path in files:
            if not path.is_file():
                raise UsageError(f"{path} is not a file")
            try:
                text = read_python(path)
            except UsageError as exc:
                skipped.append(str(exc))
                continue
            jobs.append(FileJob(str(path), path, text))
    for job in jobs:
        job.targets = find_missing(job.text)
    return jobs, skipped


@friendly_errors
def docstring(
    files: Annotated[list[Path] | None, typer.Argument(help="Python files (or --staged).")] = None,
    check: Annotated[bool, typer.Option("--check", help="List what lacks one (no model); exit 1 if any.")] = False,
    staged: Annotated[bool, typer.Option("--staged", help="The staged Python files (hooks).")] = False,
    style: Annotated[str, typer.Option(help="auto (inferred from the repo), google, numpy, rest or plain.")] = "auto",
    diff: Annotated[bool, typer.Option("--diff", help="Show the diff (the default unless --write).")] = False,
    write: Annotated[bool, typer.Option("--write", help="Write the docstrings into the files (atomically).")] = False,
    fail_on_change: Annotated[
        bool, typer.Option("--fail-on-change", help="Exit 1 when files were changed (hooks: review, then re-stage).")
    ] = False,
    max_functions: Annotated[int, typer.Option(help="Refuse to document more definitions than this in one run.")] = 25,
    time_budget: Annotated[float, typer.Option(help="Generation seconds per file.")] = 120.0,
    k: Annotated[int, typer.Option("-k", help="Exemplar (code, docstring) pairs from the repo's index.")] = 2,
    backend: BackendOpt = None,
    model: ModelOpt = None,
    base_url: BaseUrlOpt = None,
    json_output: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Write missing docstrings in the style of the code around them.

    Examples: assist docstring src/util.py (shows the diff); assist docstring --check --staged (a fast hook);
    assist docstring --staged --write --fail-on-change (the writing hook).
    """
    import contextlib

    from .docstrings import STYLES, detect_style, insert_docstrings, line_length, repo_docstrings
    from .edit import unified_diff
    from .hooks import has_unstaged_changes, tracked_python_files
    from .index import repo_root
    from .paths import atomic_write_text

    if style != "auto" and style not in STYLES:
        raise UsageError(f"unknown style {style!r}; choose from: auto, {', '.join(STYLES)}")
    root: Path | None = None
    with contextlib.suppress(UsageError):
        root = repo_root(Path.cwd())
    jobs, skipped = _collect(list(files or []), staged, root)
    for line in skipped:
        err.print(line, markup=False)  # e.g. "x.py is not UTF-8 text, skipped"
    missing = [(job, target) for job in jobs for target in job.targets]
    report: dict = {"files": [], "skipped": skipped}

    if check:
        for job, target in missing:
            out.print(f"{job.name}:{target.line}: {target.kind} {target.qualname} has no docstring", markup=False)
        if json_output:
            report["missing"] = [{"file": job.name, **target.to_json()} for job, target in missing]
            out.print_json(json.dumps(report))
        if missing:
            files_with = len({job.name for job, _ in missing})
            err.print(
                f"{len(missing)} definition(s) in {files_with} file(s) lack a docstring; "
                "`assist docstring --write` writes them"
            )
            raise typer.Exit(1)
        return

    if not missing:
        if not json_output:
            err.print("every function, method and class has a docstring")
        else:
            out.print_json(json.dumps(report))
        return
    if len(missing) > max_functions:
        raise UsageError(
            f"{len(missing)} definitions lack a docstring, more than --max-functions {max_functions}; "
            "document some files at a time, or raise the limit"
        )

    from .backends import load_backend
    from .docwriter import ExemplarIndex, write_docstrings
    from .encoder import Encoder
    from .sources import open_source

    base = root or Path.cwd()
    width = line_length(base)
    if style == "auto":
        pool = [base / name for name in tracked_python_files(base)] if root else [job.path for job in jobs]
        style = detect_style(repo_docstrings(pool))
    settings = backend_settings(backend, model, base_url, start=base)
    changed = 0
    with ProgressUI(show_progress(json_output)) as ui:
        encoder = Encoder.load()
        source = open_source(encoder, start=base, progress=ui)
        exemplars = None
        if k > 0:
            from .jointcom import retriever_dir, trained_encoder

            # The repo's JOINTCOM retriever when one was trained, else exemplars by code tokens (RAF_BM25).
            trained = trained_encoder(retriever_dir([], root)) if root else None
            exemplars = ExemplarIndex(source.index.examples, trained)
        generator = load_backend(settings.backend, settings.model, progress=ui, **settings.backend_options())
        for job in jobs:
            if not job.targets:
                continue
            ui.status(f"{job.name}: {len(job.targets)} definition(s) to document ({style} style)")
            written = write_docstrings(
                job.targets,
                generator,
                style=style,
                exemplars=exemplars,
                k=k,
                path=job.name,
                time_budget_s=time_budget,
                progress=ui,
            )
            entry = {"file": job.name, "written": written.docstrings, "skipped": written.skipped}
            report["files"].append(entry)
            for name, why in written.skipped.items():
                err.print(f"{job.name}: {name} skipped: {why}", markup=False)
            if not written.docstrings:
                continue
            try:
                new = insert_docstrings(job.text, written.docstrings, width)
            except ValueError as exc:
                err.print(f"{job.name}: left untouched: {exc}", markup=False)
                continue
            if not write or diff:
                if not json_output:
                    out.print(unified_diff(job.text, new, job.name).rstrip("\n"), markup=False, highlight=False)
                entry["diff"] = unified_diff(job.text, new, job.name)
            if write:
                if staged and root is not None and has_unstaged_changes(root, job.name):
                    err.print(f"{job.name}: has unstaged changes too; not written (stage or stash them first)")
                    continue
                atomic_write_text(job.path, new)
                entry["written_to_disk"] = True
                changed += 1
    if json_output:
        out.print_json(json.dumps(report))
    total = sum(len(entry["written"]) for entry in report["files"])
    if write:
        err.print(f"wrote {total} docstring(s) in {changed} file(s) ({style} style); review with `git diff`")
        if fail_on_change and changed:
            err.print("files were changed: review the docstrings, `git add` them, and commit again")
            raise typer.Exit(1)
    elif not json_output:
        err.print(f"{total} docstring(s) proposed ({style} style); pass --write to write them")


@hook_app.command("install")
@friendly_errors
def hook_install(
    check_only: Annotated[bool, typer.Option("--check-only", help="Only fail on missing ones (no model).")] = False,
    force: Annotated[bool, typer.Option("--force", help="Replace a pre-commit hook assist did not write.")] = False,
) -> None:
    """Install a plain git pre-commit hook that documents staged Python files (fails so you can review)."""
    from .hooks import install_hook
    from .index import repo_root

    path = install_hook(repo_root(Path.cwd()), check_only=check_only, force=force)
    out.print(f"installed {path}: " + ("checks for" if check_only else "writes") + " missing docstrings on commit")


@hook_app.command("uninstall")
@friendly_errors
def hook_uninstall() -> None:
    """Remove the pre-commit hook that `assist hook install` wrote."""
    from .hooks import uninstall_hook
    from .index import repo_root

    out.print(f"removed {uninstall_hook(repo_root(Path.cwd()))}")
