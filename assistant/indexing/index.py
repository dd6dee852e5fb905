"""The on-disk index: examples + BM25 + dense vectors (faiss), updated incrementally by git blob hash.

Layout of an index directory (`.assist/index/` in a repo, or under the user cache for a bank)::

    meta.json        format version, encoder, source, {path: blob} of indexed files, counts
    examples.jsonl   one Example per line, row i ↔ vector i
    vectors.faiss    faiss IndexFlatIP of L2-normalised embeddings (cosine similarity)

The directory is written beside the old one and swapped in with renames, so an interrupted run leaves
the previous index intact. Writers hold an exclusive `fcntl.flock` on `<dir>.lock` beside it for the whole
read-update-save, so two processes indexing at once take turns instead of renaming each other's directories
away; readers take no lock unless a read fails while a writer is at work (then they wait and read again).
BM25 is rebuilt from the examples at load (about a second for 16,000).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import hashlib
import json
import logging
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from rank_bm25 import BM25Okapi

from assistant.code.examples import Example, read_bank
from assistant.code.extract import extract_file, git_blob_hash, read_repo_file, source_text
from assistant.code.tokenize import tokenize
from assistant.errors import AssistError, UsageError
from assistant.indexing.files import name_some, repo_files, utf8_name
from assistant.indexing.fragments import split_fragments

if TYPE_CHECKING:  # faiss loads when vectors are searched, saved or read (`train ... --corpus` needs none of it)
    import faiss
from assistant.paths import GIT, cache_dir, committed_link, repo_dir
from assistant.progress import Progress

log = logging.getLogger("assistant")

FORMAT_VERSION = 1
UNCHANGED = "the index there before is unchanged"
# Said by `assist index`, `doctor` and the source's description when the repo's index holds nothing to retrieve.
HOLDS_NO_FUNCTIONS = "the repo's index holds no functions"
NO_FUNCTIONS = f"{HOLDS_NO_FUNCTIONS}; retrieving from the default bank"
NO_DEMONSTRATIONS = f"{HOLDS_NO_FUNCTIONS}, only 20-line fragments: generate finds no demonstrations in it"


def extraction_digest() -> str:
    """A digest of the code that turns a file into functions and fragments. An index whose meta.json names
    another (made by an older assist) has every file read again, so a fixed extractor reaches files that did not
    change; vectors are still reused wherever an example's text is the same."""
    from assistant.code import definitions, edit, extract
    from assistant.indexing import fragments

    digest = hashlib.sha256()
    for module in (extract, definitions, edit, fragments):
        digest.update(Path(module.__file__ or "").read_bytes())
    return digest.hexdigest()[:16]


def _no_progress(stage: str, done: int, total: int) -> None:
    return None


# Index directories whose lock this thread holds, so nested calls (index_repo -> save) do not lock twice:
# flock locks taken through two open() calls conflict even inside one process.
_held = threading.local()


def lock_path(directory: Path) -> Path:
    """The lock file guarding an index directory: `<dir>.lock`, beside it (it must outlive the swaps)."""
    directory = Path(directory)
    return directory.with_name(directory.name + ".lock")


