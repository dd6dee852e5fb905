"""Command-line options shared by `assist generate`, `assist eval ...` and friends: which backend, which model."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar, get_type_hints

import click
import typer
from typer.core import TyperCommand

from assistant.backends.models import DEFAULT_GENERATOR, FAST_GENERATOR
from assistant.config import (
    DEFAULT_K,
    DEFAULT_MAX_NEW_TOKENS,
    DEFAULT_N,
    DEFAULT_REPAIR,
    DEFAULT_STUB_K,
    DEFAULT_TEMPERATURE,
    DEFAULT_TOP_P,
    REPAIR_BUDGET_S,
    REPAIR_N,
    SEED_MAX,
    backend_settings,
)
from assistant.errors import UsageError
from assistant.pipeline.options import out_of_range

if TYPE_CHECKING:
    from assistant.config import Settings

__all__ = [
    "NO_BACKEND_FLAGS",
    "NO_GENERATION_FLAGS",
    "ApiOpt",
    "ApisOpt",
    "ApplyForceOpt",
    "ApplyOpt",
    "BackendFlags",
    "BackendOpt",
    "BankOpt",
    "BaseUrlOpt",
    "CandidatesOpt",
    "DemosOpt",
    "EngineOpt",
    "ExplainOpt",
    "FragmentsOpt",
    "FunctionOpt",
    "GenerationFlags",
    "IndexBankOpt",
    "IndexPathArg",
    "JsonOpt",
    "MaxTokensOpt",
    "ModelOpt",
    "OwnFileOpt",
    "PanelCommand",
    "PythonOpt",
    "RankerOpt",
    "RedrawOpt",
    "RepairOpt",
    "ReplaceOpt",
    "RepoFileOpt",
    "RepoTestsOpt",
    "RequirementArg",
    "RetrieverOpt",
    "SeedOpt",
    "StatsJsonOpt",
    "StubMaxTokensOpt",
    "TargetFileOpt",
    "TemperatureOpt",
    "TestCmdOpt",
    "TestOpt",
    "TestsFileOpt",
    "TestsInPromptOpt",
    "TimeoutOpt",
    "TopPOpt",
    "WorkPathArg",
    "backend_options",
    "backend_settings",
    "generation_options",
    "option_group",
]

# The help panels of `assist generate`, `tui` and `docstring`, in the order the help shows them.
BASICS = "Basics"
STUB = "Filling a stub"
TESTS = "Tests and repair"
RETRIEVAL = "Retrieval"
RANKING = "Ranking"
MODEL = "Model"
OUTPUT = "Output"
ADVANCED = "Advanced (research knobs; each also a config setting)"
PANELS = (BASICS, STUB, TESTS, RETRIEVAL, RANKING, MODEL, OUTPUT, ADVANCED)


def configured(*declarations: str, help_text: str, panel: str) -> Any:
    """An option whose value, when not given (None), comes from the config: Typer shows no default, the help names
    the setting and its fallback."""
    return typer.Option(*declarations, help=help_text, show_default=False, rich_help_panel=panel)


class PanelCommand(TyperCommand):
    """A command whose plain-text help lists its options under their `rich_help_panel` headings.

    The CLI prints plain help (no Rich boxes, so `assist[serve]` and pipes read as typed), and Typer's plain
    help ignores panels: this groups them, in PANELS order, with options given no panel last under "Options".
    """

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """Arguments first, then one section per panel."""
        arguments: list[tuple[str, str]] = []
        panels: dict[str, list[tuple[str, str]]] = {}
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx)
            if record is None:
                continue
            if param.param_type_name == "argument":
                arguments.append(record)
            else:
                panels.setdefault(getattr(param, "rich_help_panel", None) or "Options", []).append(record)
        if arguments:
            with formatter.section("Arguments"):
                formatter.write_dl(arguments)
        order = {name: place for place, name in enumerate(PANELS)}
        for name in sorted(panels, key=lambda panel: order.get(panel, len(PANELS))):
            with formatter.section(name):
                formatter.write_dl(panels[name])


BackendOpt = Annotated[
    str | None,
    typer.Option(
        "--backend",
        help="Generation backend: local or openai (default: the `backend` setting in the config, else local; "
        "--base-url alone means openai).",
        rich_help_panel=MODEL,
    ),
]
EngineOpt = Annotated[
    str | None,
    configured(
        "--engine",
        help_text="local backend: openvino (int8, or int4 by local.weights; fast), transformers (fp32) or ct2 "
        "(default: local.engine, else openvino).",
        panel=MODEL,
    ),
]
ModelOpt = Annotated[
    str | None,
    configured(
        "--model",
        help_text=f"Model name: see `assist models list` (local: default {DEFAULT_GENERATOR}; {FAST_GENERATOR} is the "
        "fast, low-memory choice), or the server's (openai).",
        panel=MODEL,
    ),
]
BaseUrlOpt = Annotated[
    str | None,
    typer.Option(
        "--base-url",
        help="openai backend: the server, e.g. http://127.0.0.1:8080/v1 (env OPENAI_BASE_URL); given without "
        "--backend, it selects the openai backend.",
        rich_help_panel=MODEL,
    ),
]
ApiOpt = Annotated[
    str | None,
    typer.Option("--api", help="openai backend: chat or completions endpoint (default chat).", rich_help_panel=MODEL),
]
TimeoutOpt = Annotated[
    float | None,
    typer.Option(
        "--timeout", help="openai backend: seconds to wait for one request (default 120).", rich_help_panel=MODEL
    ),
]


@dataclass(frozen=True)
class BackendFlags:
    """The backend options as typed (None: not given, or not an option of the command): one parameter of a
    command's function where its help lists up to six options (see :func:`backend_options`). Each field is
    annotated with its option, in the order a command's help lists them."""

    backend: BackendOpt = None
    engine: EngineOpt = None
    model: ModelOpt = None
    base_url: BaseUrlOpt = None
    api: ApiOpt = None
    timeout: TimeoutOpt = None

    def settings(self, start: Path | None = None) -> Settings:
        """The settings these flags give on top of env, the repo's `.assist.toml` and the user config."""
        return backend_settings(
            self.backend, self.model, self.base_url, self.api, self.timeout, start=start, engine=self.engine
        )


