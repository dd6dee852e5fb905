"""How much LAIL's labels leave for a retriever to win, and how much of it a trained encoder recovers.

LAIL's labels (`assist train retriever --method lail`) score, for every pool example i, its t BM25
candidates S_i by the LLM's mean log-probability of i's code with that candidate as the demonstration. Those
scores say, without another LLM call, what choosing well *within* S_i is worth:

- oracle: the best candidate's score (the most any retriever restricted to S_i could get);
- mean: a candidate picked at random from S_i; worst: the lowest-scored;
- bm25: BM25's first candidate (S_i is BM25's top t, in order);
- dense: the frozen encoder's first (all-MiniLM-L6-v2 cosine);
- lail (in-sample): the first of the trained LAIL artifact's encoder, which trained on these very labels;
- lail (k-fold): held-out: the encoder is retrained k times (same config as the artifact, or as overridden
  on the command line) on the other folds' labels only, and picks for the examples it never saw.

For each it prints the mean label score of the chosen candidate over the pool and the share of the
bm25→oracle gap it closes, and Spearman's rank correlation between its scores and the labels within S_i;
then each lail row minus dense and minus bm25, paired by example, with a 95% bootstrap interval.
Selection inside S_i is a proxy: at generation time the retriever searches the whole pool (unlabeled
pairs), and puts k demonstrations in the prompt, not one.

It measures the artifact trained for `--model` (default: assist's), found as `assist generate` finds it
(`assistant.pipeline.registry.trained_folder`): one trained for other models only ends it with the product's
one-line error (exit status 2). It prints figures and asserts nothing. Run from the repo root once the artifact
exists (`assist train retriever lail --bank mbpp:../shared/data/mbpp.jsonl`):

    .venv/bin/python benchmarks/lail_headroom.py                   # in-sample only: seconds
    .venv/bin/python benchmarks/lail_headroom.py --folds 5         # + 5-fold held-out (about 2 min per fold)
    .venv/bin/python benchmarks/lail_headroom.py --folds 5 --temperature 0.1 --epochs 2   # a variant
    .venv/bin/python benchmarks/lail_headroom.py --folds 5 --loss listwise                 # every label teaches
    .venv/bin/python benchmarks/lail_headroom.py --model qwen2.5-coder-0.5b                # the 0.5B's labels
"""

from __future__ import annotations

import os

os.environ["HF_HUB_OFFLINE"] = "1"  # before transformers is imported: no hub

import argparse
import dataclasses
import json
import random
import sys
import time
from collections.abc import Callable, Sequence

import numpy as np

from assistant.backends.encoder import MAX_TOKENS, Encoder, embed_texts
from assistant.backends.models import DEFAULT_GENERATOR, encoder_dir, resolve
from assistant.cache import JsonlCache
from assistant.datasets import MBPP_DEFAULT_PATH
from assistant.errors import UsageError
from assistant.evaluate import bootstrap_ci, load_pool
from assistant.indexing.index import Index, embedding_text
from assistant.methods.artifacts import artifact_dir, read_manifest
from assistant.methods.lail import LOSSES, LailConfig, candidate_sets, label_pool, train_encoder
from assistant.pipeline.registry import trained_folder

Labels = list[list[tuple[int, float]]]
Scorer = Callable[[int, Sequence[int]], np.ndarray]  # (example row, candidate rows) -> scores


class CachedOnly:
    """A labeler that only has the cache: every label must already be there."""

    name = "local"

    def __init__(self, model: str) -> None:
        self.model = model

    def logprob(self, pairs):
        raise SystemExit(f"{len(pairs)} labels are not in the cache; train the LAIL artifact first")


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    ra, rb = np.argsort(np.argsort(a)), np.argsort(np.argsort(b))
    if ra.std() == 0 or rb.std() == 0:
        return 0.0
    return float(np.corrcoef(ra, rb)[0, 1])


