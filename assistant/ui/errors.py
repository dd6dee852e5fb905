"""The CLI's wording of the library's errors: a setting the library names, said as the flag the user typed.

The library refuses bad settings in its own words (:meth:`GenerationOptions.check`: "top_p must be above 0 ...",
"apis is for filling a stub ..."; :meth:`Request.resolve`: "a function to fill needs the target file ..."); the
command line says the same with its flags ("--top-p must be ...", "--function needs --file ..."). That
translation lives here, keyed by the error's `setting`: :func:`as_flags` around the checks of what was typed,
:func:`said_with_flags` for a refusal from deeper down (applying an edit, planning the repo's tests), which every
command's error printer (`friendly_errors`) says with the flags.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from assistant.errors import UsageError
from assistant.pipeline.options import STUB_ONLY, SettingError

# A generation setting's flag on `assist generate` / `assist tui`.
FLAGS = {
    "n": "-n",
    "k": "-k",
    "max_new_tokens": "--max-new-tokens",
    "seed": "--seed",
    "temperature": "--temperature",
    "top_p": "--top-p",
    "repair": "--repair",
    "apis": "--apis",
    "redraw": "--redraw",
    "fragments": "--fragments",
    "own_file": "--own-file",
    "tests_in_prompt": "--tests-in-prompt",
}
# A refused combination (the error's `setting`), as the command line says it: the generation settings'
# (GenerationOptions.check) and the request's (Request.resolve); {python} is the flag's value.
COMBINATIONS = {
    "fragments+k": "--fragments shows -k retrieved fragments; -k 0 would show none",
    "fragments+bank": "--fragments retrieves the repository's code, not a bank's: drop --bank",
    "own_file+bank": "--own-file takes demonstrations from the repository's index, not a bank: drop --bank",
    "own_file+fragments": "--fragments shows fragments instead of demonstrations: --own-file would change nothing",
    "function": "--function needs --file, the file that holds the stub",
    "replace": "--replace needs --file, the file whose definitions it may replace",
    "replace+function": "--replace is for a requirement's new code; --function already names what is rewritten",
    "test_cmd": "--test-cmd needs --function (the repo's tests run on a filled stub)",
    "python": "--python names the interpreter the repo's tests run with: give --function too",
    "test_cmd+repo_tests": "--test-cmd names the tests that --no-repo-tests turns off; give one or the other",
}
NEEDS_STUB = "{} is for filling a stub: give --function too"  # a stub-only setting given without --function
# A refusal that may come from anywhere under a command (applying an edit, planning the repo's tests, installing
# the hook), as the command line says it (the error's `setting`); {name}: the error's `values`.
LINES = {
    "python:missing": "--python {python} does not exist",
    "python:not_executable": "--python {python} is not an executable file",
    "function:missing_file": "{name} does not exist; --function fills a stub in an existing file",
    "fragments:no_index": "--fragments retrieves the repository's code fragments: run `assist index` in the repo first",
    "apis:no_index": "--apis shows functions from the repository's index: run `assist index` in the repo first",
    "precision:engine": "--precision is a transformers setting; the {engine} engine runs int8",
    "test_cmd:invalid": "--test-cmd is not a valid command line: {error}",
    "test_cmd:not_pytest": "--test-cmd runs pytest only, not {shown!r}; e.g. --test-cmd 'pytest tests/test_util.py'",
    "test_cmd:shell": "--test-cmd is one pytest command; {operator!r} is shell, which is not run",
    "test_cmd:not_copied": "--test-cmd names {path}, which {why}",
    "test_cmd:unwalled": "{why}, so a clone's conftest.py would run as you; --test-cmd runs them anyway",
    "repo_tests:not_git": "{root} is not a git work tree; the repo's tests run only in one (or --no-repo-tests)",
    "ranker:logprob": "the logprob ranker is unavailable: {model} returned no log-probabilities and {why}; "
    "use --ranker first, or exec with --test",
    "ranker:reviewer": "the reviewer rankers are unavailable with {model}: {why}; use --ranker agree, or logprob",
    "force:not_in_git": "refusing to modify {path}: {reason} (pass --force to write it anyway)",
    "force:untracked": "refusing to modify {path}: {reason} (git add it first, or pass --force)",
    "force:unsaved": "refusing to modify {path}: {reason} (commit or stash, or pass --force)",
    "force:symlink": "{path} is a symlink to {target}, outside the repo; not written "
    "(pass --force to write through it)",
    "force:hard_links": "{path} has {links} hard links and a rewrite would detach it from the others; not written "
    "(pass --force to rewrite it in place)",
    "force:shared_hooks": "{folder} is a hooks folder outside this repository (core.hooksPath), so other "
    "repositories run it too; pass --force to install there anyway",
    "force:hook_link": "{path} is a link (to {target}); remove it, or pass --force to replace the link",
    "force:foreign_hook": "{path} exists and was not written by assist; move it away (or pass --force to replace it)",
    "trust:override": "{refusal}, or override it with --backend/--base-url/--model or the environment",
    "k:negative": "-k must be 0 or more",
    "n:below_one": "-n must be at least 1",
    "dataset:mbpp_missing": "MBPP file {path} not found (pass --dataset mbpp:PATH, e.g. mbpp:{default})",
    "limit:range": "--limit must be at least 1, not {limit}",
    "holdout:empty": "the held-out part is empty: use more problems or a larger --holdout",
    "holdout:range": "--holdout must be at least 0 and below 1",
    "contrastive:frozen": "the generator backbone is frozen, so it has no contrastive stage: add --no-contrastive",
    "discriminator:none": "no trained discriminator: run `assist train discriminator` (in this repo, or with "
    "--from-bank mbpp)",
    "discriminator:no_data": "nothing to train on: give --from-bank or --from-eval, or run inside a git repo",
    "queries:range": "--queries must be 0 (every example) or more, not {queries}",
    "lail:counts": "--positives plus --soft-negatives must not exceed --candidates",
    "batch:pairs": "the {pool} has {pairs} pairs of consecutive fragments; a batch of {batch} needs at least as many "
    "(lower --batch)",
    "batch:synthetic": "the model continued {starts} fragments of the {pool} into {examples} long enough to learn "
    "from; a batch of {batch} needs as many (raise --synthetic, lower --batch, or train stage 1 only: --synthetic 0)",
}


def as_flags(exc: UsageError, values: Mapping[str, Any]) -> UsageError:
    """The CLI's line for a library UsageError that names its setting (`exc.setting`), said with flags: a number
    out of range by its flag when the user gave that flag (a config file's value keeps the setting's name: that
    is what to fix); a combination as the CLI has always said it. `values`: the flags given, by setting name
    (None: not given). Any other error stands as it is."""
    setting = getattr(exc, "setting", None)
    if isinstance(exc, SettingError) and exc.bounds:
        return UsageError(f"{FLAGS[exc.setting]} {exc.bounds}") if values.get(exc.setting) is not None else exc
    if setting in COMBINATIONS:
        return UsageError(COMBINATIONS[setting].format(**values))
    if setting in STUB_ONLY:
        return UsageError(NEEDS_STUB.format(FLAGS[setting]))
    return said_with_flags(exc)


def said_with_flags(exc: BaseException) -> BaseException:
    """A library UsageError whose `setting` is one of :data:`LINES`, said as the command line says it (filled in
    from the error's `values`); any other error as it is. What `friendly_errors` prints, whatever the command."""
    setting = getattr(exc, "setting", None)
    if not isinstance(exc, UsageError) or setting not in LINES:
        return exc
    return UsageError(LINES[setting].format(**exc.values))


@contextmanager
def flag_errors(values: Mapping[str, Any]) -> Iterator[None]:
    """Around a library call made with the flags `values` (by setting name; None: not given): its UsageErrors
    said with the flags' names (:func:`as_flags`)."""
    try:
        yield
    except UsageError as exc:
        raise as_flags(exc, values) from None
