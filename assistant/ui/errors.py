"""The CLI's wording of the library's errors: a setting the library names, said as the flag the user typed.

The library refuses bad settings in its own words (:meth:`GenerationOptions.check`: "top_p must be above 0 ...",
"apis is for filling a stub ..."; :meth:`Request.resolve`: "a function to fill needs the target file ..."); the
command line says the same with its flags ("--top-p must be ...", "--function needs --file ..."). That
translation lives here, in one function, keyed by the error's `setting`.
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
    "python:missing": "--python {python} does not exist",
    "test_cmd+repo_tests": "--test-cmd names the tests that --no-repo-tests turns off; give one or the other",
}
NEEDS_STUB = "{} is for filling a stub: give --function too"  # a stub-only setting given without --function


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
    return exc


@contextmanager
def flag_errors(values: Mapping[str, Any]) -> Iterator[None]:
    """Around a library call made with the flags `values` (by setting name; None: not given): its UsageErrors
    said with the flags' names (:func:`as_flags`)."""
    try:
        yield
    except UsageError as exc:
        raise as_flags(exc, values) from None
