"""A resumable on-disk cache of model outputs, keyed by everything that determines them.

Each entry is one JSON line appended and flushed at once, so an interrupted run keeps all finished work
and a re-run (or a new ranker over the same samples) asks the model for nothing it already answered.

A cache may be kept gzip-compressed (`samples.jsonl.gz` beside, or instead of, `samples.jsonl`), as the
committed results folders keep their raw model outputs: it is read transparently, and a run that resumes it
appends each new entry as its own gzip member (a gzip file may hold several; readers see one stream), so the
file stays one valid `.gz` that `zcat` reads.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import zlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from assistant.paths import atomic_write_bytes, atomic_write_text

GZ_SUFFIX = ".gz"


def jsonl_exists(path: str | Path) -> bool:
    """Whether the JSONL store `path` (`x.jsonl`) exists, plain or gzip-compressed (`x.jsonl.gz`).

    Every reader of a results folder asks this before opening the store with `JsonlCache`, which reads either
    form, so a folder whose raw caches were compressed for keeping reads as before."""
    path = Path(path)
    return path.is_file() or path.with_name(path.name + GZ_SUFFIX).is_file()


def read_jsonl_lines(path: str | Path) -> list[Any]:
    """Every JSON line of `path` (`x.jsonl`), plain or gzip-compressed (`x.jsonl.gz`, read when the plain file is
    absent): a results folder's list of records, which (unlike a cache) has no keys."""
    path = Path(path)
    raw = path.read_bytes() if path.is_file() else gzip.decompress(path.with_name(path.name + GZ_SUFFIX).read_bytes())
    return [json.loads(line) for line in raw.decode("utf-8").splitlines() if line.strip()]