NO_BACKEND_FLAGS = BackendFlags()  # a command's default: no backend option given

_Command = TypeVar("_Command", bound=Callable[..., Any])


def backend_options(*names: str, **options: Any) -> Callable[[_Command], _Command]:
    """Decorate a command whose signature has one parameter of type BackendFlags: Typer sees the options `names`
    (default: all six) in its place, in BackendFlags' order, and the command gets them as one BackendFlags.
    `options` declares a field's option otherwise for this command (`eval likelihood`'s --backend scores).

    Seven commands take these options; declared here once, their signatures and `backend_settings` calls do not
    repeat the list (and a new option reaches every command that takes the group)."""
    return option_group(NO_BACKEND_FLAGS, names, options)


def option_group(
    defaults: Any, names: tuple[str, ...] = (), overrides: dict[str, Any] | None = None
) -> Callable[[_Command], _Command]:
    """Decorate a command whose signature has one parameter of the type of `defaults`, a frozen dataclass of flags
    whose fields are annotated with their Typer options: Typer sees the options of the fields `names` (default:
    all) in that parameter's place, in the fields' order, each with its value in `defaults` as its default and
    declared by its annotation unless `overrides` (field name: option) declares it otherwise for this command; the
    command gets them as one such dataclass."""
    group = type(defaults)
    declared = get_type_hints(group, include_extras=True)
    unknown = (set(names) | set(overrides or {})) - set(declared)
    if unknown:  # a misspelt name would silently drop the option from the command
        raise ValueError(f"{group.__name__} has no field {', '.join(sorted(unknown))}")
    options = {
        field.name: (overrides or {}).get(field.name, declared[field.name])
        for field in fields(group)
        if not names or field.name in names
    }

    def decorate(command: _Command) -> _Command:
        # Typer reads the signature with its annotations evaluated, so this one is evaluated too.
        signature = inspect.signature(command, eval_str=True)
        [slot] = [p for p in signature.parameters.values() if p.annotation is group]
        expanded = [
            inspect.Parameter(name, slot.kind, default=getattr(defaults, name), annotation=option)
            for name, option in options.items()
        ]
        parameters = []
        for parameter in signature.parameters.values():
            parameters += expanded if parameter is slot else [parameter]

        @functools.wraps(command)
        def run(*args: Any, **kwargs: Any) -> Any:
            flags = replace(defaults, **{name: kwargs.pop(name, getattr(defaults, name)) for name in options})
            return command(*args, **kwargs, **{slot.name: flags})

        run.__signature__ = signature.replace(parameters=parameters)  # type: ignore[attr-defined]
        run.__annotations__ = {p.name: p.annotation for p in parameters} | {"return": signature.return_annotation}
        return run  # type: ignore[return-value]

    return decorate


