"""The local backend: a causal LM run with `transformers` on the CPU (GPU placement is not implemented yet)."""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import ModelError, UsageError
from ..models import ModelSpec, generator_dir, pull, quiet_transformers, resolve
from ..prompts import Prompt
from . import Completion, Progress, SamplingParams, Step, TokenLogprobs, Usage

if TYPE_CHECKING:  # torch is imported lazily: `import assistant` must stay fast
    import torch


class LocalBackend:
    """Qwen2.5-Coder (or any registered generator) through `transformers`.

    Sampling draws all n candidates in one batched `generate` call. Log-probability scoring pads a batch
    of (prompt, continuation) pairs into one forward pass: on CPU, fp32 batched passes are much faster
    than one at a time.
    """

    name = "local"
    can_score = True
    scoring_unavailable = ""

    def __init__(self, spec: ModelSpec, directory: Path, threads: int | None = None) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        quiet_transformers()

        torch.set_num_threads(threads or os.cpu_count() or 1)
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(str(directory))
            self.lm = AutoModelForCausalLM.from_pretrained(str(directory), dtype=torch.float32).eval()
        except Exception as exc:  # any failure to load (safetensors, config, tokenizer) means a bad model dir
            first_line = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
            raise ModelError(
                f"model {spec.name} could not be loaded ({first_line}); run `assist models pull {spec.name} --force`"
            ) from None
        self.spec = spec
        self.model = spec.name
        self.usage = Usage()
        self.context = int(getattr(self.lm.config, "max_position_embeddings", spec.context) or spec.context)
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token

    @classmethod
    def load(cls, model: str | None = None, progress: Progress | None = None) -> LocalBackend:
        """Load a registered generator, assembling and converting it first if this is its first use."""
        spec = resolve(model, "generator")
        try:
            directory = generator_dir(spec)
        except ModelError:
            # First use: the weight packages are installed with assist; assemble and convert them once.
            # A model that was converted but is now damaged is not silently rebuilt: the error says how.
            if (spec.cache_dir / "manifest.json").exists():
                raise
            directory = pull(spec.name, install=False, progress=progress)
        return cls(spec, directory)

    def render(self, prompt: Prompt) -> str:
        """The prompt as the model sees it: its chat template, then the answer's opening fence."""
        text = self.tokenizer.apply_chat_template(list(prompt.messages), tokenize=False, add_generation_prompt=True)
        return text + prompt.answer_prefix

    def count_tokens(self, prompt: Prompt) -> int:
        return len(self.tokenizer(self.render(prompt), add_special_tokens=False)["input_ids"])

    def check_fits(self, prompt: Prompt, new_tokens: int) -> int:
        """Prompt tokens, or a UsageError saying by how much the prompt overflows the model's context."""
        used = self.count_tokens(prompt)
        if used + new_tokens > self.context:
            raise UsageError(
                f"the prompt takes {used} tokens and {new_tokens} more are asked for, but {self.model} has a "
                f"context of {self.context}; use fewer demonstrations (-k) or a smaller target file"
            )
        return used

    def sample(self, prompt: Prompt, params: SamplingParams, step: Step | None = None) -> list[Completion]:
        """Sample `params.n` candidates in one batched `generate` call.

        The prompt is prefilled once and its KV cache shared by all n sequences (generate's own
        num_return_sequences would prefill it n times). Each sampled token's raw log-probability (before
        temperature and top-p) is recorded on the way, so ranking by log-probability costs nothing more.
        """
        return self.sample_batch([prompt], params, step)[0]

    def sample_batch(
        self, prompts: Sequence[Prompt], params: SamplingParams, step: Step | None = None
    ) -> list[list[Completion]]:
        """`params.n` candidates for each of several prompts, all in one batched `generate` call.

        On a CPU, decoding 20 rows costs little more per step than decoding 5, so the evaluation harness
        samples a few tasks together (about 3x the tokens per second of one task at a time). Prompts are
        left-padded and prefilled once each; their KV caches are repeated n times. The samples depend on
        which prompts share the batch (one random stream serves all rows), not only on `params.seed`.
        """
        import torch
        from transformers import DynamicCache, LogitsProcessorList

        started = time.perf_counter()
        if not prompts:
            return []
        encoded = []
        for prompt in prompts:
            self.check_fits(prompt, params.max_new_tokens)
            encoded.append(self.tokenizer(self.render(prompt), add_special_tokens=False)["input_ids"])
        width = max(len(ids) for ids in encoded)
        ids = torch.full((len(encoded), width), self.tokenizer.pad_token_id, dtype=torch.long)
        mask = torch.zeros((len(encoded), width), dtype=torch.long)
        for row, tokens in enumerate(encoded):
            ids[row, width - len(tokens) :] = torch.tensor(tokens)
            mask[row, width - len(tokens) :] = 1
        greedy = params.temperature <= 0
        n = 1 if greedy else params.n
        if params.seed is not None:
            torch.manual_seed(params.seed)
        recorder = _TokenLogprobRecorder(step, params.max_new_tokens)
        stops = list(dict.fromkeys(s for prompt in prompts for s in prompt.stop))
        with torch.inference_mode():
            # Prefill all but the last prompt token once per prompt; generate feeds the last one itself.
            cache = DynamicCache(config=self.lm.config)
            positions = (mask.cumsum(-1) - 1).clamp(min=0)
            self.lm(
                input_ids=ids[:, :-1],
                attention_mask=mask[:, :-1],
                position_ids=positions[:, :-1],
                past_key_values=cache,
                use_cache=True,
            )
            cache.batch_repeat_interleave(n)
            output = self.lm.generate(
                input_ids=ids.repeat_interleave(n, dim=0),
                attention_mask=mask.repeat_interleave(n, dim=0),
                past_key_values=cache,
                do_sample=not greedy,
                temperature=None if greedy else params.temperature,
                top_p=None if greedy else params.top_p,
                top_k=None,
                max_new_tokens=params.max_new_tokens,
                stop_strings=stops or None,
                tokenizer=self.tokenizer,
                pad_token_id=self.tokenizer.pad_token_id,
                logits_processor=LogitsProcessorList([recorder]),
            )
        new_tokens = output[:, width:]
        logprobs = recorder.finish(new_tokens)
        results: list[list[Completion]] = []
        for index, prompt in enumerate(prompts):
            completions = []
            for row in range(index * n, (index + 1) * n):
                tokens = new_tokens[row].tolist()
                # Finished rows are padded to the longest; pad and eos end a sequence.
                length = next((i for i, t in enumerate(tokens) if t in self._end_ids), len(tokens))
                tokens = tokens[:length]
                text = self.tokenizer.decode(tokens, skip_special_tokens=True)
                cut = min((text.find(s) for s in prompt.stop if s in text), default=-1)
                finish = "stop" if cut >= 0 or length < params.max_new_tokens else "length"
                code = text[:cut] if cut >= 0 else text
                kept = self._tokens_within(tokens, len(code)) if cut >= 0 else length
                completions.append(
                    Completion(text=code, tokens=length, finish_reason=finish, logprobs=tuple(logprobs[row][:kept]))
                )
            results.append(completions)
        spent = time.perf_counter() - started
        self.usage.add(
            sum(len(t) for t in encoded),
            sum(c.tokens for group in results for c in group),
            spent,
            requests=len(prompts),
        )
        return results

    @property
    def _end_ids(self) -> set[int]:
        ends = {self.tokenizer.pad_token_id, self.tokenizer.eos_token_id}
        return {t for t in ends if t is not None}

    def _tokens_within(self, tokens: list[int], chars: int) -> int:
        """How many leading tokens decode to at most `chars` characters (the code before the stop string)."""
        count = 0
        while count < len(tokens) and len(self.tokenizer.decode(tokens[: count + 1])) <= chars:
            count += 1
        return count

    def logprob(self, pairs: Sequence[tuple[Prompt, str]], batch_tokens: int = 4096) -> list[TokenLogprobs]:
        """Token log-probabilities of each continuation given its prompt.

        Pairs are sorted by length and grouped into batches of at most `batch_tokens` padded tokens. Rows
        are left-padded so every continuation ends at the last position: the vocabulary projection (152k
        columns, the costliest matmul) is then computed only for the continuation positions.
        """
        import torch

        encoded = []
        for prompt, continuation in pairs:
            head = self.tokenizer(self.render(prompt), add_special_tokens=False)["input_ids"]
            tail = self.tokenizer(continuation, add_special_tokens=False)["input_ids"]
            encoded.append((head, tail))
        results: list[TokenLogprobs] = [TokenLogprobs() for _ in encoded]
        for batch in _length_batches(encoded, batch_tokens):
            width = max(len(encoded[i][0]) + len(encoded[i][1]) for i in batch)
            keep = max(len(encoded[i][1]) for i in batch) + 1
            ids = torch.full((len(batch), width), self.tokenizer.pad_token_id, dtype=torch.long)
            mask = torch.zeros((len(batch), width), dtype=torch.long)
            for row, i in enumerate(batch):
                sequence = encoded[i][0] + encoded[i][1]
                ids[row, width - len(sequence) :] = torch.tensor(sequence)
                mask[row, width - len(sequence) :] = 1
            positions = (mask.cumsum(-1) - 1).clamp(min=0)
            with torch.inference_mode():
                logits = self.lm(input_ids=ids, attention_mask=mask, position_ids=positions, logits_to_keep=keep).logits
                logp = torch.log_softmax(logits.float(), dim=-1)
            for row, i in enumerate(batch):
                tail = encoded[i][1]
                # Token t is predicted at position t-1; the kept logits cover the last `keep` positions.
                at = torch.arange(keep - 1 - len(tail), keep - 1)
                values = logp[row, at, torch.tensor(tail)].tolist()
                results[i] = TokenLogprobs(tokens=self.tokenizer.convert_ids_to_tokens(tail), logprobs=values)
        return results

    def logprob_shared(self, pairs: Sequence[tuple[Prompt, str]], shared_messages: int) -> list[TokenLogprobs]:
        """Like :meth:`logprob`, for prompts whose first `shared_messages` messages are the same: that part
        is run once and its KV cache reused by every pair (LAIL labeling: one demonstration, many examples).

        Falls back to :meth:`logprob` when the rendered prompts do not actually start with the shared text.
        """
        if not pairs:
            return []
        shared = list(pairs[0][0].messages[:shared_messages])
        prefix = self.tokenizer.apply_chat_template(shared, tokenize=False) if shared else ""
        texts = [self.render(prompt) for prompt, _ in pairs]
        if not prefix or not all(
            list(prompt.messages[:shared_messages]) == shared and text.startswith(prefix) and len(text) > len(prefix)
            for (prompt, _), text in zip(pairs, texts, strict=True)
        ):
            return self.logprob(pairs)
        tails = [(text[len(prefix) :], continuation) for text, (_, continuation) in zip(texts, pairs, strict=True)]
        return self.logprob_shared_prefix(prefix, tails)

    def logprob_shared_prefix(
        self, prefix: str, tails: Sequence[tuple[str, str]], batch_tokens: int = 4096
    ) -> list[TokenLogprobs]:
        """Log-probabilities of each continuation in `prefix + context + continuation`, for many
        (context, continuation) tails after one shared prefix.

        The prefix is run once and its KV cache reused by every tail (LAIL labeling: one demonstration's
        prompt, many examples scored after it), so each pair costs only its own tokens. Tails are right-padded;
        only the continuation positions go through the 152k-wide vocabulary projection. Every context must
        be non-empty (it holds the request the continuation answers).
        """
        import copy

        import torch
        from transformers import DynamicCache

        head = self.tokenizer(prefix, add_special_tokens=False)["input_ids"]
        encoded = []
        for context, continuation in tails:
            ctx = self.tokenizer(context, add_special_tokens=False)["input_ids"]
            cont = self.tokenizer(continuation, add_special_tokens=False)["input_ids"]
            if not ctx:
                raise ValueError("each tail needs a non-empty context")
            encoded.append((ctx, cont))
        results = [TokenLogprobs() for _ in encoded]
        if not head:
            raise ValueError("the shared prefix is empty")
        with torch.inference_mode():
            base = DynamicCache(config=self.lm.config)
            self.lm.model(input_ids=torch.tensor([head]), past_key_values=base, use_cache=True)
        for batch in _length_batches(encoded, batch_tokens):
            width = max(len(encoded[i][0]) + len(encoded[i][1]) for i in batch)
            ids = torch.full((len(batch), width), self.tokenizer.pad_token_id, dtype=torch.long)
            mask = torch.zeros((len(batch), len(head) + width), dtype=torch.long)
            mask[:, : len(head)] = 1
            for row, i in enumerate(batch):
                sequence = encoded[i][0] + encoded[i][1]
                ids[row, : len(sequence)] = torch.tensor(sequence)
                mask[row, len(head) : len(head) + len(sequence)] = 1
            positions = torch.arange(len(head), len(head) + width).unsqueeze(0).expand(len(batch), -1)
            cache = copy.deepcopy(base)
            cache.batch_repeat_interleave(len(batch))
            with torch.inference_mode():
                hidden = self.lm.model(
                    input_ids=ids, attention_mask=mask, position_ids=positions, past_key_values=cache, use_cache=True
                ).last_hidden_state
                # Token j of a tail is predicted at position j-1: gather just the continuation's positions.
                rows, cols, targets, owners = [], [], [], []
                for row, i in enumerate(batch):
                    ctx, cont = encoded[i]
                    for offset, token in enumerate(cont):
                        rows.append(row)
                        cols.append(len(ctx) + offset - 1)
                        targets.append(token)
                        owners.append(i)
                picked = hidden[torch.tensor(rows), torch.tensor(cols)]
                logp = torch.log_softmax(self.lm.lm_head(picked).float(), dim=-1)
                values = logp[torch.arange(len(targets)), torch.tensor(targets)].tolist()
            for i in batch:
                cont = encoded[i][1]
                mine = [v for v, owner in zip(values, owners, strict=True) if owner == i]
                results[i] = TokenLogprobs(tokens=self.tokenizer.convert_ids_to_tokens(cont), logprobs=mine)
        return results


