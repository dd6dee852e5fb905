"""The local backend: a causal LM run with `transformers` on the CPU (GPU placement is not implemented yet).

Also what the engines with converted weights of their own (OpenVINO, CTranslate2) share with it, so that every
engine renders, counts and cuts alike: `ConvertedBackend` and `read_prompt_files`."""

from __future__ import annotations

import functools
import json
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from assistant.backends import (
    Backend,
    BackendIdentity,
    Completion,
    Progress,
    RowStream,
    SamplingParams,
    Seeds,
    Step,
    TokenLogprobs,
    Usage,
    check_prompt,
    check_seeds,
    check_text,
    first_row_stream,
)
from assistant.backends.loops import RowWatch
from assistant.backends.models import ModelSpec, generator_dir, pull, quiet_transformers, resolve
from assistant.backends.prompts import Prompt
from assistant.errors import ModelError, UsageError

if TYPE_CHECKING:  # torch is imported lazily: `import assistant` must stay fast
    import torch

PRECISIONS = ("auto", "fp32", "bf16")


def cpu_has_native_bf16(cpuinfo: str | None = None) -> bool:
    """Whether this CPU does bfloat16 matmuls in hardware (AVX512-BF16 or AMX), read from /proc/cpuinfo.

    Elsewhere torch emulates bf16, which is slower than fp32, so "auto" must not pick it there.
    """
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
        except OSError:
            return False
    flags = {flag for line in cpuinfo.splitlines() if line.startswith("flags") for flag in line.split()}
    return bool(flags & {"avx512_bf16", "amx_bf16"})


DEVICES = ("auto", "cpu", "cuda")


def resolve_device(choice: str) -> str:
    """`auto` → cuda where torch sees a GPU, else cpu; `cuda` without one is an error (one line)."""
    import torch

    if choice not in DEVICES:
        raise UsageError(f"unknown device {choice!r}; choose {', '.join(DEVICES)}")
    available = torch.cuda.is_available()
    if choice == "cuda" and not available:
        raise UsageError(
            f"device cuda: torch {torch.__version__} sees no CUDA GPU here; use device cpu",
            setting="device:no_cuda",
            values={"torch": torch.__version__},
        )
    if choice == "auto":
        return "cuda" if available else "cpu"
    return choice


def resolve_precision(choice: str) -> str:
    """`auto` → bf16 where the CPU has native bf16, else fp32; `fp32`/`bf16` as given; others are an error."""
    if choice not in PRECISIONS:
        raise UsageError(f"unknown precision {choice!r}; choose {', '.join(PRECISIONS)}")
    if choice == "auto":
        return "bf16" if cpu_has_native_bf16() else "fp32"
    return choice


