"""`assist eval retrieval`: TST^R's LLM-free evaluation by pairwise ranking of triplets.

A triplet is (reference r from the test split, candidates p and n from the pool) with S_c(p, r) > S_c(n, r):
the code of p is closer to r's code. A scorer ranks the triplet correctly when it prefers p from the
requirements alone. Triplets are drawn two ways:

- boundary: p among the λk most code-similar, n among the λk most text-similar (frozen encoder) of the rest
  after skipping λs — hard by construction for the frozen encoder;
- random: p, n drawn uniformly from the pool (then ordered by S_c; ties dropped).

Scorers: the frozen encoder, TST^R, and an oracle that sees the reference's *code* (the frozen embedding of
the code rather than the requirement). Scoring by S_c itself would rank every triplet right by construction.
Intervals are bootstrapped over triplets (those of one reference are not independent: read them as a guide).
"""

from __future__ import annotations

import random
from collections.abc import Sequence

import numpy as np

from assistant.code.codesim import similarity_matrix
from assistant.evaluate.metrics import bootstrap_ci

Triplet = tuple[int, int, int]  # (test row, positive pool row, negative pool row)


def boundary_triplets(
    code_sim: np.ndarray, text_sim: np.ndarray, lambda_k: int = 4, lambda_s: int = 4
) -> list[Triplet]:
    triplets: list[Triplet] = []
    for t in range(code_sim.shape[0]):
        order = np.argsort(-code_sim[t], kind="stable")
        close = order[:lambda_k]
        rest = order[lambda_k + lambda_s :]
        confusing = rest[np.argsort(-text_sim[t, rest], kind="stable")[:lambda_k]]
        triplets += [(t, int(p), int(n)) for p in close for n in confusing if code_sim[t, p] > code_sim[t, n]]
    return triplets


def random_triplets(code_sim: np.ndarray, per_test: int = 16, seed: int = 0) -> list[Triplet]:
    rng = random.Random(seed)
    triplets: list[Triplet] = []
    pool = code_sim.shape[1]
    for t in range(code_sim.shape[0]):
        for _ in range(per_test):
            a, b = rng.sample(range(pool), 2)
            if code_sim[t, a] == code_sim[t, b]:
                continue
            p, n = (a, b) if code_sim[t, a] > code_sim[t, b] else (b, a)
            triplets.append((t, p, n))
    return triplets


def accuracy(scores: np.ndarray, triplets: Sequence[Triplet]) -> tuple[float, float, float]:
    """Fraction of triplets where scores[t, p] > scores[t, n], with a 95% bootstrap interval."""
    return bootstrap_ci([float(scores[t, p] > scores[t, n]) for t, p, n in triplets])


def run_retrieval_eval(
    test_requirements: np.ndarray,
    test_codes: Sequence[str],
    pool_requirements: np.ndarray,
    pool_codes: Sequence[str],
    scorers: dict[str, np.ndarray],
    *,
    lambda_k: int = 4,
    lambda_s: int = 4,
    seed: int = 0,
) -> list[dict]:
    """Rows of {scorer, triplets kind, count, accuracy (mean, low, high)}.

    `test_requirements` / `pool_requirements` are frozen unit embeddings (they pick the boundary triplets);
    `scorers` maps a name to a (tests × pool) score matrix.
    """
    code_sim = similarity_matrix(list(test_codes), list(pool_codes))
    text_sim = test_requirements @ pool_requirements.T
    kinds: dict[str, list[Triplet]] = {
        "boundary": boundary_triplets(code_sim, text_sim, lambda_k, lambda_s),
        "random": random_triplets(code_sim, per_test=lambda_k * lambda_k, seed=seed),
    }
    rows = []
    for name, scores in scorers.items():
        for kind, triplets in kinds.items():
            rows.append(
                {"scorer": name, "triplets": kind, "count": len(triplets), "accuracy": accuracy(scores, triplets)}
            )
    return rows
