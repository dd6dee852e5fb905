"""A generator's tokenizer and chat template without transformers: what the engines with weights of their own
(OpenVINO, CTranslate2) and token counting need, read from the same files.

`transformers` (with torch, which it imports) costs 5-6 s to import on 2 cores; a pre-commit hook or one
`assist generate` paid that only to render a chat template and count tokens. The `tokenizers` library (the Rust
tokenizer transformers itself runs) and jinja2 do both in milliseconds. Only the part of the transformers
tokenizer API those engines call is here, with the same results: `tests/test_tokenizer.py` compares every call
with `AutoTokenizer` on the registered models' files.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from assistant.errors import ModelError

# The special tokens a chat template may read by name, as transformers passes them.
SPECIAL_TOKENS = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token")


def _token_text(value: Any) -> str | None:
    """A special token as tokenizer_config.json holds it: a string or an AddedToken's dict."""
    if isinstance(value, Mapping):
        value = value.get("content")
    return value if isinstance(value, str) else None


@functools.cache
def _compile(template: str) -> Any:
    """The chat template compiled as transformers compiles it: a sandbox that cannot reach Python's internals,
    trimmed blocks, loop controls, and the same helpers (`raise_exception`, a `tojson` that keeps non-ASCII,
    `strftime_now`)."""
    import jinja2
    import jinja2.ext
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message: str) -> None:
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x: Any, ensure_ascii: bool = False, indent: Any = None, separators: Any = None, sort_keys: bool = False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    environment = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols]
    )
    environment.filters["tojson"] = tojson
    environment.globals["raise_exception"] = raise_exception
    environment.globals["strftime_now"] = lambda format: datetime.now().strftime(format)
    return environment.from_string(template)


# Qwen2's pre-tokenizing split, as transformers' Qwen2Tokenizer (models/qwen2/tokenization_qwen2.py) sets it.
QWEN2_SPLIT = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"""
    r""" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
)


def _as_qwen2(tokenizer: Any, add_prefix_space: bool) -> None:
    """Give a tokenizer read from a file the pipeline transformers 5 builds for `Qwen2Tokenizer` around the file's
    vocabulary and merges: NFC first (a file written from a GGUF has no normalizer, so "e" + a combining accent
    would otherwise split into two tokens where transformers gives one), the split above, byte-level."""
    from tokenizers import Regex, decoders, normalizers, pre_tokenizers

    tokenizer.normalizer = normalizers.NFC()
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN2_SPLIT), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=add_prefix_space, use_regex=False),
        ]
    )
    tokenizer.decoder = decoders.ByteLevel()


class ChatTokenizer:
    """A model folder's `tokenizer.json` and chat template, with the calls of transformers' tokenizer that the
    converted engines make: `tok(text, add_special_tokens=False)["input_ids"]` (and `offset_mapping`),
    `decode`, `convert_ids_to_tokens`, `apply_chat_template(..., tokenize=False)`, and the end and padding ids."""

    def __init__(self, directory: Path) -> None:
        from tokenizers import Tokenizer

        try:
            self._tokenizer = Tokenizer.from_file(str(directory / "tokenizer.json"))
            config = json.loads((directory / "tokenizer_config.json").read_text(encoding="utf-8"))
            template_file = directory / "chat_template.jinja"
            template = (
                template_file.read_text(encoding="utf-8") if template_file.exists() else config.get("chat_template")
            )
        except Exception as exc:  # a missing file, bad JSON, or the tokenizers library's own error
            raise ModelError(
                f"the tokenizer at {directory} could not be read: {str(exc).splitlines()[0][:200]}"
            ) from None
        if not isinstance(template, str):
            raise ModelError(f"the tokenizer at {directory} has no chat template")
        kind = config.get("tokenizer_class", "PreTrainedTokenizerFast")
        if kind == "Qwen2Tokenizer":
            _as_qwen2(self._tokenizer, bool(config.get("add_prefix_space")))
        elif kind not in ("PreTrainedTokenizerFast", "TokenizersBackend"):
            # transformers 5 rebuilds a named class's pipeline in code (as _as_qwen2 copies Qwen2's), so the file
            # alone may tokenize otherwise: refused rather than guessed.
            raise ModelError(f"the tokenizer at {directory} is a {kind}, which ChatTokenizer does not reproduce")
        self.chat_template = template
        self.special_tokens = {name: _token_text(config.get(name)) for name in SPECIAL_TOKENS}
        self.special_tokens = {name: text for name, text in self.special_tokens.items() if text is not None}
        if "pad_token" not in self.special_tokens and "eos_token" in self.special_tokens:
            self.special_tokens["pad_token"] = self.special_tokens["eos_token"]  # as the engines set it

    @property
    def eos_token(self) -> str | None:
        return self.special_tokens.get("eos_token")

    @property
    def pad_token(self) -> str | None:
        return self.special_tokens.get("pad_token")

    @pad_token.setter
    def pad_token(self, token: str) -> None:  # as transformers' tokenizers take one
        self.special_tokens["pad_token"] = token

    @property
    def eos_token_id(self) -> int | None:
        return self._id(self.eos_token)

    @property
    def pad_token_id(self) -> int | None:
        return self._id(self.pad_token)

    def _id(self, token: str | None) -> int | None:
        return None if token is None else self._tokenizer.token_to_id(token)

    def __call__(
        self, text: str, add_special_tokens: bool = True, return_offsets_mapping: bool = False
    ) -> dict[str, list]:
        encoding = self._tokenizer.encode(text, add_special_tokens=add_special_tokens)
        result: dict[str, list] = {"input_ids": list(encoding.ids)}
        if return_offsets_mapping:
            result["offset_mapping"] = [tuple(pair) for pair in encoding.offsets]
        return result

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = False) -> str:
        return self._tokenizer.decode(list(ids), skip_special_tokens=skip_special_tokens)

    def convert_ids_to_tokens(self, ids: Sequence[int]) -> list[str]:
        return [self._tokenizer.id_to_token(i) for i in ids]

    def apply_chat_template(
        self, messages: Sequence[Mapping[str, Any]], tokenize: bool = False, add_generation_prompt: bool = False
    ) -> str:
        """The conversation rendered by the model's template, as text (`tokenize=True` is not offered)."""
        if tokenize:
            raise ValueError("ChatTokenizer renders text only: encode the result with the tokenizer")
        return _compile(self.chat_template).render(
            messages=[dict(message) for message in messages],
            tools=None,
            documents=None,
            add_generation_prompt=add_generation_prompt,
            **self.special_tokens,
        )