# What `assist generate` and `assist tui` share. None = not given: the `[generate]` setting stands
# (config files, ASSIST_GENERATE_* in the environment), else the default the help names.
CandidatesOpt = Annotated[
    int | None,
    configured("-n", help_text=f"Candidates to sample (default: generate.n, else {DEFAULT_N}).", panel=BASICS),
]
DemosOpt = Annotated[
    int | None,
    configured(
        "-k",
        help_text=f"Demonstrations to retrieve, 0 for zero-shot (default: generate.k, else {DEFAULT_K}; filling a stub "
        f"{DEFAULT_STUB_K}).",
        panel=RETRIEVAL,
    ),
]
BankOpt = Annotated[
    Path | None,
    typer.Option(help="Retrieve from this JSONL bank instead of the repo's index.", rich_help_panel=RETRIEVAL),
]
MaxTokensOpt = Annotated[
    int | None,
    configured(
        help_text=f"Longest candidate, in tokens (default: generate.max_new_tokens, else {DEFAULT_MAX_NEW_TOKENS}).",
        panel=MODEL,
    ),
]
SeedOpt = Annotated[
    int | None,
    typer.Option(
        help="Random seed, for repeatable samples (default: generate.seed, else fresh).", rich_help_panel=BASICS
    ),
]
RetrieverOpt = Annotated[
    str | None,
    configured(
        help_text="auto (hybrid), bm25, dense, hybrid, or a trained one: tstr, lail, selfracg (selfracg-init: its "
        "untrained branch). A trained retriever serves only when named: none beat the plain ones where measured. "
        "Default: generate.retriever in the config, else auto.",
        panel=RETRIEVAL,
    ),
]
RankerOpt = Annotated[
    str | None,
    configured(
        help_text="first, random, logprob, exec (tests passed), agree (agreement on tests the model writes, CodeT), "
        "reviewer, coder-reviewer or condor (the trained discriminator); combine with +, e.g. exec+condor. auto: "
        "exec+ with tests, else agree+ when two or more candidates define a function, then logprob (condor serves "
        "only when named). Default: generate.ranker in the config, else auto.",
        panel=RANKING,
    ),
]


def check_range(
    option: str,
    value: float | None,
    low: float | None = None,
    high: float | None = None,
    *,
    low_open: bool = False,
    high_open: bool = False,
) -> None:
    """Refuse a numeric option outside [low, high] (or an open end), NaN and infinity included, with one line.

    Every command checks its numbers here before any work: `--limit -1` once chose 499 tasks of 500 and
    `--temperature -1` reached the sampler. Click's own range errors print usage over four lines. None = not given.
    """
    phrase = out_of_range(value, low, high, low_open=low_open, high_open=high_open)
    if phrase is not None:
        raise UsageError(f"{option} {phrase}")


def check_seed(seed: int | None) -> None:
    """`--seed`: 0 to 2**32 - 1."""
    check_range("--seed", seed, 0, SEED_MAX)


