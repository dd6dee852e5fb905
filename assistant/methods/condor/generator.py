"""Condor on the generator's own backbone: the local model reads the problem and a candidate as it would have
written it, frozen, and a linear head over its hidden states says p(correct).

The paper's discriminators are 110M-1.3B encoders fine-tuned on a GPU; our MiniLM (22M) one, trained on two CPU
cores, could not tell near-identical samples apart. The generator (Qwen2.5-Coder-0.5B by default) already knows
the code it wrote: its final hidden state at the end of the candidate, and their mean over the candidate's
tokens, are the features; only the head (2 x 896 + 1 numbers) is trained. The backbone is frozen, so each
(problem, code) is encoded once and kept: the classifier's epochs then cost next to nothing, and there is no
contrastive stage (it would move the backbone). The text is the generation prompt (the problem, no
demonstrations) and the code in the answer's fence, as the model saw its own samples.

With a feature store (`features`, a folder: `eval discriminator` keeps one beside its models), each pair's features
are also written to disk as soon as they are encoded and read back before encoding, keyed by the backend's model and
precision and the exact text: the 1.5B model needs hours for an evaluation's pairs, and a stopped run then resumes.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from assistant.errors import ModelError

if TYPE_CHECKING:
    from assistant.backends import BackendIdentity
    from assistant.backends.prompts import Prompt

GENERATOR = "generator"  # the `backbone` of a CondorConfig that means the local generator, frozen
BATCH_TOKENS = 4096  # padded tokens per forward pass


class FeatureStore:
    """Features on disk: one float32 `.npy` per (backend identity, prompt, continuation), at `<key[:2]>/<key>.npy`.
    Each file is written to a temporary name and renamed, so a stop leaves whole files; one that cannot be read
    back as the expected vector (truncated, damaged) counts as absent and is encoded again."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    @staticmethod
    def key(identity: BackendIdentity, prompt: Prompt, continuation: str) -> str:
        """sha256 of the model and its precision (bf16 and fp32 features differ), the prompt and the continuation.
        The recipe (`LocalBackend.continuation_states`: the last layer's state at the end, and its mean) is not in
        the key: a change to it must add a version here, or a resumed run reads the old recipe's features."""
        text = json.dumps(
            {"identity": identity.manifest(), "prompt": prompt.to_json(), "continuation": continuation},
            sort_keys=True,  # ASCII (the default): any text, lone surrogates included, hashes
        )
        return hashlib.sha256(text.encode()).hexdigest()

    def path(self, key: str) -> Path:
        return self.directory / key[:2] / f"{key}.npy"

    def get(self, key: str, width: int) -> np.ndarray | None:
        """The stored features of `key`, or None when there are none of `width` numbers to read."""
        try:
            array = np.load(self.path(key), allow_pickle=False)
        except (OSError, ValueError, EOFError):  # absent, truncated or not an array
            return None
        return array if array.shape == (width,) and array.dtype == np.float32 else None

    def put(self, key: str, features: np.ndarray) -> None:
        """Write `key`'s features (as float32), replacing any earlier file at once."""
        target = self.path(key)
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(f"{target.name}.{os.getpid()}.partial")
        with partial.open("wb") as handle:
            np.save(handle, np.asarray(features, dtype=np.float32))
        os.replace(partial, target)


class GeneratorDiscriminator:
    """The frozen generator and a linear head: the same interface as the encoder-based discriminator."""

    frozen = True  # only the head trains: no contrastive stage, no encoder learning rate

    def __init__(self, model: str | None = None, head_path: Path | None = None, features: Path | None = None) -> None:
        """The local generator `model` (default: the default generator), with the head saved at `head_path` (else a
        new one) and, with `features`, a :class:`FeatureStore` in that folder (else nothing is written)."""
        import torch

        from assistant.backends.local import local_transformers

        backend = local_transformers(model, "auto")  # one frozen copy per process, shared with SelfRACG
        self.backend = backend
        self.model_name = backend.model
        self.width = 2 * int(backend.lm.config.hidden_size)
        self.head = torch.nn.Linear(self.width, 1)
        self.store = FeatureStore(features) if features is not None else None
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
        generation prompt for the problem (no demonstrations), then the code in the answer's fence. With a store,
        what it holds is read instead of encoded, and what is encoded is written to it."""
        import torch

        from assistant.backends.prompts import build_prompt

        known = self._features if self.head.training else {}
        missing = [pair for pair in dict.fromkeys(batch) if pair not in known]
        texts = {pair: (build_prompt(pair[0]), pair[1].rstrip() + "\n```") for pair in missing}
        keys: dict[tuple[str, str], str] = {}
        if self.store is not None:
            identity = self.backend.identity
            for pair in missing:
                keys[pair] = self.store.key(identity, *texts[pair])
                stored = self.store.get(keys[pair], self.width)
                if stored is not None:
                    known[pair] = torch.from_numpy(stored)
            missing = [pair for pair in missing if pair not in known]
        if missing:
            states = self.backend.continuation_states([texts[pair] for pair in missing], BATCH_TOKENS)
            known.update(zip(missing, states, strict=True))
            if self.store is not None:  # at once: a stop loses at most this batch
                for pair, state in zip(missing, states, strict=True):
                    self.store.put(keys[pair], state.detach().cpu().numpy())
        return torch.stack([known[pair] for pair in batch])

    def logits(self, batch: Sequence[tuple[str, str]]) -> Any:
        return self.head(self.embed(batch)).squeeze(-1)

    def train(self, mode: bool = True) -> None:
        self.head.train(mode)
        if not mode:
            self._features = {}  # training is over: what it encoded is not needed again

    def parameters(self) -> list:
        return list(self.head.parameters())
