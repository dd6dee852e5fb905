"""Metrics: unbiased pass@k (Chen et al. 2021), bootstrap confidence intervals, paired differences."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np


def pass_at_k(n: int, c: int, k: int) -> float:
    """Probability that at least one of k samples drawn from n (c of them correct) is correct.

    1 - C(n-c, k) / C(n, k), computed as a stable product.
    """
    if k > n:
        raise ValueError(f"pass@{k} needs at least {k} samples, got {n}")
    if n - c < k:
        return 1.0
    return float(1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))


def bootstrap_ci(
    values: Sequence[float], *, resamples: int = 2000, level: float = 0.95, seed: int = 0
) -> tuple[float, float, float]:
    """(mean, low, high): the mean and a percentile bootstrap interval over the values (tasks)."""
    data = np.asarray(values, dtype="float64")
    if data.size == 0:
        return float("nan"), float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    means = data[rng.integers(0, data.size, size=(resamples, data.size))].mean(axis=1)
    alpha = (1.0 - level) / 2
    return float(data.mean()), float(np.quantile(means, alpha)), float(np.quantile(means, 1 - alpha))


def paired_difference(values: Mapping[str, float], baseline: Mapping[str, float]) -> tuple[float, float, float] | None:
    """(mean, low, high) of values − baseline over the tasks both hold, a 95% bootstrap interval; None if none.

    Pairing removes the spread between tasks, so this answers "better than the baseline?" on far fewer tasks
    than comparing the two intervals. Tasks are taken in sorted order, so the interval does not depend on the
    order in which a run wrote its records (a resumed run and `assist eval report` print the same figures)."""
    shared = sorted(task for task in values if task in baseline)
    return bootstrap_ci([values[task] - baseline[task] for task in shared]) if shared else None


def interval_cell(
    value: tuple[float, float, float] | None, scale: float = 100.0, digits: int = 1, signed: bool = False
) -> str:
    """A table cell for a (mean, low, high) estimate: `46.1 [40.2, 52.0]` (percent by default); empty for None."""
    if value is None:
        return ""
    mean, low, high = (v * scale for v in value)
    sign = "+" if signed else ""
    return f"{mean:{sign}.{digits}f} [{low:{sign}.{digits}f}, {high:{sign}.{digits}f}]"