class LocalBackend(Backend):
    """Qwen2.5-Coder (or any registered generator) through `transformers`.

    Sampling decodes all n candidates (of one prompt, or of several) as one batch. Log-probability scoring pads a batch
    of (prompt, continuation) pairs into one forward pass: on CPU, fp32 batched passes are much faster
    than one at a time.
    """

    name = "local"
    description = "a converted model run on this machine's CPU with transformers (offline)"
    batches_prompts = True
    streams = True
    logprobs = True
    can_score = True
    scoring_unavailable = ""
    prefills_answer = True

    def __init__(
        self,
        spec: ModelSpec,
        directory: Path,
        threads: int | None = None,
        precision: str = "fp32",
        context: int | None = None,
        device: str = "cpu",
    ) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        quiet_transformers()

        torch.set_num_threads(threads or os.cpu_count() or 1)
        # fp32 unless asked: bf16 is about 2x faster on CPUs with native bf16 (LAIL labeling uses it), but its
        # log-probabilities differ in the third decimal, so results made with it are keyed apart.
        self.precision = resolve_precision(precision)
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(str(directory), trust_remote_code=False)
            dtype = torch.bfloat16 if self.precision == "bf16" else torch.float32
            self.lm = (
                AutoModelForCausalLM.from_pretrained(str(directory), dtype=dtype, trust_remote_code=False)
                .eval()
                .to(device)
            )
        except Exception as exc:  # any failure to load (safetensors, config, tokenizer) means a bad model dir
            first_line = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
            raise ModelError(
                f"model {spec.name} could not be loaded ({first_line}); run `assist models pull {spec.name} --force`"
            ) from None
        # Where the model runs: the CPU for every user command; a GPU only where training asks for one.
        self.device = torch.device(device)
        self.spec = spec
        self.model = spec.name
        self.usage = Usage()
        self.window = int(getattr(self.lm.config, "max_position_embeddings", spec.context) or spec.context)
        # The tokens a request may use: the model's window, or less where the user set `local.context` (the CLI's
        # default): a 2-core CPU needs minutes to prefill a prompt of tens of thousands of tokens.
        self.context = min(self.window, context) if context else self.window
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token

    @classmethod
    def load(
        cls,
        model: str | None = None,
        progress: Progress | None = None,
        precision: str = "fp32",
        context: int | None = None,
        device: str = "cpu",
    ) -> LocalBackend:
        """Load a registered generator, assembling and converting it first if this is its first use.

        `precision`: fp32 (default), bf16, or auto (bf16 where the CPU does it natively). `context`: the most
        tokens (prompt + answer) a request may take (default: the model's whole window). `device`: where the
        model runs (a torch device name: cpu, or cuda when training on a GPU)."""
        spec = resolve(model, "generator")
        try:
            directory = generator_dir(spec)
        except ModelError:
            # First use: the weight packages are installed with assist; assemble and convert them once.
            # A model that was converted but is now damaged is not silently rebuilt: the error says how.
            if (spec.cache_dir / "manifest.json").exists():
                raise
            directory = pull(spec.name, install=False, progress=progress)
        return cls(spec, directory, precision=precision, context=context, device=device)

    @property
    def identity(self) -> BackendIdentity:
        """The model and its precision; sample caches keep the plain `local` (all of them were made in fp32) and
        label caches the plain model name in fp32."""
        label = self.model if self.precision == "fp32" else f"{self.model}@{self.precision}"
        return BackendIdentity(
            self.name, self.model, kind=self.name, label=label, details=(("precision", self.precision),)
        )

    def render(self, prompt: Prompt) -> str:
        """The prompt as the model sees it: its chat template, then the answer's opening fence."""
        check_prompt(prompt)  # every use of a prompt comes through here: refuse undecodable text first
        text = self.tokenizer.apply_chat_template(list(prompt.messages), tokenize=False, add_generation_prompt=True)
        return text + prompt.answer_prefix

    def count_tokens(self, prompt: Prompt) -> int:
        return len(self.tokenizer(self.render(prompt), add_special_tokens=False)["input_ids"])

    def _limit_source(self) -> str:
        if self.context < self.window:
            return f" (the local.context setting; {self.model}'s own window is {self.window})"
        return f" ({self.model}'s window)"

    def check_fits(self, prompt: Prompt, new_tokens: int) -> int:
        """Prompt tokens, or a UsageError saying by how much the prompt overflows the model's context."""
        used = self.count_tokens(prompt)
        if used + new_tokens > self.context:
            limit = self._limit_source()
            raise UsageError(
                f"the prompt takes {used} tokens and {new_tokens} more are asked for, but the limit is a context of "
                f"{self.context}{limit}; shorten the requirement, use fewer demonstrations or a smaller target file",
                setting="k:local_context",
                values={"used": used, "new_tokens": new_tokens, "context": self.context, "limit": limit},
            )
        return used

    def sample(self, prompt: Prompt, params: SamplingParams, step: Step | None = None) -> list[Completion]:
        """Sample `params.n` candidates of one prompt through `sample_batch` (shared by the OpenVINO engine).

        Here the prompt is prefilled once and its KV cache shared by all n sequences (generate's own
        num_return_sequences would prefill it n times). Each sampled token's raw log-probability (before
        temperature and top-p) is recorded on the way, so ranking by log-probability costs nothing more.
        """
        return self.sample_batch([prompt], params, step)[0]

    def sample_batch(
        self, prompts: Sequence[Prompt], params: SamplingParams, step: Step | None = None, seeds: Seeds | None = None
    ) -> list[list[Completion]]:
        """`params.n` candidates for each of several prompts, decoded together in one batch.

        Prompts are left-padded and prefilled once each; their KV caches are repeated n times. Decoding is
        our own loop rather than `generate`: a row that finishes (end of turn, or the prompt's stop string)
        leaves the batch at once, so the samples that stop early no longer pay for the one that runs to
        `max_new_tokens`. On a CPU, 20 rows cost little more per step than 5, so the evaluation harness
        samples several tasks together. Each token's raw log-probability (before temperature and top-p)
        is recorded, so ranking by log-probability costs nothing more.

        `seeds` gives each prompt its own seed (default: `params.seed` for all). Every row draws from its
        own random generator, seeded by (its prompt's seed, its number), so a prompt's samples do not depend
        on which other prompts share the batch.
        """
        started = time.perf_counter()
        if not prompts:
            return []
        encoded = []
        for prompt in prompts:
            self.check_fits(prompt, params.max_new_tokens)
            encoded.append(self.tokenizer(self.render(prompt), add_special_tokens=False)["input_ids"])
        check_seeds(prompts, seeds)
        seeds = list(seeds) if seeds is not None else [params.seed] * len(prompts)
        rows = _Rows(prompts, 1 if params.temperature <= 0 else params.n, self.tokenizer.decode)
        generators = self._row_generators(rows, seeds)
        stream = first_row_stream(prompts)
        self._decode_rows(encoded, params, rows, generators, step or (lambda done, total: None), stream)
        results: list[list[Completion]] = [[] for _ in prompts]
        for row, owner in enumerate(rows.owner):
            reason = rows.watches[owner].cut.get(row % rows.n)
            results[owner].append(
                self._completion(
                    rows.generated[row], rows.logprobs[row], prompts[owner].stop, params.max_new_tokens, reason
                )
            )
        self.usage.add(
            sum(len(t) for t in encoded),
            sum(c.tokens for group in results for c in group),
            time.perf_counter() - started,
            requests=len(prompts),
        )
        return results

    def _row_generators(self, rows: _Rows, seeds: Seeds) -> list[torch.Generator]:
        """One random generator per row, seeded by (its prompt's seed, its number); unseeded prompts draw afresh."""
        import torch

        generators = []
        for row, owner in enumerate(rows.owner):
            generator = torch.Generator(self.device)
            seed = seeds[owner]
            if seed is None:
                generator.seed()
            else:
                generator.manual_seed(seed * 1009 + row % rows.n)
            generators.append(generator)
        return generators

    def _decode_rows(
        self,
        encoded: list[list[int]],
        params: SamplingParams,
        rows: _Rows,
        generators: list[torch.Generator],
        report: Step,
        stream: RowStream | None,
    ) -> None:
        """Prefill the prompts once, then decode every row token by token into `rows` until each has ended (an end
        token, its stop string, a straggler's cut, or `params.max_new_tokens`); `report` hears each step and may
        raise to cancel, `stream` hears the first row as it grows."""
        import torch
        from transformers import DynamicCache

        greedy = params.temperature <= 0
        ends = self._end_ids
        ids, mask, positions = self._left_padded([(tokens, []) for tokens in encoded], range(len(encoded)))
        with torch.inference_mode():
            cache = DynamicCache(config=self.lm.config)
            logits = self.lm(
                input_ids=ids, attention_mask=mask, position_ids=positions, past_key_values=cache, logits_to_keep=1
            ).logits[:, -1, :]
            cache.batch_repeat_interleave(rows.n)
            logits = logits.repeat_interleave(rows.n, dim=0)
            mask = mask.repeat_interleave(rows.n, dim=0)
            position = positions[:, -1].repeat_interleave(rows.n, dim=0) + 1
            active = list(range(len(rows.owner)))  # rows still decoding, in batch order
            for done in range(params.max_new_tokens):
                report(done, params.max_new_tokens)  # may raise to cancel
                raw = torch.log_softmax(logits.float(), dim=-1)
                chosen = (
                    raw.argmax(-1)
                    if greedy
                    else _sample_top_p(
                        logits.float(), params.temperature, params.top_p, [generators[row] for row in active]
                    )
                )
                picked = raw.gather(1, chosen[:, None]).squeeze(1).tolist()
                keep = rows.take(active, chosen.tolist(), picked, ends)
                if stream is not None and active[0] == 0:
                    stream.text(self.tokenizer.decode(rows.generated[0], skip_special_tokens=True))
                if not keep or done + 1 == params.max_new_tokens:
                    break
                if len(keep) < len(active):
                    selected = torch.tensor(keep, device=self.device)
                    cache.batch_select_indices(selected)
                    chosen, mask, position = chosen[selected], mask[selected], position[selected]
                    active = [active[slot] for slot in keep]
                mask = torch.cat([mask, torch.ones((len(active), 1), dtype=torch.long, device=self.device)], dim=1)
                logits = self.lm(
                    input_ids=chosen[:, None],
                    attention_mask=mask,
                    position_ids=position[:, None],
                    past_key_values=cache,
                    logits_to_keep=1,
                ).logits[:, -1, :]
                position = position + 1

    @property
    def _end_ids(self) -> set[int]:
        """Tokens that end a sample: the tokenizer's end and padding tokens, and the model's end-of-turn."""
        configured = getattr(self.lm.generation_config, "eos_token_id", None)
        configured = configured if isinstance(configured, list) else [configured]
        ends = {self.tokenizer.pad_token_id, self.tokenizer.eos_token_id, *configured}
        return {t for t in ends if t is not None}

    def _completion(
        self,
        tokens: list[int],
        logprobs: Sequence[float],
        stops: Sequence[str],
        limit: int,
        cut_reason: str | None = None,
    ) -> Completion:
        """A decoded row as a candidate: its text up to the first stop string, the log-probabilities of the tokens
        before it, and "length" when it ran to `limit` tokens without stopping or was ended early for
        `cut_reason` (a straggler: `assistant.backends.loops`); shared by every local engine."""
        text = self.tokenizer.decode(tokens, skip_special_tokens=True)
        cut = min((text.find(s) for s in stops if s in text), default=-1)
        if cut >= 0:
            cut_reason = None  # it reached its stop string after all: a finished row
        finish = "stop" if cut >= 0 or (len(tokens) < limit and cut_reason is None) else "length"
        code = text[:cut] if cut >= 0 else text
        kept = self._tokens_within(tokens, len(code)) if cut >= 0 else len(tokens)
        return Completion(
            text=code, tokens=len(tokens), finish_reason=finish, logprobs=tuple(logprobs[:kept]), cut_reason=cut_reason
        )

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

        encoded = self._encode_pairs(pairs)
        results: list[TokenLogprobs] = [TokenLogprobs() for _ in encoded]
        for batch in _length_batches(encoded, batch_tokens):
            keep = max(len(encoded[i][1]) for i in batch) + 1
            ids, mask, positions = self._left_padded(encoded, batch)
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

    def continuation_states(self, pairs: Sequence[tuple[Prompt, str]], batch_tokens: int = 4096) -> list[Any]:
        """For each (prompt, continuation): the model's final hidden state at the continuation's last token and
        the mean of its final hidden states over the continuation's tokens, concatenated (fp32, on the CPU). The
        transformer runs without its vocabulary projection; no gradient is kept."""
        import torch

        encoded = self._encode_pairs(pairs)
        states: list[Any] = [None] * len(encoded)
        for batch in _length_batches(encoded, batch_tokens):
            ids, mask, positions = self._left_padded(encoded, batch)
            with torch.no_grad():  # not inference_mode: callers may train on these (a discriminator's head)
                hidden = self.lm.model(input_ids=ids, attention_mask=mask, position_ids=positions)
            last = hidden.last_hidden_state.float().cpu()
            for row, i in enumerate(batch):
                tail = last[row, last.shape[1] - len(encoded[i][1]) :]
                states[i] = torch.cat([tail[-1], tail.mean(0)])
        return states

    def _encode_pairs(self, pairs: Sequence[tuple[Prompt, str]]) -> list[tuple[list[int], list[int]]]:
        """(rendered prompt, continuation) token ids of each pair."""
        encoded = []
        for prompt, continuation in pairs:
            check_text(continuation, "the scored text")
            head = self.tokenizer(self.render(prompt), add_special_tokens=False)["input_ids"]
            tail = self.tokenizer(continuation, add_special_tokens=False)["input_ids"]
            encoded.append((head, tail))
        return encoded

    def _left_padded(self, encoded: Sequence[tuple[list[int], list[int]]], batch: Sequence[int]) -> tuple[Any, ...]:
        """ids, attention mask and positions of a batch of pairs, left-padded so every row ends at the last
        position (the continuation's tokens are then the last of each row), on the model's device."""
        import torch

        width = max(len(encoded[i][0]) + len(encoded[i][1]) for i in batch)
        ids = torch.full((len(batch), width), self.tokenizer.pad_token_id, dtype=torch.long)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        for row, i in enumerate(batch):
            sequence = encoded[i][0] + encoded[i][1]
            ids[row, width - len(sequence) :] = torch.tensor(sequence)
            mask[row, width - len(sequence) :] = 1
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        return ids.to(self.device), mask.to(self.device), positions.to(self.device)

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

        check_text(prefix)
        head = self.tokenizer(prefix, add_special_tokens=False)["input_ids"]
        encoded = []
        for context, continuation in tails:
            check_text(context)
            check_text(continuation, "the scored text")
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
            self.lm.model(input_ids=torch.tensor([head], device=self.device), past_key_values=base, use_cache=True)
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
            ids, mask, positions = ids.to(self.device), mask.to(self.device), positions.to(self.device)
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


