"""The losses the trained methods optimise, one function each, named for what they optimise.

Each takes tensors already computed by its method (embeddings, scores, labels) and returns a scalar tensor to
minimise; choosing the examples (positives, negatives, batches) stays with the method. torch is imported by the
caller: this module is only loaded by training code.
"""

from __future__ import annotations

from typing import Any

Tensor = Any  # torch.Tensor, imported lazily


def masked_infonce(queries: Tensor, candidates: Tensor, temperature: float, mask: Tensor | None = None) -> Tensor:
    """InfoNCE with in-batch candidates (LAIL's loss).

    Inputs: `queries` (B × d) and `candidates` (C × d, C ≥ B) unit vectors, where candidate i is query i's
    positive; `mask` (B × C, True = left out) removes candidates that must not count as negatives (false
    negatives: the query itself, its other labelled candidates). Optimises the cross-entropy of picking the
    positive among the rest by cosine / `temperature`.
    """
    import torch

    logits = queries @ candidates.T / temperature
    if mask is not None:
        logits = logits.masked_fill(mask, float("-inf"))
    return torch.nn.functional.cross_entropy(logits, torch.arange(len(queries)))


def soft_target_cross_entropy(
    queries: Tensor, candidates: Tensor, temperature: float, target: Tensor, mask: Tensor
) -> Tensor:
    """Listwise cross-entropy against a target distribution (LAIL's `listwise` loss, not in the paper).

    Inputs: `queries` (B × d) and `candidates` (C × d) unit vectors; `target` (B × C) each query's distribution
    over the candidates (softmax of its labels on its own candidate set, zero elsewhere); `mask` (B × C, True =
    left out, e.g. the query itself). Optimises −Σ target · log softmax(cosine / `temperature`): the whole
    labelled ranking teaches, not only its two ends.
    """
    import torch

    logits = (queries @ candidates.T / temperature).masked_fill(mask, float("-inf"))
    log_probs = torch.log_softmax(logits, dim=1).masked_fill(mask, 0.0)
    return -(target * log_probs).sum(dim=1).mean()


def inner_product_infonce(queries: Tensor, documents: Tensor) -> Tensor:
    """InfoNCE over raw inner products (SelfRACG's loss, both stages).

    Inputs: `queries` (B × d) and `documents` (D × d, D ≥ B) vectors, document i being query i's positive; every
    other document (the batch's other positives, then any hard negatives after them) is a negative. Optimises the
    cross-entropy of picking the positive by inner product.
    """
    import torch

    return torch.nn.functional.cross_entropy(queries @ documents.T, torch.arange(len(queries), device=queries.device))


def similarity_regression(left: Tensor, right: Tensor, target: Tensor) -> Tensor:
    """Mean squared error between a pair's cosine and its target similarity (TST^R's loss).

    Inputs: `left`, `right` (B × d) unit vectors of the pair's requirements in the tuned space; `target` (B) the
    similarity of their code (masked edit similarity). Optimises (cos − S_c)², so that requirement similarity
    predicts code similarity.
    """
    return ((left * right).sum(-1) - target).pow(2).mean()


def expected_generator_loss(scores: Tensor, temperature: float, losses: Tensor) -> Tensor:
    """The generator's loss expected under the retriever's choice (JOINTCOM's loss, frozen generator).

    Inputs: `scores` (B × k) the retriever's cosine for each query's k exemplars; `losses` (B × k) the frozen
    generator's loss of the real docstring given each exemplar. Optimises Σ softmax(scores / τ) · L, moving
    probability onto the exemplars that make the real docstring likeliest.
    """
    import torch

    weights = torch.softmax(scores / temperature, dim=-1)
    return (weights * losses).sum(-1).mean()


def margin_contrastive(left: Tensor, right: Tensor, label: Tensor, margin: float) -> Tensor:
    """The contrastive loss of near-identical pairs (Condor's stage 1).

    Inputs: `left`, `right` (B × d) embeddings of a pair's two programs; `label` (B) 1 for two correct versions,
    0 for a wrong one and its correct twin. Optimises label · d² + (1 − label) · max(0, m − d)² with Euclidean d:
    correct variants pulled together, a wrong one pushed at least `margin` from its correct twin.
    """
    import torch

    distance = (left - right).pow(2).sum(-1).clamp(min=1e-12).sqrt()
    return (label * distance.pow(2) + (1 - label) * torch.relu(margin - distance).pow(2)).mean()


def balanced_binary_cross_entropy(positives: int, total: int) -> Any:
    """Condor's stage-2 loss: binary cross-entropy on p(correct) logits against the programs' labels, the
    positives weighted by negatives / positives so that both classes count (mutants outnumber correct programs
    several times over). Returns the loss module, called as `loss(logits, labels)`."""
    import torch

    return torch.nn.BCEWithLogitsLoss(pos_weight=torch.tensor((total - positives) / positives))
