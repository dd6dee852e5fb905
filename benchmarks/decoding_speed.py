"""Decode speed of the 1.5B model on the OpenVINO engine: plain, speculative (the 0.5B drafts) and prompt-lookup
decoding with int8 weights, plain decoding with int4 weights, and the 0.5B's plain speed for reference (what
`local.decoding = "auto"` and `local.weights = "auto"` rest on).

Two fixed prompts: a stub fill (a module's functions, then a stub whose body uses their names: prompt lookup's
best case) and a plain request. For each engine and prompt: a greedy one-row request and a sampled request of n
rows (as `assist generate` samples; each row is a one-row request of its own, see `assistant.backends.ov`). Each
prompt is read once before it is timed, so the figures are decoding (the prefix cache holds the prompt), except
speculative decoding's: on OpenVINO GenAI 2026.4 it runs without the prefix cache, so its figures include reading
the prompt (once a row). Prints a table of tokens/s (all rows together for n rows) and whether each greedy answer
equals the plain one. It asserts nothing. Run from the repo root, on an otherwise idle machine:

    .venv/bin/python benchmarks/decoding_speed.py [--tokens 96] [--n 5] [--json [OUT]]

`--model M` measures another generator the same way (speculative only where it has a draft model; the 0.5B's plain
speed as the reference unless M is the 0.5B).
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import argparse
import gc
import json
import time
from dataclasses import replace
from pathlib import Path

from assistant.backends import SamplingParams
from assistant.backends.models import DEFAULT_GENERATOR, FAST_GENERATOR
from assistant.backends.ov import DRAFT_MODELS, OpenVINOBackend
from assistant.backends.prompts import Prompt, build_prompt

MODULE = """import math
from dataclasses import dataclass


@dataclass
class Circle:
    radius: float


@dataclass
class Rectangle:
    width: float
    height: float


def circle_area(circle: Circle) -> float:
    return math.pi * circle.radius ** 2


def rectangle_area(rectangle: Rectangle) -> float:
    return rectangle.width * rectangle.height
"""
STUB_HEAD = '''def total_area(shapes: list[Circle | Rectangle]) -> float:
    """The summed area of `shapes`: circles by circle_area, rectangles by rectangle_area; raise TypeError for
    anything else."""
'''
REQUEST = "Write a function to find the shared elements from the given two lists."
JSON_HELP = "print the rows as JSON; given OUT, print as usual and write the rows, load and CPUs to OUT"


def engines(model: str) -> list[tuple[str, str, str]]:
    """(model, decoding, weights) measured for `model`: int8 plain, speculative where it has a draft model, prompt
    lookup, int4 plain, then the 0.5B's int8 plain speed for reference (for the 1.5B: plain, speculative,
    prompt-lookup, int4, 0.5B plain)."""
    decodings = ["plain", *(["speculative"] if model in DRAFT_MODELS else []), "prompt-lookup"]
    reference = [] if model == FAST_GENERATOR else [(FAST_GENERATOR, "plain", "int8")]
    return [(model, decoding, "int8") for decoding in decodings] + [(model, "plain", "int4")] + reference


def prompts() -> dict[str, Prompt]:
    """The stub fill (the answer prefilled with the stub's head, as `generate --function` does) and the request."""
    stub = build_prompt(
        "Write the body of total_area.", file_path="shapes.py", file_context=MODULE + "\n\n" + STUB_HEAD + "    ...\n"
    )
    stub = replace(stub, answer_prefix=stub.answer_prefix + "```python\n" + STUB_HEAD)
    return {"stub fill": stub, "request": build_prompt(REQUEST)}


def measure(backend: OpenVINOBackend, prompt: Prompt, params: SamplingParams) -> tuple[float, list[str]]:
    """Decode tokens/s of one request (the prompt read before, so the prefix cache holds it), and its texts."""
    backend.sample(prompt, replace(params, n=1, max_new_tokens=1))
    started = time.perf_counter()
    completions = backend.sample(prompt, params)
    seconds = time.perf_counter() - started
    return sum(c.tokens for c in completions) / seconds, [c.text for c in completions]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=96, help="most new tokens a row (default 96)")
    parser.add_argument("--n", type=int, default=5, help="rows of the sampled request (default 5)")
    parser.add_argument("--model", default=DEFAULT_GENERATOR, help="the generator (default: assist's default)")
    parser.add_argument("--json", nargs="?", const="-", metavar="OUT", help=JSON_HELP)
    args = parser.parse_args()
    greedy = SamplingParams(n=1, temperature=0, max_new_tokens=args.tokens)
    sampled = SamplingParams(n=args.n, temperature=0.8, top_p=0.95, max_new_tokens=args.tokens, seed=1)
    rows = []
    plain: dict[str, list[str]] = {}
    for model, decoding, weights in engines(args.model):
        backend = OpenVINOBackend.load(model, decoding=decoding, weights=weights)
        for name, prompt in prompts().items():
            speed, texts = measure(backend, prompt, greedy)
            if decoding == "plain" and weights == "int8" and model == args.model:
                plain[name] = texts
            many, _ = measure(backend, prompt, sampled)
            same = "" if model != args.model else ("yes" if texts == plain.get(name) else "no")
            rows.append({"model": model, "decoding": decoding, "weights": weights, "prompt": name, "greedy": speed,
                         "sampled": many, "same_greedy": same})  # fmt: skip
            print(json.dumps(rows[-1]) if args.json == "-" else _line(rows[-1], args.n), flush=True)
        del backend
        gc.collect()
    print(f"load: {os.getloadavg()[0]:.2f} (1-minute), {os.cpu_count()} CPUs")
    if args.json not in (None, "-"):
        from assistant.paths import atomic_write_text

        report = {"model": args.model, "tokens": args.tokens, "n": args.n, "rows": rows}
        report |= {"load_1min": round(os.getloadavg()[0], 2), "cpus": os.cpu_count()}
        atomic_write_text(Path(args.json), json.dumps(report, indent=1) + "\n")


def _line(row: dict, n: int) -> str:
    return (
        f"{row['model']:<20} {row['weights']} {row['decoding']:<14} {row['prompt']:<10} "
        f"greedy {row['greedy']:6.1f} tok/s   "
        f"sampled n={n} {row['sampled']:6.1f} tok/s   greedy text as plain: {row['same_greedy'] or '-'}"
    )


if __name__ == "__main__":
    main()