class ConvertedBackend(Backend):
    """Base of the local engines that run converted weights of their own (OpenVINO, CTranslate2): the transformers
    backend's prompt handling and row finishing, shared rather than copied (they use only `tokenizer`, `context`,
    `window` and `model`, which `read_prompt_files` sets), so every engine renders, counts and cuts alike."""

    logprobs = True
    can_score = True
    scoring_unavailable = ""
    prefills_answer = True

    render = LocalBackend.render
    sample = LocalBackend.sample  # one prompt through the engine's own `sample_batch` (CTranslate2 has its own)
    _encode_pairs = LocalBackend._encode_pairs  # (prompt, continuation) token ids, as scoring needs
    count_tokens = LocalBackend.count_tokens
    check_fits = LocalBackend.check_fits
    _limit_source = LocalBackend._limit_source
    _tokens_within = LocalBackend._tokens_within
    _completion = LocalBackend._completion

    def check_batch(self, prompts: Sequence[Prompt], params: SamplingParams, seeds: Seeds | None) -> int:
        """The prompts' tokens, once seeds that are not one per prompt and a prompt that cannot fit are refused: what
        a `sample_batch`, or each group of a `sample_groups`, checks before anything is decoded."""
        check_seeds(prompts, seeds)
        return sum(self.check_fits(prompt, params.max_new_tokens) for prompt in prompts)


