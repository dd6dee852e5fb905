"""A resumable on-disk cache of model outputs, keyed by everything that determines them.

Each entry is one JSON line appended and flushed at once, so an interrupted run keeps all finished work
and a re-run (or a new ranker over the same samples) asks the model for nothing it already answered.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from assistant.paths import atomic_write_text


def cache_key(**parts: Any) -> str:
    """A stable key: sha256 of the parts as canonical JSON (model, prompt, sampling params, seed...)."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


class JsonlCache:
    """key → JSON value, backed by an append-only JSONL file (a torn last line is ignored)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.entries: dict[str, Any] = {}
        self._torn = False  # the file ends mid-line: the next entry must start on a new line
        if self.path.exists():
            line = ""
            with open(self.path, encoding="utf-8") as handle:
                for line in handle:
                    try:
                        record = json.loads(line)
                    except json.JSONDecodeError:
                        continue  # a line cut short by an interruption
                    self.entries[record["key"]] = record["value"]
            self._torn = line != "" and not line.endswith("\n")

    def __contains__(self, key: str) -> bool:
        return key in self.entries

    def get(self, key: str) -> Any:
        return self.entries.get(key)

    def put(self, key: str, value: Any) -> None:
        self.entries[key] = value
        with open(self.path, "a", encoding="utf-8") as handle:
            if self._torn:
                handle.write("\n")
                self._torn = False
            handle.write(json.dumps({"key": key, "value": value}, ensure_ascii=False) + "\n")
            handle.flush()
            os.fsync(handle.fileno())

    def discard(self, keys: Iterable[str]) -> int:
        """Drop these entries, rewriting the file atomically (only if one is held); returns how many went."""
        gone = [key for key in dict.fromkeys(keys) if key in self.entries]
        if gone:
            for key in gone:
                del self.entries[key]
            lines = (json.dumps({"key": k, "value": v}, ensure_ascii=False) + "\n" for k, v in self.entries.items())
            atomic_write_text(self.path, "".join(lines))
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
