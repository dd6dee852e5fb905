"""Text-generation metrics for docstrings: BLEU-4 (corpus and smoothed sentence), ROUGE-L and METEOR.

Implemented here (pure Python) because the usual packages need data a machine without internet cannot
fetch (NLTK's METEOR wants WordNet). Conventions follow the code-summarisation literature:

- corpus BLEU-4: Papineni et al. (2002), geometric mean of clipped 1-4-gram precisions with the brevity
  penalty, counts pooled over the corpus;
- sentence BLEU-4: the same per pair with add-one smoothing on 2-4-grams (Lin & Och 2004, as in
  CodeXGLUE's smoothed BLEU), averaged;
- ROUGE-L: F-measure of the longest common subsequence (beta = 1.2, as in the ROUGE package);
- METEOR: Banerjee & Lavie (2005) with exact and Porter-stem matching (no synonyms, since WordNet is not
  available), alpha 0.9, beta 3, gamma 0.5.

Scores are in [0, 1]; tokens are lower-cased words and punctuation.
"""

from __future__ import annotations

import itertools
import math
import re
from collections import Counter
from collections.abc import Sequence

_TOKEN = re.compile(r"[A-Za-z0-9_]+|[^\sA-Za-z0-9_]")


def tokenize(text: str) -> list[str]:
    return [t.lower() for t in _TOKEN.findall(text)]


def _ngrams(tokens: Sequence[str], n: int) -> Counter[tuple[str, ...]]:
    return Counter(tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1))


def _matches(hypothesis: Sequence[str], reference: Sequence[str], n: int) -> tuple[int, int]:
    hyp, ref = _ngrams(hypothesis, n), _ngrams(reference, n)
    return sum(min(count, ref[gram]) for gram, count in hyp.items()), max(len(hypothesis) - n + 1, 0)


def corpus_bleu(hypotheses: Sequence[str], references: Sequence[str], max_n: int = 4) -> float:
    """Corpus-level BLEU-4 (one reference per hypothesis)."""
    matched = [0] * max_n
    total = [0] * max_n
    hyp_len = ref_len = 0
    for hypothesis, reference in zip(hypotheses, references, strict=True):
        h, r = tokenize(hypothesis), tokenize(reference)
        hyp_len, ref_len = hyp_len + len(h), ref_len + len(r)
        for n in range(1, max_n + 1):
            m, t = _matches(h, r, n)
            matched[n - 1] += m
            total[n - 1] += t
    if hyp_len == 0 or any(m == 0 for m in matched):
        return 0.0
    log_precision = sum(math.log(m / t) for m, t in zip(matched, total, strict=True)) / max_n
    brevity = 1.0 if hyp_len > ref_len else math.exp(1 - ref_len / hyp_len)
    return brevity * math.exp(log_precision)


def sentence_bleu(hypothesis: str, reference: str, max_n: int = 4) -> float:
    """Smoothed sentence BLEU-4: add-one on the 2-4-gram precisions (CodeXGLUE's convention)."""
    h, r = tokenize(hypothesis), tokenize(reference)
    if not h or not r:
        return 0.0
    log_precision = 0.0
    for n in range(1, max_n + 1):
        m, t = _matches(h, r, n)
        if n == 1:
            if m == 0:
                return 0.0
            log_precision += math.log(m / t)
        else:
            log_precision += math.log((m + 1) / (t + 1))
    brevity = 1.0 if len(h) > len(r) else math.exp(1 - len(r) / len(h))
    return brevity * math.exp(log_precision / max_n)


def _lcs(a: Sequence[str], b: Sequence[str]) -> int:
    previous = [0] * (len(b) + 1)
    for x in a:
        current = [0]
        for j, y in enumerate(b, start=1):
            current.append(previous[j - 1] + 1 if x == y else max(previous[j], current[j - 1]))
        previous = current
    return previous[-1]


def rouge_l(hypothesis: str, reference: str, beta: float = 1.2) -> float:
    """ROUGE-L F-measure."""
    h, r = tokenize(hypothesis), tokenize(reference)
    if not h or not r:
        return 0.0
    lcs = _lcs(h, r)
    if lcs == 0:
        return 0.0
    precision, recall = lcs / len(h), lcs / len(r)
    return (1 + beta**2) * precision * recall / (recall + beta**2 * precision)


def _stem(word: str) -> str:
    """A light Porter-style suffix stripper (enough to match returns/return, computed/compute)."""
    for suffix in ("ational", "ization", "fulness", "iveness", "ations", "ation", "ments", "ment", "ness",
                   "ings", "ing", "edly", "ies", "ied", "es", "ed", "ly", "s"):  # fmt: skip
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


def _align(h: Sequence[str], r: Sequence[str]) -> list[tuple[int, int]]:
    """Exact matches first, then stem matches; each token used once, earliest positions first."""
    pairs: list[tuple[int, int]] = []
    used_h: set[int] = set()
    used_r: set[int] = set()
    for key in (lambda t: t, _stem):
        for i, token in enumerate(h):
            if i in used_h:
                continue
            for j, other in enumerate(r):
                if j not in used_r and key(token) == key(other):
                    pairs.append((i, j))
                    used_h.add(i)
                    used_r.add(j)
                    break
    return sorted(pairs)


def meteor(hypothesis: str, reference: str, alpha: float = 0.9, beta: float = 3.0, gamma: float = 0.5) -> float:
    """METEOR with exact and stem matching."""
    h, r = tokenize(hypothesis), tokenize(reference)
    if not h or not r:
        return 0.0
    pairs = _align(h, r)
    matches = len(pairs)
    if matches == 0:
        return 0.0
    precision, recall = matches / len(h), matches / len(r)
    f_mean = precision * recall / (alpha * precision + (1 - alpha) * recall)
    chunks = 1
    for (i1, j1), (i2, j2) in itertools.pairwise(pairs):
        if not (i2 == i1 + 1 and j2 == j1 + 1):
            chunks += 1
    penalty = gamma * (chunks / matches) ** beta
    return f_mean * (1 - penalty)


def score_all(hypotheses: Sequence[str], references: Sequence[str]) -> dict[str, float]:
    """Every metric over a corpus, as percentages (the literature's convention)."""
    n = max(len(hypotheses), 1)
    pairs = list(zip(hypotheses, references, strict=True))
    return {
        "corpus_bleu4": 100 * corpus_bleu(hypotheses, references),
        "sentence_bleu4": 100 * sum(sentence_bleu(h, r) for h, r in pairs) / n,
        "rouge_l": 100 * sum(rouge_l(h, r) for h, r in pairs) / n,
        "meteor": 100 * sum(meteor(h, r) for h, r in pairs) / n,
    }