def read_prompt_files(backend: Any, spec: ModelSpec, directory: Path, context: int | None) -> None:
    """Set what an engine with weights of its own (OpenVINO, CTranslate2) needs to build prompts exactly as the
    transformers backend does, from a folder holding the tokenizer and the model's configs: `tokenizer`, `window`,
    `context` (the window, or less when `local.context` says) and `end_ids` (end of text, end of turn, padding).
    The tokenizer is a :class:`ChatTokenizer`, which gives the same ids and text as transformers' without
    importing it (or torch): those engines need neither."""
    from assistant.backends.tokenizer import ChatTokenizer

    backend.tokenizer = ChatTokenizer(directory)
    config = json.loads((directory / "config.json").read_text(encoding="utf-8"))
    generation = directory / "generation_config.json"
    generation_config = json.loads(generation.read_text(encoding="utf-8")) if generation.exists() else {}
    if backend.tokenizer.pad_token_id is None:
        backend.tokenizer.pad_token = backend.tokenizer.eos_token
    backend.window = int(config.get("max_position_embeddings") or spec.context)
    backend.context = min(backend.window, context) if context else backend.window
    configured = generation_config.get("eos_token_id")
    configured = configured if isinstance(configured, list) else [configured]
    ends = {backend.tokenizer.pad_token_id, backend.tokenizer.eos_token_id, *configured}
    backend.end_ids = sorted(t for t in ends if t is not None)