def model_scorer(model, tokenizer, texts: Sequence[str]) -> Scorer:
    """Cosine under a (trained) torch encoder, every text embedded once."""
    import torch

    with torch.inference_mode():
        vectors = torch.cat(
            [embed_texts(model, tokenizer, texts[s : s + 64], MAX_TOKENS) for s in range(0, len(texts), 64)]
        )
    matrix = vectors.numpy()
    return lambda i, rows: matrix[list(rows)] @ matrix[i]


def judge(labels: Labels, bm25_order: list[list[int]], scorer: Scorer | None, rows: Sequence[int]) -> dict:
    """Per example of `rows`: the label of the candidate chosen, and Spearman(scores, labels) within S_i."""
    picks, rhos = {}, {}
    for i in rows:
        by_row = dict(labels[i])
        order = bm25_order[i]
        truth = np.array([by_row[q] for q in order])
        # scorer None: BM25's own order (S_i is BM25's top t, best first).
        scores = -np.arange(len(order), dtype=float) if scorer is None else scorer(i, order)
        picks[i] = float(truth[int(np.argmax(scores))])
        rhos[i] = spearman(scores, truth)
    return {"picks": picks, "rhos": rhos}


def summary(verdict: dict) -> dict[str, float]:
    return {
        "chosen": float(np.mean(list(verdict["picks"].values()))),
        "spearman": float(np.mean(list(verdict["rhos"].values()))),
    }


def bounds(labels: Labels, rows: Sequence[int]) -> dict[str, float]:
    return {
        "oracle": float(np.mean([labels[i][0][1] for i in rows])),
        "mean": float(np.mean([np.mean([s for _, s in labels[i]]) for i in rows])),
        "worst": float(np.mean([labels[i][-1][1] for i in rows])),
    }


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command line: the pool, the model, the held-out folds and their config's overrides."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--pool",
        default=f"mbpp:{MBPP_DEFAULT_PATH}",
        help="the pool LAIL trained on, as `assist eval --pool` takes it",
    )
    parser.add_argument(
        "--model", default=DEFAULT_GENERATOR, help="the model whose labels trained it (default: assist's)"
    )
    parser.add_argument("--folds", type=int, default=0, help="held-out folds to retrain (0: in-sample only)")
    for name in ("epochs", "hard_negatives", "positives", "soft_negatives", "batch"):
        parser.add_argument(f"--{name.replace('_', '-')}", type=int)
    for name in ("temperature", "lr", "label_temperature"):
        parser.add_argument(f"--{name.replace('_', '-')}", type=float)
    parser.add_argument("--loss", choices=LOSSES, help="the held-out folds' training loss (see LailConfig)")
    parser.add_argument("--json", action="store_true")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    encoder = Encoder.load()
    index: Index = load_pool(args.pool, encoder).index
    try:  # the artifact trained for the model, as `assist generate` finds it; another model's only is refused
        directory = trained_folder("lail", index, resolve(args.model).name)
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    manifest = read_manifest(directory) if directory is not None else None
    if directory is None or manifest is None:
        print(f"no LAIL artifact for this pool in {artifact_dir(index, 'lail')}; train it first", file=sys.stderr)
        return 2
    artifact_config = LailConfig(**manifest["config"])
    overrides = {k: v for k, v in vars(args).items() if k in {f.name for f in dataclasses.fields(LailConfig)}}
    config = dataclasses.replace(artifact_config, **{k: v for k, v in overrides.items() if v is not None})
    labels = label_pool(index, CachedOnly(manifest["labeler"]["model"]), config, JsonlCache(directory / "labels.jsonl"))
    order = candidate_sets(index, config.candidates)
    rows = list(range(len(index)))
    texts = [embedding_text(e) for e in index.examples]
    vectors = encoder.encode(texts)
    results: dict = {
        "pool": manifest["pool"],
        "labeler": manifest["labeler"]["model"],
        "config": dataclasses.asdict(config),
    }
    results["bounds"] = bounds(labels, rows)
    results["bm25"] = judge(labels, order, None, rows)
    results["dense"] = judge(labels, order, lambda i, r: vectors[list(r)] @ vectors[i], rows)

    from transformers import AutoModel, AutoTokenizer

    trained = directory / "encoder"
    model, tokenizer = AutoModel.from_pretrained(str(trained)), AutoTokenizer.from_pretrained(str(trained))
    model.eval()
    results["lail (in-sample)"] = judge(labels, order, model_scorer(model, tokenizer, texts), rows)

    if args.folds > 1:
        shuffled = rows[:]
        random.Random(0).shuffle(shuffled)
        held_out: dict = {"picks": {}, "rhos": {}}
        started = time.perf_counter()
        for fold in range(args.folds):
            held = shuffled[fold :: args.folds]
            held_set = set(held)
            train_labels = [[] if i in held_set else labels[i] for i in rows]
            model, tokenizer, _ = train_encoder(
                index.examples, train_labels, encoder_dir(resolve(None, "encoder")), config
            )
            verdict = judge(labels, order, model_scorer(model, tokenizer, texts), held)
            for part in ("picks", "rhos"):
                held_out[part].update(verdict[part])
            print(
                f"fold {fold + 1}/{args.folds}: {summary(verdict)} ({time.perf_counter() - started:.0f} s)",
                file=sys.stderr,
            )
        results[f"lail ({args.folds}-fold held-out)"] = held_out

    selectors = {name: value for name, value in results.items() if isinstance(value, dict) and "picks" in value}
    means = {name: summary(value) for name, value in selectors.items()}
    # Paired by example, as `assist eval report --versus` pairs by task: a 95% bootstrap interval.
    paired = {
        f"{name} - {base}": bootstrap_ci([value["picks"][i] - selectors[base]["picks"][i] for i in value["picks"]])
        for name, value in selectors.items()
        if name.startswith("lail")
        for base in ("dense", "bm25")
    }
    if args.json:
        print(
            json.dumps(
                {**{k: v for k, v in results.items() if k not in selectors}, "selectors": means, "paired": paired}
            )
        )
        return 0
    print_report(results, means, paired, config, artifact_config)
    return 0


