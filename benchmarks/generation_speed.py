"""Generation speed of the local backend, and of the same model through llama.cpp when it is installed.

Prints, for a fixed prompt (an MBPP-style request with the chat template), the prefill time and the
decode throughput in tokens/second for 1 sequence and for n sequences sampled in one batched call (the
way `assist generate` samples). Every sequence is forced to the same length so the figures compare.
If `llama-cpp-python` is installed, the same GGUF file is run through llama.cpp for comparison; if not,
that part is skipped with a message. It asserts nothing. Run from the repo root:

    .venv/bin/python benchmarks/generation_speed.py [--tokens 64] [--n 5] [--model qwen2.5-coder-0.5b] [--json]
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import argparse
import json
import platform
import tempfile
import time
from pathlib import Path

import torch

from assistant.backends.local import LocalBackend
from assistant.backends.models import assemble_gguf, resolve
from assistant.backends.prompts import build_prompt

REQUIREMENT = "Write a function to find the shared elements from the given two lists."
TESTS = ["assert set(similar_elements((3, 4, 5, 6), (5, 7, 4, 10))) == set((4, 5))"]


def time_local(backend: LocalBackend, rows: int, tokens: int) -> dict:
    """Prefill once, then decode `tokens` tokens for `rows` sequences in one batched generate call."""
    from transformers import DynamicCache

    ids = backend.tokenizer(backend.render(build_prompt(REQUIREMENT, tests=TESTS)), return_tensors="pt")["input_ids"]
    torch.manual_seed(0)
    with torch.inference_mode():
        started = time.perf_counter()
        cache = DynamicCache(config=backend.lm.config)
        backend.lm(input_ids=ids[:, :-1], past_key_values=cache, use_cache=True)
        prefill = time.perf_counter() - started
        cache.batch_repeat_interleave(rows)
        started = time.perf_counter()
        backend.lm.generate(
            input_ids=ids.repeat(rows, 1),
            attention_mask=torch.ones((rows, ids.shape[1]), dtype=torch.long),
            past_key_values=cache,
            do_sample=True,
            temperature=0.8,
            top_p=0.95,
            max_new_tokens=tokens,
            min_new_tokens=tokens,
            pad_token_id=backend.tokenizer.pad_token_id,
        )
        decode = time.perf_counter() - started
    return {
        "backend": "transformers (fp32)",
        "sequences": rows,
        "prompt_tokens": int(ids.shape[1]),
        "prefill_s": round(prefill, 2),
        "decode_s": round(decode, 2),
        "tokens_per_s_per_sequence": round(tokens / decode, 2),
        "tokens_per_s_total": round(rows * tokens / decode, 2),
    }


REQUIREMENTS = [
    REQUIREMENT,
    "Write a python function to count the number of vowels in a string.",
    "Write a function to find the second smallest number in a list.",
    "Write a function to check whether a string is a palindrome, ignoring case and spaces.",
]


def time_backend(backend: LocalBackend, tasks: int, n: int, max_tokens: int) -> dict:
    """The backend's own sampling as `eval codegen --batch` uses it: `tasks` prompts × n rows in one batch,
    each row stopping at its closing fence (finished rows leave the batch)."""
    from assistant.backends import SamplingParams

    prompts = [build_prompt(r) for r in REQUIREMENTS[:tasks]]
    started = time.perf_counter()
    groups = backend.sample_batch(prompts, SamplingParams(n=n, max_new_tokens=max_tokens, seed=0))
    seconds = time.perf_counter() - started
    produced = sum(c.tokens for group in groups for c in group)
    return {
        "backend": f"assist sample_batch, {tasks} task(s) x n={n}",
        "tasks": tasks,
        "sequences": tasks * n,
        "tokens": produced,
        "seconds": round(seconds, 2),
        "tokens_per_s_total": round(produced / seconds, 2),
        "seconds_per_task": round(seconds / tasks, 2),
    }


def time_llama_cpp(model: str, tokens: int, rows: int) -> list[dict] | str:
    """The same model through llama.cpp (sequential requests, as its server serves them), or why not."""
    try:
        from llama_cpp import Llama
    except ImportError:
        return (
            "skipped: llama-cpp-python is not installed "
            "(pip install llama-cpp-python; it builds from source: most of an hour on 2 cores)"
        )
    spec = resolve(model)
    with tempfile.TemporaryDirectory() as folder:
        gguf = Path(folder) / "model.gguf"
        assemble_gguf(spec, gguf)
        llm = Llama(model_path=str(gguf), n_ctx=2048, n_threads=os.cpu_count() or 1, verbose=False, seed=0)
        prompt = f"<|im_start|>user\n{REQUIREMENT}\n{TESTS[0]}<|im_end|>\n<|im_start|>assistant\n```python\n"
        results = []
        for count in sorted({1, rows}):
            started = time.perf_counter()
            produced = 0
            for _ in range(count):
                output = llm(prompt, max_tokens=tokens, temperature=0.8, top_p=0.95, stop=[])
                produced += output["usage"]["completion_tokens"]
            elapsed = time.perf_counter() - started
            results.append(
                {
                    "backend": "llama.cpp",
                    "sequences": count,
                    "seconds": round(elapsed, 2),
                    "tokens_per_s_total": round(produced / elapsed, 2),
                }
            )
        return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=64, help="tokens to decode per sequence")
    parser.add_argument("--n", type=int, default=5, help="sequences in the batched run")
    parser.add_argument("--model", default="qwen2.5-coder-0.5b")
    parser.add_argument("--tasks", type=int, default=4, help="prompts batched together in the sample_batch run")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()

    started = time.perf_counter()
    backend = LocalBackend.load(args.model)
    load_s = time.perf_counter() - started
    time_local(backend, 1, 4)  # warm-up: first calls allocate
    rows = [time_local(backend, 1, args.tokens), time_local(backend, args.n, args.tokens)]
    sampled = [time_backend(backend, 1, args.n, 384), time_backend(backend, min(args.tasks, 4), args.n, 384)]
    llama = time_llama_cpp(args.model, args.tokens, args.n)
    result = {
        "machine": {
            "cpus": os.cpu_count(),
            "torch_threads": torch.get_num_threads(),
            "python": platform.python_version(),
            "torch": torch.__version__,
        },
        "model": args.model,
        "load_s": round(load_s, 2),
        "local": rows,
        "sample_batch": sampled,
        "llama_cpp": llama,
    }
    if args.json:
        print(json.dumps(result, indent=1))
        return
    machine = result["machine"]
    print(
        f"{args.model}, {machine['cpus']} CPUs, torch {machine['torch']} ({machine['torch_threads']} threads), "
        f"load {result['load_s']} s, {args.tokens} new tokens per sequence"
    )
    print(
        f"{'backend':<22}{'seqs':>5}{'prompt':>8}{'prefill s':>11}{'decode s':>10}{'tok/s/seq':>11}{'tok/s total':>13}"
    )
    for row in rows:
        print(
            f"{row['backend']:<22}{row['sequences']:>5}{row['prompt_tokens']:>8}{row['prefill_s']:>11}"
            f"{row['decode_s']:>10}{row['tokens_per_s_per_sequence']:>11}{row['tokens_per_s_total']:>13}"
        )
    print("\nReal sampling (rows stop at their closing fence; max 384 tokens):")
    for row in sampled:
        print(
            f"  {row['backend']:<40} {row['tokens']:>5} tokens in {row['seconds']:>6} s: "
            f"{row['tokens_per_s_total']:>6} tok/s total, {row['seconds_per_task']:>6} s per task"
        )
    if isinstance(llama, str):
        print(f"llama.cpp: {llama}")
    else:
        for row in llama:
            print(
                f"{row['backend']:<22}{row['sequences']:>5}{'':>8}{'':>11}{row['seconds']:>10}{'':>11}"
                f"{row['tokens_per_s_total']:>13}"
            )


if __name__ == "__main__":
    main()