# `assist generate`'s own options, one alias each, so its signature is one line per option. None = not given.
RequirementArg = Annotated[
    str | None,
    typer.Argument(help="What the code should do, in plain words (with --function: the stub's docstring if left out)."),
]
TargetFileOpt = Annotated[
    Path | None,
    typer.Option("--file", "-f", help="Target file: show the diff that puts the code there.", rich_help_panel=BASICS),
]
FunctionOpt = Annotated[
    str | None,
    typer.Option(
        "--function",
        help="Fill this stub of --file (NAME or Class.method; its body `...`, `pass` or `raise "
        "NotImplementedError`): the docstring is the requirement, and only the body is replaced. Without --file, "
        "the one file of the git repo where NAME is a stub. With a requirement and --file, a function that has a "
        "body is rewritten the same way.",
        rich_help_panel=STUB,
    ),
]
ReplaceOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--replace",
        help="With --file and a requirement: let the code replace this existing function or class (NAME or "
        "Class.method). Without it, definitions the file already has are never changed: a candidate's rewrites "
        "of them are left out of its edit. Repeatable.",
        rich_help_panel=STUB,
    ),
]
ApisOpt = Annotated[
    bool | None,
    configured(
        "--apis/--no-apis",
        help_text="With --function: also show the signatures of the repo's functions from other files that the "
        "file uses (needs `assist index`). Default: generate.apis in the config, else off.",
        panel=ADVANCED,
    ),
]
FragmentsOpt = Annotated[
    bool | None,
    configured(
        "--fragments/--no-fragments",
        help_text="With --function: show -k 20-line fragments of the repo's other files instead of demonstrations "
        "(needs `assist index`). Default: generate.fragments in the config, else off.",
        panel=ADVANCED,
    ),
]
OwnFileOpt = Annotated[
    bool | None,
    configured(
        "--own-file/--no-own-file",
        help_text="With --function: the file's own other functions may be demonstrations (never the stub). "
        "Default: generate.own_file in the config, else on.",
        panel=ADVANCED,
    ),
]
TestsInPromptOpt = Annotated[
    bool | None,
    configured(
        "--tests-in-prompt/--no-tests-in-prompt",
        help_text="With --function: show the repo's tests that mention the function, as its specification. "
        "Default: generate.tests_in_prompt in the config, else on.",
        panel=ADVANCED,
    ),
]
RedrawOpt = Annotated[
    bool | None,
    configured(
        "--redraw/--no-redraw",
        help_text="With --function: draw again each sample that wrote nothing (a few percent more time). "
        "Default: generate.redraw in the config, else on.",
        panel=ADVANCED,
    ),
]
TestOpt = Annotated[
    list[str] | None,
    typer.Option("--test", help='A test statement, e.g. "assert f(2) == 4". Repeatable.', rich_help_panel=TESTS),
]
TestsFileOpt = Annotated[
    Path | None, typer.Option("--tests", help="A Python file of assert statements.", rich_help_panel=TESTS)
]
TestCmdOpt = Annotated[
    str | None,
    typer.Option(
        "--test-cmd",
        help="With --function: the repo's tests to run on each candidate, as a pytest command, e.g. "
        "'pytest tests/test_util.py -k parse' (default: the test functions that mention the function; the "
        "interpreter is --python's).",
        rich_help_panel=TESTS,
    ),
]
RepoTestsOpt = Annotated[
    bool,
    typer.Option(
        "--repo-tests/--no-repo-tests",
        help="With --function: run the repo's tests on each candidate's edited file in the sandbox (a copy of "
        "the repo, no network), passing candidates ranked first.",
        rich_help_panel=TESTS,
    ),
]
RepairOpt = Annotated[
    int | None,
    configured(
        "--repair",
        help_text="With tests (the repo's for --function, --test, --tests, --test-cmd) and no candidate passing them: "
        f"up to N rounds where the model sees the failing test's output and tries again, {REPAIR_N} samples a "
        f"round, within {REPAIR_BUDGET_S:g} s; 0 turns it off. Default: generate.repair in the config, else "
        f"{DEFAULT_REPAIR}.",
        panel=TESTS,
    ),
]
PythonOpt = Annotated[
    Path | None,
    typer.Option(
        "--python",
        help="The interpreter with the project's dependencies, for its tests (default: the repo's .venv or "
        "venv, else the active virtualenv, else assist's own).",
        rich_help_panel=TESTS,
    ),
]
TemperatureOpt = Annotated[
    float | None,
    configured(
        help_text=f"Sampling temperature (0 = greedy, one candidate). Default: generate.temperature in the config, "
        f"else {DEFAULT_TEMPERATURE}.",
        panel=MODEL,
    ),
]
TopPOpt = Annotated[
    float | None,
    configured(
        help_text=f"Nucleus sampling threshold. Default: generate.top_p in the config, else {DEFAULT_TOP_P}.",
        panel=MODEL,
    ),
]
StubMaxTokensOpt = Annotated[
    int | None,
    typer.Option(
        help=f"Longest candidate, in tokens (default: generate.max_new_tokens, else {DEFAULT_MAX_NEW_TOKENS}; "
        "with --function sized to the docstring, and doubled once if every sample was cut off).",
        rich_help_panel=MODEL,
    ),
]
ApplyOpt = Annotated[
    bool,
    typer.Option(
        "--apply",
        help="Write the top candidate into --file (atomically). With tests, only a candidate that passed them is "
        "written; if none did, nothing is, and assist exits 1. Without tests, never one that reads a name or "
        "`self.x` defined nowhere in the file. Refuses a file that is untracked, outside a git repo or has "
        "unstaged changes (see --force).",
        rich_help_panel=BASICS,
    ),
]
ApplyForceOpt = Annotated[
    bool,
    typer.Option(
        "--force",
        help="With --apply: write the top candidate even when none passed the tests (or each reads a name defined "
        "nowhere), and write a file that is "
        "untracked, outside a git repo, has unstaged changes or other hard links, or is a symlink out of the repo.",
        rich_help_panel=BASICS,
    ),
]
ExplainOpt = Annotated[
    bool,
    typer.Option("--explain", help="Show why each demonstration was retrieved and each score.", rich_help_panel=OUTPUT),
]
# `generate` and `docstring` share it.
JsonOpt = Annotated[bool, typer.Option("--json", help="Print the result as JSON.", rich_help_panel=OUTPUT)]


