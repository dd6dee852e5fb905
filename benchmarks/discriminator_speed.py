"""Scoring speed of the Condor discriminator on this machine: candidates per second.

Scores real programs (MBPP reference solutions with their problem statements) the way rankers do: one
problem's n candidates at a time (n = 5, what `assist generate` samples), and in large batches (what the
evaluation does). Uses the trained discriminator found from the working directory for `--generator` (the model
whose candidates it ranks, default: assist's) as `assist generate` finds it, or the folder --model DIR names; one
trained for other models only ends it with the product's one-line error (exit status 2); with none trained at
all, an untrained one of the same architecture (same speed), and says so. It asserts nothing. From the repo root:

    .venv/bin/python benchmarks/discriminator_speed.py [--model DIR | --generator MODEL] [--programs 200]
        [--threads N] [--json]
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import torch

from assistant.backends.models import DEFAULT_GENERATOR, resolve
from assistant.errors import UsageError
from assistant.evaluate import load_dataset
from assistant.methods.artifacts import NotTrainedFor
from assistant.methods.condor.data import PROBLEM_CHARS
from assistant.methods.condor.model import (
    Condor,
    CondorConfig,
    _Discriminator,
    _predict,
    backbone_dir,
    find_discriminator,
)


def trained_for(generator: str) -> Path | None:
    """The folder of the discriminator that serves `generator` from the working directory, as the product finds it
    (:func:`find_discriminator`); None when none is trained at all; where only other models' are, the product's
    one-line error naming both (:class:`NotTrainedFor`, raised by :meth:`Condor.locate`, which loads nothing then)."""
    directory = find_discriminator(None, generator)
    if directory is None:
        try:
            Condor.locate(None, generator)
        except NotTrainedFor:
            raise
        except UsageError:  # none trained at all: the untrained architecture is timed
            return None
    return directory


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, help="a trained discriminator folder (default: the one found)")
    parser.add_argument("--generator", default=DEFAULT_GENERATOR, help="the model it ranks for (default: assist's)")
    parser.add_argument("--programs", type=int, default=200, help="programs to score")
    parser.add_argument("--threads", type=int, default=os.cpu_count(), help="torch threads")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    try:
        directory = args.model or trained_for(resolve(args.generator).name)
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(exc.exit_code) from None
    torch.set_num_threads(args.threads)

    started = time.perf_counter()
    if directory is not None:
        condor = Condor.load(directory)
        model, config, which = condor.model, condor.config, str(directory)
    else:
        config = CondorConfig()
        model = _Discriminator(backbone_dir(config.backbone))
        model.train(False)
        which = f"untrained {config.backbone} (no discriminator trained; same architecture, same speed)"
    load_s = time.perf_counter() - started
    tasks = load_dataset("mbpp", "test")[: args.programs]
    texts = [(t.requirement[:PROBLEM_CHARS], t.reference) for t in tasks]
    _predict(model, texts[:8], config.max_length)  # warm-up

    rows = []
    for label, size in (("per problem, n=5", 5), ("batched, 64", 64)):
        started = time.perf_counter()
        for start in range(0, len(texts), size):
            _predict(model, texts[start : start + size], config.max_length, batch=size)
        seconds = time.perf_counter() - started
        rows.append({"mode": label, "programs": len(texts), "seconds": round(seconds, 2),
                     "per_second": round(len(texts) / seconds, 1)})  # fmt: skip
    result = {
        "model": which,
        "load_s": round(load_s, 2),
        "cpu": platform.processor() or platform.machine(),
        "threads": args.threads,
        "torch": torch.__version__,
        "rows": rows,
    }
    if args.json:
        print(json.dumps(result))
        return
    print(f"{which}; load {load_s:.2f} s; {args.threads} threads, torch {torch.__version__}")
    print(f"{'mode':<20}{'programs':>10}{'seconds':>10}{'candidates/s':>14}")
    for row in rows:
        print(f"{row['mode']:<20}{row['programs']:>10}{row['seconds']:>10}{row['per_second']:>14}")


if __name__ == "__main__":
    main()