def _length_batches(encoded: Sequence[tuple[list[int], list[int]]], batch_tokens: int) -> list[list[int]]:
    """Indices of (context, continuation) token pairs, longest first, grouped so that a batch padded to its
    longest row holds at most `batch_tokens` tokens; pairs with an empty continuation are left out."""
    order = sorted(range(len(encoded)), key=lambda i: -(len(encoded[i][0]) + len(encoded[i][1])))
    batches = []
    position = 0
    while position < len(order):
        longest = len(encoded[order[position]][0]) + len(encoded[order[position]][1])
        size = max(1, batch_tokens // max(longest, 1))
        batch = [i for i in order[position : position + size] if encoded[i][1]]
        position += size
        if batch:
            batches.append(batch)
    return batches


class _TokenLogprobRecorder:
    """A logits processor that records the raw log-probability of each token generate picks.

    It runs before temperature and top-p (custom processors come first), so it sees the model's own
    distribution. At each step it looks up the token chosen at the previous step.
    """

    def __init__(self, step: Step | None = None, total: int = 0) -> None:
        self.previous: torch.Tensor | None = None
        self.values: list[torch.Tensor] = []
        self.step = step
        self.total = total

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        import torch

        if self.step is not None:
            self.step(len(self.values) + (self.previous is not None), self.total)  # may raise to cancel
        if self.previous is not None:
            self.values.append(self.previous.gather(1, input_ids[:, -1:]).squeeze(1))
        self.previous = torch.log_softmax(scores.float(), dim=-1)
        return scores

    def finish(self, new_tokens: torch.Tensor) -> list[list[float]]:
        """Per-row log-probabilities of the generated tokens."""
        import torch

        if self.previous is not None and new_tokens.shape[1] > len(self.values):
            last = new_tokens[:, len(self.values) : len(self.values) + 1]
            self.values.append(self.previous.gather(1, last).squeeze(1))
        if not self.values:
            return [[] for _ in range(new_tokens.shape[0])]
        return torch.stack(self.values, dim=1).tolist()