@dataclass(frozen=True)
class GenerationFlags:
    """The generation options as typed, by `[generate]` setting name (None: not given, so the setting stands; or
    not an option of the command): one parameter of `generate` and `tui` (see :func:`generation_options`). Each
    field is annotated with its option, in the order a command's help lists them within each panel."""

    n: CandidatesOpt = None
    k: DemosOpt = None
    retriever: RetrieverOpt = None
    ranker: RankerOpt = None
    repair: RepairOpt = None
    temperature: TemperatureOpt = None
    top_p: TopPOpt = None
    max_new_tokens: MaxTokensOpt = None
    seed: SeedOpt = None
    apis: ApisOpt = None
    fragments: FragmentsOpt = None
    own_file: OwnFileOpt = None
    tests_in_prompt: TestsInPromptOpt = None
    redraw: RedrawOpt = None

    def overrides(self) -> dict[str, Any]:
        """The flags by setting name, as `GenerationOptions.from_settings` and its checks take them."""
        return asdict(self)


NO_GENERATION_FLAGS = GenerationFlags()  # a command's default: no generation option given


def generation_options(*names: str, **options: Any) -> Callable[[_Command], _Command]:
    """Decorate a command whose signature has one parameter of type GenerationFlags: Typer sees the options `names`
    (default: all) in its place, in GenerationFlags' order, and the command gets them as one GenerationFlags.
    `options` declares a field's option otherwise for this command (generate's --max-new-tokens speaks of stubs).

    Each option stands in its help panel, so the group's place in a signature is where it keeps every panel's order:
    after the command's own options that come before them in a panel, before those that come after."""
    return option_group(NO_GENERATION_FLAGS, names, options)


# `assist tui`'s and `assist index`'s own.
WorkPathArg = Annotated[
    Path, typer.Argument(help="Where to work: a git repo (default: where you stand).", show_default=False)
]
RepoFileOpt = Annotated[
    str | None,
    typer.Option(
        "--file", "-f", help="Target file, relative to the repo root (ctrl+f picks one).", rich_help_panel=BASICS
    ),
]
IndexPathArg = Annotated[
    Path, typer.Argument(help="A path inside the git repo to index (default: where you stand).", show_default=False)
]
IndexBankOpt = Annotated[
    Path | None, typer.Option("--bank", help="Index a JSONL bank of {requirement, code, tests} instead.")
]
StatsJsonOpt = Annotated[bool, typer.Option("--json", help="Print the statistics as JSON.")]