@contextlib.contextmanager
def index_lock(directory: Path, shared: bool = False) -> Iterator[None]:
    """Hold `fcntl.flock` on the index's lock file: exclusive for writers (for a whole read-update-save),
    shared for a reader that must wait for a writer to finish; re-entrant within a thread.

    A reader that cannot create the lock file (a read-only or missing folder) goes on without it.
    """
    key = str(Path(directory).absolute())
    held: dict[str, int] = _held.__dict__.setdefault("locks", {})
    if key in held:
        yield
        return
    path = lock_path(Path(directory))
    try:
        if not shared:  # a reader creates no folders
            path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, (os.O_RDONLY if shared else os.O_RDWR) | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError:
        if not shared:
            raise
        yield
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
        held[key] = fd
        try:
            yield
        finally:
            del held[key]
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def _writer_active(directory: Path) -> bool:
    """Whether another thread or process holds the index's lock (is indexing or saving it) right now."""
    if str(Path(directory).absolute()) in _held.__dict__.get("locks", {}):
        return False  # this thread is the writer: waiting for ourselves would never end
    try:
        fd = os.open(lock_path(Path(directory)), os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def _remove_leftovers(directory: Path) -> None:
    """Delete the `<dir>.tmp-PID`, `.old-PID` and `.trash-PID` folders a killed writer left (call with the lock
    held)."""
    if not directory.parent.is_dir():
        return
    for sibling in directory.parent.iterdir():
        name = sibling.name
        if name.startswith(tuple(directory.name + kind for kind in (".tmp-", ".old-", ".trash-"))) and sibling.is_dir():
            shutil.rmtree(sibling, ignore_errors=True)


class TextEncoder:
    """What the index needs from an encoder (see `assistant.backends.encoder.Encoder`)."""

    name: str
    dim: int

    def encode(self, texts: Sequence[str], progress: Callable[[int, int], None] | None = None) -> np.ndarray:
        raise NotImplementedError


def embedding_text(example: Example) -> str:
    """The text embedded for an example: its requirement (what a query will look like); a fragment's code."""
    return example.code if example.kind == "fragment" else example.requirement


def bm25_text(example: Example) -> str:
    """The text BM25 indexes: the requirement plus the function's name; a fragment's code."""
    return example.code if example.kind == "fragment" else f"{example.requirement} {example.name}"


@dataclass
class IndexStats:
    """What an indexing run did, for the user and for scripts."""

    files: int = 0
    files_parsed: int = 0
    files_removed: int = 0
    files_untracked: int = 0  # of `files`: untracked, and not ignored either
    files_skipped: int = 0  # listed, but a symlink, outside the repo once resolved, or not a regular file
    files_unparsed: int = 0  # Python that does not parse (or nests too deep to): no functions from it
    skipped_files: list[str] = field(default_factory=list)  # the `files_skipped`, by name
    unparsed_files: list[str] = field(default_factory=list)  # the `files_unparsed`, by name
    untracked_left_out: list[str] = field(default_factory=list)  # untracked files inside a virtual environment
    environments: list[str] = field(default_factory=list)  # those environments' folders (`venv/`)
    rebuilt: bool = False  # the old index was unreadable and was rebuilt from scratch
    examples: int = 0
    fragments: int = 0  # 20-line windows of the files, indexed beside the functions
    fragments_embedded: int = 0
    embedded: int = 0
    reused: int = 0
    parse_s: float = 0.0
    bm25_s: float = 0.0
    encode_s: float = 0.0
    total_s: float = 0.0
    location: str = ""

    def to_json(self) -> dict:
        return dict(self.__dict__)


@dataclass
class Index:
    """Examples with their BM25 and dense representations, ready to search."""

    examples: list[Example]
    vectors: np.ndarray
    meta: dict = field(default_factory=dict)
    _bm25: BM25Okapi | None = field(default=None, repr=False)
    _faiss: faiss.Index | None = field(default=None, repr=False)

    def __len__(self) -> int:
        return len(self.examples)

    @property
    def encoder_name(self) -> str:
        return str(self.meta.get("encoder", ""))

    @property
    def bm25(self) -> BM25Okapi:
        if self._bm25 is None:
            self._bm25 = build_bm25(self.examples)
        return self._bm25

    @property
    def dense(self) -> faiss.Index:
        if self._faiss is None:
            self._faiss = _faiss_index(self.vectors)
        return self._faiss

    def dense_search(self, vectors: np.ndarray, depth: int) -> tuple[np.ndarray, np.ndarray]:
        """faiss top-`depth` (scores, rows) for each query vector.

        A single query runs on one faiss thread: its OpenMP pool would otherwise contend with torch's, which
        has just encoded the query, and on 2 cores that doubled the p50 (18 ms against 9 ms for 15,668 rows).
        """
        import faiss

        if len(vectors) != 1:
            return self.dense.search(vectors, depth)
        threads = faiss.omp_get_max_threads()
        faiss.omp_set_num_threads(1)
        try:
            return self.dense.search(vectors, depth)
        finally:
            faiss.omp_set_num_threads(threads)

    def save(self, directory: Path) -> None:
        """Write the index to `directory`, replacing what was there only once everything is written.

        Holds the index's lock, so concurrent savers take turns; leftovers of writers that died are removed.
        """
        directory = Path(directory)
        try:
            directory.parent.mkdir(parents=True, exist_ok=True)
            with index_lock(directory):
                _remove_leftovers(directory)
                self._save_locked(directory)
        except OSError as exc:  # a full disk, a read-only cache: one line, and the old index is still whole
            raise AssistError(f"cannot write the index to {directory}: {exc.strerror or exc}; {UNCHANGED}") from None

    def _save_locked(self, directory: Path) -> None:
        staging = directory.with_name(directory.name + f".tmp-{os.getpid()}")
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir()
        try:
            self._write_files(staging, directory)
            old = directory.with_name(directory.name + f".old-{os.getpid()}")
            if directory.exists():
                os.replace(directory, old)
            os.replace(staging, directory)
            if old.exists():  # renamed before it is deleted: a run killed mid-delete leaves no half `.old-` behind
                trash = directory.with_name(directory.name + f".trash-{os.getpid()}")
                os.replace(old, trash)
                shutil.rmtree(trash, ignore_errors=True)
        finally:
            shutil.rmtree(staging, ignore_errors=True)

    def _write_files(self, staging: Path, directory: Path) -> None:
        """The index's three files, written into `staging` (before anything replaces `directory`)."""
        import faiss

        with open(staging / "examples.jsonl", "w", encoding="utf-8") as handle:
            for example in self.examples:
                handle.write(json.dumps(example.to_json(), ensure_ascii=False) + "\n")
        try:
            faiss.write_index(self.dense, str(staging / "vectors.faiss"))
        except RuntimeError as exc:  # faiss reports a full disk as a multi-line "Error in ... write error"
            last = str(exc).strip().splitlines()[-1:] or ["write error"]
            raise AssistError(f"cannot write the index to {directory}: faiss: {last[0]}; {UNCHANGED}") from None
        meta = dict(self.meta, version=FORMAT_VERSION, count=len(self.examples))
        (staging / "meta.json").write_text(json.dumps(meta, indent=1), encoding="utf-8")

    @classmethod
    def load(cls, directory: Path) -> Index:
        """Read an index written by :meth:`save`; a damaged one gives a UsageError saying how to rebuild.

        Readers take no lock (a long indexing run must not hold up `generate`); a read that fails while a
        writer holds the lock may have met its swap, so it waits for the writer and reads once more.
        """
        directory = Path(directory)
        try:
            return cls._read(directory)
        except UsageError:
            if not _writer_active(directory):
                raise
        with index_lock(directory, shared=True):
            return cls._read(directory)

    @classmethod
    def _read(cls, directory: Path) -> Index:
        import faiss

        folder = None
        try:
            # All three files through one handle on the folder: a writer swapping a new folder in meanwhile
            # cannot pair these examples with its vectors (same count, other order).
            folder = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)

            def opener(name: str, flags: int) -> int:
                return os.open(name, flags, dir_fd=folder)

            with open("meta.json", encoding="utf-8", opener=opener) as handle:
                meta = _read_meta(handle.read())
            with open("examples.jsonl", encoding="utf-8", opener=opener) as handle:
                examples = [Example.from_json(json.loads(line)) for line in handle if line.strip()]
            with open("vectors.faiss", "rb", opener=opener) as handle:
                raw = np.frombuffer(handle.read(), dtype="uint8")
            try:
                dense = faiss.deserialize_index(raw)
            except RuntimeError:  # faiss's message is a C++ assertion; say what it means
                raise ValueError("vectors.faiss is truncated or corrupt") from None
            if dense.ntotal != len(examples):
                raise ValueError(f"{dense.ntotal} vectors for {len(examples)} examples")
            if meta.get("dim", dense.d) != dense.d:
                raise ValueError(f"vectors of {dense.d} dimensions, meta.json says {meta['dim']}")
            vectors = dense.reconstruct_n(0, dense.ntotal) if dense.ntotal else np.zeros((0, dense.d), "float32")
        except (OSError, ValueError, RuntimeError, KeyError, TypeError) as exc:
            reason = " ".join(str(exc).split())[:200]  # one line, whatever the library said
            raise UsageError(
                f"the index at {directory} is unreadable ({reason}); rebuild it with `assist index`"
            ) from None
        finally:
            if folder is not None:
                os.close(folder)
        return cls(examples=examples, vectors=vectors, meta=meta, _faiss=dense)