@functools.cache
def local_transformers(model: str | None, precision: str, device: str = "cpu") -> LocalBackend:
    """One frozen transformers copy of the model per process and device, shared by whatever reads its hidden
    states (SelfRACG's branch, Condor on the generator's backbone); on a GPU it also writes SelfRACG's stage-2
    continuations."""
    return LocalBackend.load(model, precision=precision, device=device)


class _Rows:
    """The rows of one `LocalBackend.sample_batch` call (n per prompt) as they are decoded: their tokens, those
    tokens' raw log-probabilities, and each prompt's straggler watch."""

    def __init__(self, prompts: Sequence[Prompt], n: int, decode: Any) -> None:
        self.n = n
        self.owner = [index // n for index in range(len(prompts) * n)]  # which prompt each row answers
        self.stops = [list(prompts[o].stop) for o in self.owner]
        # Enough trailing tokens to hold the longest stop string (every token is at least one character).
        self.window = max((len(stop) for row_stops in self.stops for stop in row_stops), default=0) + 2
        self.generated: list[list[int]] = [[] for _ in self.owner]
        self.logprobs: list[list[float]] = [[] for _ in self.owner]
        # Each prompt's rows are watched together: a looping row, or one running far past its finished
        # siblings, ends early (cut off) and leaves the batch.
        self.watches = [RowWatch(n, decode) for _ in prompts]
        self.decode = decode

    def take(self, active: list[int], chosen: list[int], picked: list[float], ends: set[int]) -> list[int]:
        """Add each active row's chosen token (and its log-probability); the slots of the rows that go on."""
        keep = []
        for slot, (row, token) in enumerate(zip(active, chosen, strict=True)):
            watch = self.watches[self.owner[row]]
            if token in ends:
                watch.finish(row % self.n, len(self.generated[row]))
                continue
            self.generated[row].append(token)
            self.logprobs[row].append(picked[slot])
            tail = self.decode(self.generated[row][-self.window :], skip_special_tokens=True)
            if any(stop in tail for stop in self.stops[row]):
                watch.finish(row % self.n, len(self.generated[row]))
            elif watch.verdict(row % self.n, self.generated[row]) is None:  # a straggler leaves the batch here
                keep.append(slot)
        return keep


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


def _sample_top_p(
    logits: torch.Tensor, temperature: float, top_p: float, generators: Sequence[torch.Generator]
) -> torch.Tensor:
    """One token per row: temperature, then nucleus (top-p) filtering, then a draw from the row's generator.

    The smallest set of most likely tokens whose probabilities reach `top_p` is kept (at least one), as
    in `transformers`' TopPLogitsWarper.
    """
    import torch

    scaled = logits / temperature
    if top_p < 1.0:
        ordered, order = torch.sort(scaled, descending=True, dim=-1)
        cumulative = ordered.softmax(dim=-1).cumsum(dim=-1)
        # Drop a token when the tokens before it already reach top_p.
        drop = (cumulative - ordered.softmax(dim=-1)) >= top_p
        drop[:, 0] = False
        scaled = scaled.scatter(1, order, ordered.masked_fill(drop, float("-inf")))
    probabilities = scaled.softmax(dim=-1)
    return torch.stack(
        [torch.multinomial(probabilities[row], 1, generator=generator)[0] for row, generator in enumerate(generators)]
    )
