"""Condor on the generator's own backbone: the local model reads the problem and a candidate as it would have
written it, frozen, and a linear head over its hidden states says p(correct).

The paper's discriminators are 110M-1.3B encoders fine-tuned on a GPU; our MiniLM (22M) one, trained on two CPU
cores, could not tell near-identical samples apart. The generator (Qwen2.5-Coder-0.5B by default) already knows
the code it wrote: its final hidden state at the end of the candidate, and their mean over the candidate's
tokens, are the features; only the head (2 x 896 + 1 numbers) is trained. The backbone is frozen, so each
(problem, code) is encoded once and kept: the classifier's epochs then cost next to nothing, and there is no
contrastive stage (it would move the backbone). The text is the generation prompt (the problem, no
demonstrations) and the code in the answer's fence, as the model saw its own samples.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from assistant.errors import ModelError

GENERATOR = "generator"  # the `backbone` of a CondorConfig that means the local generator, frozen
BATCH_TOKENS = 4096  # padded tokens per forward pass


class GeneratorDiscriminator:
    """The frozen generator and a linear head: the same interface as the encoder-based discriminator."""

    frozen = True  # only the head trains: no contrastive stage, no encoder learning rate

    def __init__(self, model: str | None = None, head_path: Path | None = None) -> None:
        import torch

        from assistant.backends.local import local_transformers

        backend = local_transformers(model, "auto")  # one frozen copy per process, shared with SelfRACG
        self.backend = backend
        self.model_name = backend.model
        hidden = int(backend.lm.config.hidden_size)
        self.head = torch.nn.Linear(2 * hidden, 1)
        if head_path is not None:
            from safetensors.torch import load_file

            try:
                self.head.load_state_dict(load_file(str(head_path)))
            except RuntimeError:  # a head trained over a model of another width
                raise ModelError(
                    f"the discriminator head at {head_path} was not trained over {self.model_name}; retrain it"
                ) from None
        # Features by (problem, code), kept while training (each epoch sees the same programs); a ranking
        # computes its candidates' once and keeps nothing, so a long session does not grow.
        self._features: dict[tuple[str, str], Any] = {}

    def batch(self, problems: Sequence[str], codes: Sequence[str], max_length: int) -> list[tuple[str, str]]:
        """The pairs themselves: their features are computed (or recalled) by `embed`. `max_length` is the
        encoder backbones' truncation and is not applied: the generator reads the whole problem (cut to
        PROBLEM_CHARS by the data) and the whole candidate, whose length the sampler's token limit already bounds,
        so a head sees at ranking time exactly the features it was trained on."""
        return list(zip(problems, codes, strict=True))

    def embed(self, batch: Sequence[tuple[str, str]]) -> Any:
        """[final hidden state at the code's end ; its mean over the code's tokens] for each pair (fp32): the
        generation prompt for the problem (no demonstrations), then the code in the answer's fence."""
        import torch

        from assistant.backends.prompts import build_prompt

        known = self._features if self.head.training else {}
        missing = [pair for pair in dict.fromkeys(batch) if pair not in known]
        if missing:
            states = self.backend.continuation_states(
                [(build_prompt(problem), code.rstrip() + "\n```") for problem, code in missing], BATCH_TOKENS
            )
            known.update(zip(missing, states, strict=True))
        return torch.stack([known[pair] for pair in batch])

    def logits(self, batch: Sequence[tuple[str, str]]) -> Any:
        return self.head(self.embed(batch)).squeeze(-1)

    def train(self, mode: bool = True) -> None:
        self.head.train(mode)
        if not mode:
            self._features = {}  # training is over: what it encoded is not needed again

    def parameters(self) -> list:
        return list(self.head.parameters())