def _read_meta(text: str) -> dict:
    """meta.json's `text`, checked for the shape the code relies on (a ValueError says what is wrong)."""
    meta = json.loads(text)
    if not isinstance(meta, dict):
        raise ValueError(f"meta.json holds a {type(meta).__name__}, not an object")
    if meta.get("version") != FORMAT_VERSION:
        raise ValueError(f"format version {meta.get('version')!r}, expected {FORMAT_VERSION}")
    for key in ("files", "unparsed"):
        files = meta.get(key, {})
        if not isinstance(files, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in files.items()):
            raise ValueError(f"meta.json's {key!r} is not a map of paths to blob hashes")
    for key, kind in (("encoder", str), ("source", dict), ("dim", int), ("count", int)):
        if key in meta and not isinstance(meta[key], kind):
            raise ValueError(f"meta.json's {key!r} is not a {kind.__name__}")
    return meta


def build_bm25(examples: Sequence[Example]) -> BM25Okapi:
    """BM25 over the examples' requirement and name, with the identifier-aware tokenizer."""
    corpus = [tokenize(bm25_text(e)) or ["<empty>"] for e in examples]
    if not corpus:
        corpus = [["<empty>"]]
    return BM25Okapi(corpus)


def _faiss_index(vectors: np.ndarray) -> faiss.Index:
    import faiss

    dense = faiss.IndexFlatIP(int(vectors.shape[1]))
    if len(vectors):
        dense.add(np.ascontiguousarray(vectors, dtype="float32"))
    return dense