def print_report(
    results: dict, means: dict[str, dict[str, float]], paired: dict, config: LailConfig, artifact_config: LailConfig
) -> None:
    """The figures as a table: each choice's mean label and share of the bm25-to-oracle gap, then the paired
    differences."""
    b = results["bounds"]
    gap = b["oracle"] - means["bm25"]["chosen"]
    print(f"pool: {results['pool']}; labels by {results['labeler']}; t={config.candidates}")
    # The in-sample row is the artifact as trained; overrides change only the held-out folds.
    print(f"artifact (in-sample) config: {json.dumps(dataclasses.asdict(artifact_config))}")
    print(f"held-out folds' config: {json.dumps(results['config'])}")
    print(f"{'choice within S_i':<26}{'mean log-prob':>14}{'gap closed':>12}{'spearman':>10}")
    print(f"{'oracle (best of t)':<26}{b['oracle']:>14.4f}{'100%':>12}{'':>10}")
    for name, value in means.items():
        closed = (value["chosen"] - means["bm25"]["chosen"]) / gap if gap else 0.0
        print(f"{name:<26}{value['chosen']:>14.4f}{closed:>12.0%}{value['spearman']:>10.3f}")
    print(f"{'random in S_i (mean)':<26}{b['mean']:>14.4f}{(b['mean'] - means['bm25']['chosen']) / gap:>12.0%}")
    print(f"{'worst of t':<26}{b['worst']:>14.4f}{(b['worst'] - means['bm25']['chosen']) / gap:>12.0%}")
    print("paired by example (95% bootstrap interval):")
    for name, (mean, low, high) in paired.items():
        print(f"  {name:<40}{mean:+.4f} [{low:+.4f}, {high:+.4f}]")


if __name__ == "__main__":
    raise SystemExit(main())
