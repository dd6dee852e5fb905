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

from assistant.backends.openai_api import CHAT_CANNOT_SCORE
from assistant.errors import AssistError, UsageError
from assistant.pipeline.options import STUB_ONLY, SettingError

# How a person asks for each trained method by name (`auto` leaves every one out until it earns its place):
# what `assist doctor` and the training commands tell them.
ASKED_BY = {
    "lail": "--retriever lail",
    "tstr": "--retriever tstr",
    "selfracg": "--retriever selfracg",
    "condor": "--ranker agree+condor",
    "jointcom": 'docstring.exemplars = "jointcom" in the config',
}

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
    "repair+tests": "--repair reruns tests on a new candidate: give --test or --tests (or --function, whose repo's "
    "tests run)",
}
NEEDS_STUB = "{} is for filling a stub: give --function too"  # a stub-only setting given without --function
# A refusal that may come from anywhere under a command (applying an edit, planning the repo's tests, installing
# the hook), as the command line says it (the error's `setting`); {name}: the error's `values`.
LINES = {
    "python:missing": "--python {python} does not exist",
    "python:not_executable": "--python {python} is not an executable file",
    "function:missing_file": "{name} does not exist; --function fills a stub in an existing file",
    "function:no_repo": "--function {name} without --file looks for the stub in the git repo you stand in, and this "
    "is none: give --file",
    "function:ambiguous": "{name!r} is a stub in {count} files of {root} ({files}): give --file",
    "function:nowhere": "no Python file of {root} has a stub {name!r} (a body of ..., pass or raise "
    "NotImplementedError){bodies}: give --file",
    "fragments:no_index": "--fragments retrieves the repository's code fragments: run `assist index` in the repo first",
    "apis:no_index": "--apis shows functions from the repository's index: run `assist index` in the repo first",
    "precision:engine": "--precision is a transformers setting; the {engine} engine runs quantized weights",
    "test_cmd:invalid": "--test-cmd is not a valid command line: {error}",
    "test_cmd:not_pytest": "--test-cmd runs pytest only, not {shown!r}; e.g. --test-cmd 'pytest tests/test_util.py'",
    "test_cmd:shell": "--test-cmd is one pytest command; {operator!r} is shell, which is not run",
    "test_cmd:not_copied": "--test-cmd names {path}, which {why}",
    "test_cmd:unwalled": "{why}, so a clone's conftest.py would run as you; --test-cmd runs them anyway",
    "repo_tests:no_run": "the repo's tests do not run with {python} ({reason}); give --python, the interpreter "
    "with the project's dependencies (or --no-repo-tests)",
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
    "task:function_only": "{suffix} {what}: it is for --task function only",
    "embedder:no_model": "name the embeddings model: --embedder openai:<model>",
    "device:no_cuda": "--device cuda: torch {torch} sees no CUDA GPU here; use --device cpu",
    "engine:not_served": "the {backend} backend cannot be served; use --engine openvino",
    "port:taken": "cannot listen on 127.0.0.1:{port} ({error}); choose another --port",
    "api:choice": "--api must be chat or completions, not {api!r}",
    # A flag's value that its setting refuses (config.load_settings): {why} says what it expects.
    "backend:given": "--backend {value!r}: {why}",
    "model:given": "--model {value!r}: {why}",
    "openai.base_url:given": "--base-url {value!r}: {why}",
    "openai.api:given": "--api {value!r}: {why}",
    "openai.timeout:given": "--timeout {value!r}: {why}",
    "local.engine:given": "--engine {value!r}: {why}",
    "base_url:missing": "{what} needs --base-url (e.g. http://127.0.0.1:8080/v1, which `assist serve --port 8080` "
    "starts) or OPENAI_API_KEY for api.openai.com",
    "model:unlisted": "{url} does not list its models; name one with --model",
    "model:several": "{url} serves {count} models; choose one with --model ({names})",
    "model:not_found": "{url} {what} (404: {message}); check --model and --base-url (usually …/v1)",
    "timeout:expired": "{url} did not answer within {timeout:g} s ({retries} retries); raise --timeout or check the "
    "server",
    "k:local_context": "the prompt takes {used} tokens and {new_tokens} more are asked for, but the limit is a context "
    "of {context}{limit}; shorten the requirement, use fewer demonstrations (-k) or a smaller target file",
    "k:server_context": "the prompt takes {used} tokens and {new_tokens} more are asked for, but {model} at {url} has "
    "a context of {context}; use fewer demonstrations (-k) or a smaller file",
    "k:server_estimate": "the prompt is about {used} tokens (estimated) plus {new_tokens} new, over the server's "
    "context of {context}: some servers cut it silently; use fewer demonstrations (-k)",
    "k:server_too_long": "{url} says the input is too long: {text}; use fewer demonstrations (-k)",
    "n:cache": "the OpenVINO engine could not hold this request in its {cache_gb} GB attention cache; ask for fewer "
    "candidates (-n), fewer tokens (--max-new-tokens) or a shorter prompt",
}
# A reason the library states inside other messages (a backend's `scoring_unavailable`, which the rankers'
# refusals and training's quote), as the command line says it: replaced wherever it appears in a message.
PHRASES = {
    CHAT_CANNOT_SCORE: "chat endpoints cannot score given text; use --api completions with a server that echoes "
    "prompt log-probabilities (vLLM, OpenAI's legacy completions)",
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


def said_line(message: str, setting: str | None, values: Mapping[str, Any]) -> str:
    """The command line's wording of a library message about `setting` (:data:`LINES`, filled in from `values`),
    with the phrases it quotes said the same way (:data:`PHRASES`); `message` itself when neither applies."""
    line = message
    if setting in LINES:
        try:
            line = LINES[setting].format(**values)
        except (KeyError, IndexError, ValueError):  # values from another version (a warm server): say it as it came
            line = message
    for library, cli in PHRASES.items():
        line = line.replace(library, cli)
    return line


def said_with_flags(exc: BaseException) -> BaseException:
    """A library error (an AssistError) whose `setting` is one of :data:`LINES`, or that quotes one of
    :data:`PHRASES`, said as the command line says it: the same kind of error (its exit code, its attributes)
    with that message and no setting left to word. Any other error as it is. What `friendly_errors` prints,
    whatever the command."""
    if not isinstance(exc, AssistError):
        return exc
    line = said_line(str(exc), exc.setting, exc.values)
    if line == str(exc):
        return exc
    said = type(exc).__new__(type(exc))  # not its __init__, whose arguments differ by kind (ConversionFailed)
    said.__dict__.update(vars(exc), setting=None, values={})
    said.args = (line,)
    return said


@contextmanager
def flag_errors(values: Mapping[str, Any]) -> Iterator[None]:
    """Around a library call made with the flags `values` (by setting name; None: not given): its UsageErrors
    said with the flags' names (:func:`as_flags`)."""
    try:
        yield
    except UsageError as exc:
        raise as_flags(exc, values) from None