def _text_key(encoder_name: str, text: str) -> str:
    return hashlib.sha1(f"{encoder_name}\0{text}".encode()).hexdigest()


def _build(
    examples: list[Example],
    encoder: TextEncoder,
    previous: Index | None,
    meta: dict,
    stats: IndexStats,
    progress: Progress,
) -> Index:
    """Embed what the previous index has not embedded already (same encoder, same text) and assemble."""
    reuse: dict[str, np.ndarray] = {}
    if previous is not None and previous.encoder_name == encoder.name:
        for example, vector in zip(previous.examples, previous.vectors, strict=True):
            reuse[_text_key(encoder.name, embedding_text(example))] = vector
    keys = [_text_key(encoder.name, embedding_text(e)) for e in examples]
    missing = sorted({k: i for i, k in enumerate(keys) if k not in reuse}.values())
    stats.reused = len(examples) - len([i for i, k in enumerate(keys) if k not in reuse])
    started = time.perf_counter()
    if missing:
        new = encoder.encode([embedding_text(examples[i]) for i in missing], lambda d, t: progress("encode", d, t))
        for i, vector in zip(missing, new, strict=True):
            reuse[keys[i]] = vector
    stats.encode_s = time.perf_counter() - started
    stats.embedded = len(missing)
    vectors = (
        np.stack([reuse[k] for k in keys]).astype("float32") if examples else np.zeros((0, encoder.dim), "float32")
    )
    started = time.perf_counter()
    index = Index(examples=examples, vectors=vectors, meta=dict(meta, encoder=encoder.name, dim=encoder.dim))
    index.bm25  # noqa: B018 - build now so its cost is measured here, not at the first query
    stats.bm25_s = time.perf_counter() - started
    stats.examples = len(examples)
    return index


def build_index(
    examples: Sequence[Example],
    encoder: TextEncoder,
    progress: Progress = _no_progress,
    source: dict | None = None,
    cache: Path | None = None,
) -> Index:
    """An index over `examples`, e.g. an evaluation's demonstration pool: in memory, or kept in `cache` when
    given (read back to reuse the vectors of texts it already embedded, and saved again).

    `source` says where the examples came from (kept in `meta`, named in trained artifacts' provenance)."""
    meta = {"source": source or {"kind": "memory"}}
    previous = _previous_or_none(cache)[0] if cache is not None else None
    index = _build(list(examples), encoder, previous, meta, IndexStats(), progress)
    if cache is not None:
        index.save(cache)
    return index


