"""A real HTTP server on 127.0.0.1 that speaks the OpenAI wire format, for driving the real `openai` client.

Its answers are scripted (a tiny deterministic "model" that writes `def f(): return <seed>`), and it can
misbehave on demand: ignore `n`, answer 429 or 500, stall, send broken JSON, not know a model. The completions
route's `echo` (prompt log-probabilities) is answered by `Script.echo`, a scorer a test plugs in (the real
local model, in the tests that need true values); without one, `echo` is ignored (a server that cannot echo).
The embeddings route is answered by `Script.embed` (the real local encoder, in the tests that need true
vectors); without one it is a 404, as on a server that serves no embeddings.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Script:
    """How the server behaves; tests change it between requests."""

    models: list[str] = field(default_factory=lambda: ["tiny-coder"])
    honour_n: bool = True
    logprobs: bool = True
    fail: list[int] = field(default_factory=list)  # status codes to answer with, one per request, before succeeding
    fail_forever: int | None = None
    delay_s: float = 0.0
    delay_after: int = 0  # answer this many requests at once before holding the rest `delay_s`
    # Or hold exactly the requests with these seeds: which request arrives first is the scheduler's choice, a seed is
    # the caller's (a test about the order of answers must not depend on the order of arrival)
    delay_seeds: frozenset[int] | None = None
    malformed: bool = False
    list_models: bool = True
    context: int | None = None  # answer 400 "exceeds context" when the prompt is longer (in characters)
    down_after: int | None = None  # after this many answered requests, drop every connection (a killed server)
    # text -> (token texts, log-probabilities with None first, character offsets)
    echo: Callable[[str], tuple[list[str], list[float | None], list[int]]] | None = None
    echo_shift: bool = False  # misalign the echoed values by one token (a buggy server)
    # texts -> one vector per text
    embed: Callable[[list[str]], list[list[float]]] | None = None
    # Scripted answers, one per choice in turn: (text, finish_reason). The chat route sends the text as the
    # message; the completions route as the continuation (cut at the first stop string, as servers do).
    answers: list[tuple[str, str]] = field(default_factory=list)
    # Answer a `stream` request as server-sent events (a chunk per line of each choice, then usage); otherwise such
    # a request gets plain JSON, as from a server that cannot stream. After the first chunk the server waits on
    # `stream_hold` (5 s at most) and records in `held` whether it was set: a client that shows text as it comes
    # sets it on hearing the first line.
    streams: bool = False
    stream_hold: threading.Event | None = None
    held: bool | None = None
    requests: list[dict[str, Any]] = field(default_factory=list)
    arrived: threading.Lock = field(default_factory=threading.Lock, repr=False)  # a request's place in `requests`
    answered: int = 0
    served: int = 0  # choices answered from `answers`


def _program(seed: int) -> str:
    return f"def f():\n    return {seed}\n"


class _Handler(BaseHTTPRequestHandler):
    script: Script

    def log_message(self, *args: Any) -> None:  # keep test output clean
        pass

    def _send(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(body)

    def _error(self, status: int, message: str) -> None:
        # retry-after-ms keeps the client's backoff short in tests.
        self._send(status, {"error": {"message": message, "type": "test"}}, {"retry-after-ms": "10"})

    def do_GET(self) -> None:
        script = self.script
        if self.path.rstrip("/").endswith("/models") and script.list_models:
            data = [{"id": m, "object": "model", "owned_by": "test", "created": 0} for m in script.models]
            self._send(200, {"object": "list", "data": data})
            return
        self._error(404, "not found")

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", 0))
        body = json.loads(self.rfile.read(length) or b"{}")
        if self._misbehaved(body):
            return
        if self.path.rstrip("/").endswith("/embeddings"):
            self._embeddings(body)
            return
        self._completions(body)

    def _misbehaved(self, body: dict[str, Any]) -> bool:
        """Record the request, hold it as the script says, and give the answer the script scripts instead of one
        (none, an error status, broken JSON, an unknown model's 404); whether it did (the request is then done)."""
        script = self.script
        if script.down_after is not None and script.answered >= script.down_after:
            self.close_connection = True  # no response at all, like a server that died
            return True
        with script.arrived:  # its own place, not the count when it looks: a later request may have come by then
            script.requests.append({"path": self.path, **body})
            place = len(script.requests)
        held = place > script.delay_after if script.delay_seeds is None else body.get("seed") in script.delay_seeds
        if script.delay_s and held:
            time.sleep(script.delay_s)
        if script.fail_forever:
            self._error(script.fail_forever, "the server is broken")
            return True
        if script.fail:
            self._error(script.fail.pop(0), "try again")
            return True
        if script.malformed:
            self._send(200, b'{"choices": [ this is not json')
            return True
        if body.get("model") not in script.models:
            self._error(404, f"The model `{body.get('model')}` does not exist")
            return True
        return False

    def _completions(self, body: dict[str, Any]) -> None:
        """Answer a chat or text completions request: `n` choices (1 where the script ignores `n`), as one JSON
        response or, when asked and the script streams, as server-sent events."""
        script = self.script
        text_in = json.dumps(body.get("messages") or body.get("prompt"))
        if script.context is not None and len(text_in) > script.context:
            self._error(400, f"Requested tokens ({len(text_in)}) exceed context window of {script.context}")
            return
        n = int(body.get("n") or 1) if script.honour_n else 1
        seed = int(body.get("seed") or 0)
        chat = self.path.endswith("/chat/completions")
        choices = [self._choice(body, index, seed, chat) for index in range(n)]
        script.answered += 1
        usage = {"prompt_tokens": len(text_in) // 4, "completion_tokens": 12 * n, "total_tokens": 0}
        if body.get("stream") and script.streams:
            self._send_events(choices, usage, body["model"], chat)
            return
        self._send(
            200,
            {
                "id": "x",
                "object": "chat.completion" if chat else "text_completion",
                "created": 0,
                "model": body["model"],
                "choices": choices,
                "usage": usage,
            },
        )

    def _choice(self, body: dict[str, Any], index: int, seed: int, chat: bool) -> dict[str, Any]:
        """Choice `index`: the script's next answer where it has some (an `echo` request aside), else the tiny
        model's program for `seed + index`, or the prompt's echo where the script scores prompts."""
        if self.script.answers and not body.get("echo"):
            return self._scripted_choice(body, index, chat)
        program = _program(seed + index)
        if chat:
            return self._chat_choice(body, index, program)
        if body.get("echo") and self.script.echo is not None:
            return self._echo_choice(body, index)
        return self._text_choice(body, index, program)

    def _scripted_choice(self, body: dict[str, Any], index: int, chat: bool) -> dict[str, Any]:
        """The script's next answer (they are taken in turn), cut at the first stop string on the text route."""
        script = self.script
        text, finish = script.answers[script.served % len(script.answers)]
        script.served += 1
        if not chat:
            cuts = [text.find(stop) for stop in body.get("stop") or [] if stop in text]
            text = text[: min(cuts)] if cuts else text
        message = {"role": "assistant", "content": text}
        choice: dict[str, Any] = {"index": index, "finish_reason": finish, "logprobs": None}
        choice.update({"message": message} if chat else {"text": text})
        return choice

    def _chat_choice(self, body: dict[str, Any], index: int, program: str) -> dict[str, Any]:
        """`program` in a fenced block after a line of prose, with a log-probability per line when asked."""
        content = f"Here it is:\n```python\n{program}```\n"
        choice: dict[str, Any] = {
            "index": index,
            "message": {"role": "assistant", "content": content},
            "finish_reason": "stop",
        }
        if self.script.logprobs and body.get("logprobs"):
            # One "token" per line; the code lines are likelier than the prose and fences.
            tokens = content.splitlines(keepends=True)
            values = [-0.1 if t.startswith(("def", "    ")) else -3.0 for t in tokens]
            choice["logprobs"] = {
                "content": [
                    {"token": t, "logprob": v, "bytes": None, "top_logprobs": []}
                    for t, v in zip(tokens, values, strict=True)
                ]
            }
        return choice

    def _echo_choice(self, body: dict[str, Any], index: int) -> dict[str, Any]:
        """The prompt itself with its tokens' log-probabilities from `Script.echo` (a token off when `echo_shift`)."""
        script = self.script
        assert script.echo is not None
        tokens, values, offsets = script.echo(body["prompt"])
        if script.echo_shift:
            values = [None, *values[:-1]]
        return {
            "index": index,
            "text": body["prompt"],
            "finish_reason": "length",
            "logprobs": {
                "tokens": tokens,
                "token_logprobs": values,
                "top_logprobs": None,
                "text_offset": offsets,
            },
        }

    def _text_choice(self, body: dict[str, Any], index: int, program: str) -> dict[str, Any]:
        """`program` continued past the closing fence, with a log-probability per line when asked."""
        text = program + "```\n\nmore text"
        choice: dict[str, Any] = {"index": index, "text": text, "finish_reason": "stop", "logprobs": None}
        if self.script.logprobs and body.get("logprobs") is not None:
            lines = program.splitlines(keepends=True)
            choice["logprobs"] = {
                "tokens": lines,
                "token_logprobs": [-0.2] * len(lines),
                "top_logprobs": None,
                "text_offset": [0] * len(lines),
            }
        return choice

    def _send_events(self, choices: list[dict[str, Any]], usage: dict[str, int], model: str, chat: bool) -> None:
        """`choices` as server-sent events: a chunk per line of each choice's text (its log-probabilities split
        alike: the scripted ones are one per line), the finish reason on the last, then a usage chunk."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        kind = "chat.completion.chunk" if chat else "text_completion"
        first = True
        for choice in choices:
            text = choice["message"]["content"] if chat else choice["text"]
            lines = text.splitlines(keepends=True) or [""]
            values = ((choice.get("logprobs") or {}).get("content" if chat else "token_logprobs")) or []
            for number, line in enumerate(lines):
                last = number == len(lines) - 1
                piece: dict[str, Any] = {
                    "index": choice["index"],
                    "finish_reason": choice["finish_reason"] if last else None,
                }
                piece.update({"delta": {"content": line}} if chat else {"text": line})
                value = values[number : number + 1]  # the scripted log-probabilities are one per line
                if value:
                    piece["logprobs"] = {"content": value} if chat else {"token_logprobs": value, "tokens": [line]}
                self._event({"id": "x", "object": kind, "created": 0, "model": model, "choices": [piece]})
                if first and self.script.stream_hold is not None:
                    self.script.held = self.script.stream_hold.wait(5)
                first = False
        self._event({"id": "x", "object": kind, "created": 0, "model": model, "choices": [], "usage": usage})
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()
        self.close_connection = True

    def _event(self, data: dict[str, Any]) -> None:
        self.wfile.write(f"data: {json.dumps(data)}\n\n".encode())
        self.wfile.flush()

    def _embeddings(self, body: dict[str, Any]) -> None:
        script = self.script
        if script.embed is None:
            self._error(404, "not found")
            return
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        if any(not text for text in texts):
            self._error(400, "input cannot be an empty string")
            return
        if body.get("encoding_format", "float") != "float":
            # Like llama.cpp's server before it learnt base64 (the `openai` client asks for base64 by default).
            self._error(400, f"encoding_format {body.get('encoding_format')!r} is not supported")
            return
        vectors = script.embed(texts)
        data = [{"object": "embedding", "index": i, "embedding": list(v)} for i, v in enumerate(vectors)]
        script.answered += 1
        usage = {"prompt_tokens": sum(len(t) // 4 for t in texts), "total_tokens": 0}
        self._send(200, {"object": "list", "data": data, "model": body["model"], "usage": usage})


class _Server(ThreadingHTTPServer):
    """A client that left (Ctrl-C, a cancelled request) while a held answer was pending is not an error here: the
    default would print its traceback on whatever stderr is current, later, inside another test's captured output."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):  # BrokenPipeError, ConnectionResetError, ...
            super().handle_error(request, client_address)


@contextmanager
def openai_server(script: Script | None = None) -> Iterator[tuple[str, Script]]:
    """Serve on a free port of 127.0.0.1; yields (base_url, script)."""
    script = script or Script()
    handler = type("Handler", (_Handler,), {"script": script})
    server = _Server(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1", script
    finally:
        server.shutdown()
        server.server_close()


def model_echo(backend: Any) -> Callable[[str], tuple[list[str], list[float | None], list[int]]]:
    """An `echo` scorer backed by a real local model: what a vLLM server returns for `echo=True, logprobs=0`."""
    import torch

    lock = threading.Lock()  # the server is threaded; one forward pass at a time

    def score(text: str) -> tuple[list[str], list[float | None], list[int]]:
        encoded = backend.tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        ids, spans = encoded["input_ids"], encoded["offset_mapping"]
        with lock, torch.inference_mode():
            logits = backend.lm(input_ids=torch.tensor([ids])).logits[0]
        logp = torch.log_softmax(logits.float(), dim=-1)
        values: list[float | None] = [None] + [logp[t - 1, ids[t]].item() for t in range(1, len(ids))]
        return [text[a:b] for a, b in spans], values, [a for a, _ in spans]

    return score


def model_embed(encoder: Any, scale: float = 1.0) -> Callable[[list[str]], list[list[float]]]:
    """An `embed` answerer backed by a real local encoder: what an embeddings server returns for its texts
    (`scale` != 1 answers vectors that are not unit length, as some servers do)."""
    lock = threading.Lock()  # the server is threaded; one forward pass at a time

    def embed(texts: list[str]) -> list[list[float]]:
        with lock:
            vectors = encoder.encode(texts)
        return [[float(x) * scale for x in row] for row in vectors]

    return embed
