"""A stand-in for a generator's model and tokenizer where a test needs the real architecture but not its weights:
SelfRACG's information-need branch (tests/test_selfracg.py, tests/test_method_contract.py)."""

from __future__ import annotations

from typing import Any

import torch


class ByteTokenizer:
    """Bytes as token ids (a unit-test stand-in for the model's tokenizer: the branch only needs ids)."""

    pad_token_id = None
    eos_token_id = 0

    def __call__(self, text: str, add_special_tokens: bool = False) -> dict[str, list[int]]:
        return {"input_ids": [b + 1 for b in text.encode("utf-8")]}


def tiny_qwen2(**config: Any) -> Any:
    """A small random Qwen2 (the real architecture: 3 layers, 64 wide, ByteTokenizer's 260 ids), in eval mode, the
    same weights on every call; `config` overrides the Qwen2Config."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    shape = {
        "vocab_size": 260,
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 3,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "max_position_embeddings": 512,
    }
    qwen = Qwen2Config(**{**shape, **config})
    qwen._attn_implementation = "eager"
    return Qwen2ForCausalLM(qwen).eval()