def cache_key(**parts: Any) -> str:
    """A stable key: sha256 of the parts as canonical JSON (model, prompt, sampling params, seed...)."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


def gzip_bytes(data: bytes) -> bytes:
    """`data` as one gzip member with no timestamp or name: the same bytes always compress the same."""
    return gzip.compress(data, compresslevel=9, mtime=0)


def _gzip_members(raw: bytes) -> tuple[bytes, int]:
    """The text of a (multi-member) gzip file, and the byte offset where its last complete member ends.

    A member cut short by an interruption (or garbage after the last member) is left out; appending resumes at
    the returned offset."""
    text, offset = [], 0
    while offset < len(raw):
        inflate = zlib.decompressobj(wbits=31)
        try:
            chunk = inflate.decompress(raw[offset:])
        except zlib.error:
            break
        if not inflate.eof:
            break  # a torn member
        text.append(chunk)
        offset = len(raw) - len(inflate.unused_data)
    return b"".join(text), offset


def _entries(lines: Iterable[bytes]) -> Iterator[tuple[str, Any]]:
    for line in lines:
        try:
            record = json.loads(line.decode("utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError):
            continue  # a line cut short by an interruption (perhaps inside a character)
        yield record["key"], record["value"]


class JsonlCache:
    """key → JSON value, backed by an append-only JSONL file (a torn last line is ignored).

    `path` names the plain file (`x.jsonl`). When only `x.jsonl.gz` exists, that file is the cache: read and
    appended to in gzip. When both exist, the `.gz` is read first and the plain file after it (its entries win)
    and new entries go to the plain file.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.entries: dict[str, Any] = {}
        self._torn = False  # the plain file ends mid-line: the next entry must start on a new line
        self._gz_end: int | None = None  # where the compressed file's last complete member ends
        packed = self.compressed_path
        if packed.exists():
            raw = packed.read_bytes()
            text, self._gz_end = _gzip_members(raw)
            if self._gz_end == len(raw):
                self._gz_end = None  # nothing torn: appending needs no truncation
            lines = text.split(b"\n")  # JSON escapes newlines: "\n" ends every record
            self.entries.update(_entries(line for line in lines if line))
        if self.path.exists():
            line = b""
            with open(self.path, "rb") as handle:  # bytes: a torn last line may end inside a character
                for line in handle:
                    self.entries.update(_entries([line]))
            self._torn = line != b"" and not line.endswith(b"\n")

    @property
    def compressed_path(self) -> Path:
        """The gzip-compressed form of the cache (`x.jsonl.gz`)."""
        return self.path.with_name(self.path.name + GZ_SUFFIX)

    @property
    def file(self) -> Path:
        """The file new entries are appended to: the plain file, unless the cache exists only compressed."""
        return self.compressed_path if self.compressed_path.exists() and not self.path.exists() else self.path

    def __contains__(self, key: str) -> bool:
        return key in self.entries

    def get(self, key: str) -> Any:
        return self.entries.get(key)

    def put(self, key: str, value: Any) -> None:
        self.entries[key] = value
        line = json.dumps({"key": key, "value": value}, ensure_ascii=False) + "\n"
        if self.file != self.path:
            with open(self.compressed_path, "r+b") as handle:
                if self._gz_end is not None:  # drop a member an interruption cut short
                    handle.truncate(self._gz_end)
                    self._gz_end = None
                handle.seek(0, os.SEEK_END)
                handle.write(gzip_bytes(line.encode("utf-8")))
                handle.flush()
                os.fsync(handle.fileno())
            return
        with open(self.path, "a", encoding="utf-8") as handle:
            if self._torn:
                handle.write("\n")
                self._torn = False
            handle.write(line)
            handle.flush()
            os.fsync(handle.fileno())

    def _text(self) -> str:
        return "".join(json.dumps({"key": k, "value": v}, ensure_ascii=False) + "\n" for k, v in self.entries.items())

    def discard(self, keys: Iterable[str]) -> int:
        """Drop these entries, rewriting the file atomically (only if one is held); returns how many went.

        A compressed cache is rewritten compressed (one member). With both files, everything is rewritten into
        the `.gz` and the plain file removed after (an interruption between the two can bring back a dropped
        entry of the plain file; `supersede` at the next run's start drops it again)."""
        gone = [key for key in dict.fromkeys(keys) if key in self.entries]
        if gone:
            for key in gone:
                del self.entries[key]
            if self.compressed_path.exists():
                atomic_write_bytes(self.compressed_path, gzip_bytes(self._text().encode("utf-8")))
                self._gz_end = None
                if self.path.exists():
                    self.path.unlink()
            else:
                atomic_write_text(self.path, self._text())
            self._torn = False
        return len(gone)


def supersede(store: JsonlCache, current: Mapping[tuple[str, str], str]) -> int:
    """Keep one record per (task_id, strategy) in a results store: drop those that `current` replaces.

    `current` maps each (task, strategy) a run is about to record to its record key. An older record for the
    same pair under another key (say, `lail` before the retriever was retrained: its prompts, hence its key,
    differ) would otherwise be reported beside the new one. Pairs the run does not touch are kept, so a
    results folder can still grow by strategies and tasks. Returns how many records were dropped.
    """
    stale = [
        key for key, record in store.entries.items() if current.get((record["task_id"], record["strategy"]), key) != key
    ]
    return store.discard(stale)


class LayeredCache:
    """A cache that also reads earlier runs' caches: lookups try `own`, then each of `bases` in turn; new
    entries go to `own` only, so an earlier run's folder is never written to.

    This is how a run extends another (`eval codegen --extend`): its samples and the tests agree wrote are
    reused, and the new folder keeps only what it added. A base may be a plain mapping (values recovered from
    an earlier run's records).
    """

    def __init__(self, own: JsonlCache, bases: Sequence[JsonlCache | Mapping[str, Any]] = ()) -> None:
        self.own = own
        self.bases = list(bases)

    def __contains__(self, key: str) -> bool:
        return key in self.own or any(key in base for base in self.bases)

    def get(self, key: str) -> Any:
        for cache in (self.own, *self.bases):
            if key in cache:
                return cache.get(key)
        return None

    def put(self, key: str, value: Any) -> None:
        self.own.put(key, value)
