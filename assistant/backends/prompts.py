"""Prompts: rendered from the templates in `prompts/`, as a chat that any backend can send or flatten."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

import jinja2

from assistant.code.examples import Example
from assistant.paths import data_path

ANSWER_PREFIX = "```python\n"
STOP = "```"


@dataclass(frozen=True)
class Prompt:
    """A chat prompt plus the start of the assistant's answer (the opening code fence)."""

    messages: tuple[dict[str, str], ...]
    answer_prefix: str = ANSWER_PREFIX
    stop: tuple[str, ...] = (STOP,)

    def to_json(self) -> dict:
        return {"messages": list(self.messages), "answer_prefix": self.answer_prefix}


@cache
def _environment() -> jinja2.Environment:
    # No auto_reload: a long run keeps the templates it started with, whatever is edited meanwhile.
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(data_path("prompts"))),
        auto_reload=False,
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=False,
        autoescape=False,
    )


def render(template: str, **variables: object) -> str:
    """Render one template from `prompts/` (e.g. `request.jinja`)."""
    return _environment().get_template(template).render(**variables).strip("\n")


@cache
def system_message() -> str:
    """The system message (`prompts/system.txt`)."""
    return data_path("prompts", "system.txt").read_text(encoding="utf-8").strip()


def build_prompt(
    requirement: str,
    demonstrations: Sequence[Example] = (),
    *,
    tests: Sequence[str] = (),
    file_path: str = "",
    file_context: str = "",
) -> Prompt:
    """The generation prompt. `demonstrations` must already be ordered least to most similar, so the most
    similar one sits right before the request (LAIL's ordering)."""
    messages: list[dict[str, str]] = [{"role": "system", "content": system_message()}]
    for demo in demonstrations:
        messages.append(
            {
                "role": "user",
                "content": render(
                    "request.jinja", requirement=demo.requirement, tests=list(demo.tests), file_path="", file_context=""
                ),
            }
        )
        messages.append({"role": "assistant", "content": render("answer.jinja", code=demo.code)})
    messages.append(
        {
            "role": "user",
            "content": render(
                "request.jinja",
                requirement=requirement,
                tests=list(tests),
                file_path=file_path,
                file_context=file_context,
            ),
        }
    )
    return Prompt(messages=tuple(messages))


def build_stub_prompt(
    qualname: str,
    head: str,
    context: str,
    demonstrations: Sequence[Example] = (),
    *,
    requirement: str = "",
    tests: Sequence[str] = (),
    file_path: str = "",
    prefill: bool = True,
    apis: str = "",
    fragments: Sequence[Example] = (),
    spec_tests: str = "",
) -> Prompt:
    """The prompt that fills a stub: demonstrations as usual, then the code around the stub (`context`) and the
    request to write its body (`stub_request.jinja`). `apis`: the project's definitions from other files that the
    stub's file uses, as outlines (:func:`assistant.core.usages.used_definitions`), shown before the file.
    `fragments`: retrieved 20-line fragments of the repository's other files, shown first, in the order given
    (as RepoCoder and RepoEval put retrieved code before the unfinished file). `spec_tests`: the repo's test
    functions that use the stub (:func:`assistant.core.spec_tests.spec_tests`), shown after its code.

    With `prefill`, the answer starts with the stub's own `head` (decorators, signature, docstring), so the
    model writes only the body and spends no tokens re-typing the docstring; without it (chat endpoints cannot
    end a message inside the answer), the model is asked for the whole function.
    """
    base = build_prompt("-", demonstrations)
    request = render(
        "stub_request.jinja",
        qualname=qualname,
        name=qualname.rsplit(".", 1)[-1],
        context=context,
        requirement=requirement,
        tests=list(tests),
        file_path=file_path,
        whole=not prefill,
        apis=apis,
        fragments=list(fragments),
        spec_tests=spec_tests,
    )
    messages = (*base.messages[:-1], {"role": "user", "content": request})
    prefix = ANSWER_PREFIX + head.rstrip("\n") + "\n" if prefill else ANSWER_PREFIX
    return Prompt(messages=messages, answer_prefix=prefix)


def build_line_prompt(file_path: str, before: str, fragments: Sequence[Example] = ()) -> Prompt:
    """The prompt that continues a file: retrieved `fragments` (20-line windows of the repository, shown in the
    order given) and the request (`line_request.jinja`); the answer is prefilled with the fence and `before`, the
    file's code up to the hidden lines, so the model's next tokens are the next lines."""
    messages = (
        {"role": "system", "content": system_message()},
        {"role": "user", "content": render("line_request.jinja", file_path=file_path, fragments=list(fragments))},
    )
    text = before if before.endswith("\n") or not before else before + "\n"
    return Prompt(messages=messages, answer_prefix=ANSWER_PREFIX + text)


def build_tests_prompt(requirement: str, signature: str, name: str, count: int = 8) -> Prompt:
    """The prompt that asks the model for `count` assert statements testing `name` (`tests_request.jinja`), for
    rankers that judge candidates by tests the model writes itself (`agree`).

    The answer starts with a comment and `assert name(` (CodeT's prompt ends the same way): without it a small
    model, seeing a signature, writes the function instead of its tests. A backend that prefills answers
    continues from there; the caller puts the prefix back before reading the asserts."""
    messages = (
        {"role": "system", "content": system_message()},
        {
            "role": "user",
            "content": render(
                "tests_request.jinja", requirement=requirement, signature=signature, name=name, count=count
            ),
        },
    )
    return Prompt(messages=messages, answer_prefix=f"{ANSWER_PREFIX}# Tests of {name}\nassert {name}(")


def build_review_prompt(code: str) -> Prompt:
    """The prompt under which the `reviewer` ranker scores the requirement given a candidate's `code`
    (`review_request.jinja`): the answer is the requirement, in plain words, so it has no code fence."""
    messages = (
        {"role": "system", "content": system_message()},
        {"role": "user", "content": render("review_request.jinja", code=code)},
    )
    return Prompt(messages=messages, answer_prefix="", stop=())