def repo_root(path: str | Path, outside: str = "") -> Path:
    """The top of the git work tree containing `path`, or a UsageError when it is not in one.

    Git runs with :data:`assistant.paths.GIT`: a folder a repository commits to look like a bare repository (its
    own HEAD, objects/, refs/ and config) is never taken for one; and a folder reached through a link the working
    folder's repository commits gives that work tree (:func:`assistant.paths.committed_link`)."""
    path = Path(path).expanduser()
    if not path.exists():
        raise UsageError(f"{path} does not exist")
    folder = path if path.is_dir() else path.parent
    linked = committed_link(folder)  # a link the working folder's repository commits: that repository, not the other
    if linked is not None:
        return linked
    try:
        found = subprocess.run(
            [*GIT, "rev-parse", "--is-bare-repository", "--show-toplevel"],
            cwd=folder,
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise UsageError(f"git could not be run in {folder.resolve()} ({exc})") from None
    bare, _, top = found.stdout.partition("\n")
    top = top[:-1] if top.endswith("\n") else top  # the path itself may hold a newline
    if found.returncode != 0 and "safe.bareRepository" in found.stderr:
        raise UsageError(f"{folder.resolve()} is laid out as a bare git repository; assist does not use one it finds")
    if bare == "true":
        raise UsageError(f"{path.resolve()} is a bare git repository; assist needs a work tree")
    if found.returncode != 0 or not top:
        raise UsageError(f"{path.resolve()} is not inside a git repository{outside}")
    return Path(top)


def repo_index_dir(root: Path, *, create: bool = False) -> Path:
    """Where a repo's index lives: `.assist/index`, in a folder git ignores by itself (see
    :func:`assistant.paths.repo_dir`; only `create` makes the folder: looking for an index writes nothing)."""
    return repo_dir(root, create=create) / "index"


def load_repo_index(root: Path, *, fragments: bool = False) -> Index | None:
    """The index `assist index` built in the repo at `root` (its functions, or its 20-line `fragments`), None
    when there is none yet. Its source is pinned to `root`: a meta.json the repo ships does not get to say
    where the models trained on it are written."""
    directory = repo_index_dir(root)
    index = load_fragments(directory) if fragments else load_existing(directory)
    if index is not None:
        index.meta["source"] = {**index.meta.get("source", {}), "kind": "repo", "path": str(root)}
    return index


def bank_index_dir(bank: Path) -> Path:
    """Where a bank's index lives: in the user cache, keyed by the bank's absolute path."""
    key = hashlib.sha256(str(Path(bank).resolve()).encode()).hexdigest()[:16]
    return cache_dir() / "banks" / f"{Path(bank).stem}-{key}"


def load_existing(directory: Path) -> Index | None:
    """The index in `directory`, or None when there is none yet (one a writer killed between its two renames
    left as `<dir>.old-PID` is put back first)."""
    if not (directory / "meta.json").exists():
        _recover_interrupted(directory)
    return Index.load(directory) if (directory / "meta.json").exists() else None


def _recover_interrupted(directory: Path) -> None:
    """Put back the index a writer moved aside (`<dir>.old-PID`) and was killed before replacing."""
    if not directory.parent.is_dir():
        return
    prefix = directory.name + ".old-"
    aside = [p for p in directory.parent.iterdir() if p.name.startswith(prefix) and (p / "meta.json").is_file()]
    if not aside:
        return
    try:
        with index_lock(directory):  # a writer at work holds it: its own swap then completes first
            if not directory.exists():
                newest = max(aside, key=lambda p: (p / "meta.json").stat().st_mtime)
                os.replace(newest, directory)
                log.warning("put back the index at %s that an interrupted run had moved aside", directory)
    except OSError:
        return  # a read-only folder: nothing to put back


def _previous_or_none(directory: Path) -> tuple[Index | None, bool]:
    """The index to update in place, and whether there was one that could not be read.

    Indexing is how an unreadable index gets fixed (the error says to run `assist index`), so a damaged one
    is reported in one line and rebuilt from scratch rather than refused.
    """
    try:
        return load_existing(directory), False
    except UsageError as exc:
        log.warning("%s; rebuilding it from scratch", str(exc).split("; rebuild it")[0])
        return None, True


def fragments_dir(directory: Path) -> Path:
    """Where a repo index's 20-line fragments live: beside it (`.assist/fragments`)."""
    return directory.with_name("fragments")


def index_repo(path: str | Path, encoder: TextEncoder, progress: Progress = _no_progress) -> tuple[Index, IndexStats]:
    """Index the functions in the repo containing `path` (the files git tracks, and the untracked ones it does not
    ignore: :func:`assistant.indexing.files.repo_files`), and every file's 20-line fragments
    (:mod:`assistant.indexing.fragments`, saved beside it); incremental.

    Files whose blob hash matches the previous index are not even re-read for parsing: their examples and
    vectors are carried over. Changed files are re-parsed; of their functions and fragments, only those whose
    text was not embedded before are sent to the encoder.
    """
    started = time.perf_counter()
    root = repo_root(path)
    directory = repo_index_dir(root, create=True)
    with index_lock(directory):  # one indexer at a time: read, update and save as one step
        return _index_repo_locked(root, directory, encoder, progress, started)


def holds_nothing(root: Path, index: Index) -> bool:
    """Whether the repo index `index` of the repo at `root` holds no functions and no fragments (a repo with no
    Python files yet): retrieval then falls back to the default bank, as if the repo were not indexed."""
    if len(index):
        return False
    with contextlib.suppress(UsageError):  # unreadable fragments serve no retrieval either
        fragments = load_repo_index(root, fragments=True)
        return fragments is None or len(fragments) == 0
    return True


def repo_notes(stats: IndexStats) -> list[str]:
    """What a repo's indexing run should tell the user beyond its counts, one line each: the files it could not
    read or parse, by name; untracked files left out; and where retrieval goes when the index holds no functions."""
    notes = []
    if stats.unparsed_files:
        names = name_some(stats.unparsed_files)
        notes.append(f"skipped {len(stats.unparsed_files)} file(s) that do not parse: {names}")
    if stats.skipped_files:
        names = name_some(stats.skipped_files)
        why = "links, not regular files or not named in UTF-8"
        notes.append(f"left out {len(stats.skipped_files)} file(s) that are {why}: {names}")
    if stats.untracked_left_out:
        where = ", ".join(stats.environments)
        notes.append(
            f"left out {len(stats.untracked_left_out)} untracked file(s) inside a virtual environment ({where}); "
            "add it to .gitignore"
        )
    if stats.examples == 0:
        notes.append(NO_FUNCTIONS if stats.fragments == 0 else NO_DEMONSTRATIONS)
    return notes


def load_fragments(directory: Path) -> Index | None:
    """The fragments indexed beside the repo index in `directory`, or None when there are none yet."""
    return load_existing(fragments_dir(directory))


@dataclass
class _Carried:
    """What the previous index knows of the files, by path, for the ones whose blob is the same now."""

    files: dict[str, str]  # {path: blob} of the functions' index, where extraction can be trusted
    fragment_files: dict[str, str]  # the same for the fragments' index
    unparsed: dict[str, str]  # {path: blob} of the files that did not parse
    functions: dict[str, list[Example]]
    fragments: dict[str, list[Example]]


def _carried(previous: Index | None, previous_fragments: Index | None, extraction: str) -> _Carried:
    """What of the previous functions' and fragments' indexes an update can reuse, by path."""

    def known_files(index: Index | None) -> dict[str, str]:  # {path: blob} that extraction can be trusted for
        return dict(index.meta.get("files", {})) if index and index.meta.get("extraction") == extraction else {}

    # An index from before files that do not parse were remembered has every file read once more, so that the
    # ones that still do not parse are found and reported again (their vectors are reused all the same).
    trusted = previous if previous is not None and "unparsed" in previous.meta else None
    carried = _Carried(known_files(trusted), known_files(previous_fragments), {}, {}, {})
    carried.unparsed = dict(trusted.meta["unparsed"]) if trusted is not None else {}
    for old, into in ((previous, carried.functions), (previous_fragments, carried.fragments)):
        for example in old.examples if old is not None else []:
            into.setdefault(example.path, []).append(example)
    return carried


def _index_repo_locked(
    root: Path, directory: Path, encoder: TextEncoder, progress: Progress, started: float
) -> tuple[Index, IndexStats]:
    previous, rebuilt = _previous_or_none(directory)
    previous_fragments, _ = _previous_or_none(fragments_dir(directory))
    listing = repo_files(root)
    paths = listing.indexed
    stats = IndexStats(files=len(paths), location=str(directory), rebuilt=rebuilt)
    stats.files_untracked, stats.untracked_left_out = len(listing.untracked), listing.left_out
    stats.environments = listing.environments
    extraction = extraction_digest()
    old = _carried(previous, previous_fragments, extraction)

    files: dict[str, str] = {}
    unparsed: dict[str, str] = {}
    examples: list[Example] = []
    fragments: list[Example] = []
    parse_started = time.perf_counter()
    for number, rel in enumerate(paths, start=1):
        progress("parse", number, len(paths))
        # Only regular files inside the repo: a tracked symlink may point anywhere (~/.ssh, another checkout).
        data = read_repo_file(root, rel) if utf8_name(rel) else None
        if data is None:
            if os.path.lexists(root / rel):  # a deleted file is simply gone; name the refused ones
                stats.skipped_files.append(rel)
            continue
        blob = files[rel] = git_blob_hash(data)
        same = old.files.get(rel) == blob
        same_fragments = old.fragment_files.get(rel) == blob
        if same and old.unparsed.get(rel) == blob:  # still does not parse: reported again, not parsed again
            unparsed[rel] = blob
        if same and same_fragments:
            examples.extend(old.functions.get(rel, []))
            fragments.extend(old.fragments.get(rel, []))
            continue
        stats.files_parsed += 1
        text = source_text(rel, data)
        found = old.functions.get(rel, []) if same else extract_file(Path(rel).suffix, text, rel, blob)
        if found is None:
            unparsed[rel] = blob
        examples.extend(found or [])
        fragments.extend(old.fragments.get(rel, []) if same_fragments else split_fragments(text, rel, blob))
    stats.parse_s = time.perf_counter() - parse_started
    stats.files_removed = len(set(previous.meta.get("files", {}) if previous else ()) - set(files))
    stats.files_skipped = len(stats.skipped_files)
    stats.unparsed_files = list(unparsed)
    stats.files_unparsed = len(unparsed)

    meta = {
        "source": {"kind": "repo", "path": str(root)},
        "files": files,
        "unparsed": unparsed,
        "extraction": extraction,
        "created": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
    }
    index = _build(examples, encoder, previous, meta, stats, progress)
    fragment_stats = IndexStats()
    fragment_index = _build(fragments, encoder, previous_fragments, meta, fragment_stats, progress)
    stats.fragments = fragment_stats.examples
    stats.fragments_embedded = fragment_stats.embedded
    stats.encode_s += fragment_stats.encode_s
    # Functions first: a reader that finds the new functions finds fragments of the same files or older ones.
    index.save(directory)
    fragment_index.save(fragments_dir(directory))
    stats.total_s = time.perf_counter() - started
    return index, stats


def index_bank(
    bank: str | Path, encoder: TextEncoder, progress: Progress = _no_progress, directory: Path | None = None
) -> tuple[Index, IndexStats]:
    """Index a JSONL bank (see :func:`assistant.code.examples.read_bank`); unchanged examples keep their vectors."""
    started = time.perf_counter()
    bank = Path(bank)
    directory = directory or bank_index_dir(bank)
    parse_started = time.perf_counter()
    examples = read_bank(bank)
    blob = git_blob_hash(bank.read_bytes())
    stats = IndexStats(files=1, location=str(directory), parse_s=time.perf_counter() - parse_started)
    with index_lock(directory):  # one indexer at a time: read, update and save as one step
        previous, stats.rebuilt = _previous_or_none(directory)
        unchanged = previous is not None and previous.meta.get("files", {}).get(str(bank.name)) == blob
        if unchanged and previous is not None and previous.encoder_name == encoder.name:
            stats.examples = stats.reused = len(previous)
            stats.total_s = time.perf_counter() - started
            return previous, stats
        stats.files_parsed = 1
        meta = {
            "source": {"kind": "bank", "path": str(bank.resolve())},
            "files": {str(bank.name): blob},
            "created": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        }
        index = _build(examples, encoder, previous, meta, stats, progress)
        index.save(directory)
    stats.total_s = time.perf_counter() - started
    return index, stats
