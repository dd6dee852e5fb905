"""The pooling of every sentence encoder assist runs, trains or converts (a module of its own: the OpenVINO
converter, which `models` imports, needs it without importing `encoder`)."""

from __future__ import annotations


def mean_pool(model, batch, normalize: bool = True):  # -> torch.Tensor (rows, dim)
    """Mean of the last hidden states over real tokens (padding masked out), L2-normalised unless asked not to.

    One pooling for every encoder assist runs or trains: the index encoder, LAIL, JOINTCOM and Condor.
    """
    import torch

    hidden = model(**batch).last_hidden_state
    mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
    pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
    return torch.nn.functional.normalize(pooled, dim=-1) if normalize else pooled
