"""Indexing and retrieval speed over a large real tree: the Python standard library (~16,000 functions).

What it measures, with the product's own code paths (`assistant.code.extract`, `assistant.backends.encoder`,
`assistant.indexing.index`, `assistant.core.retrieve`):

1. Indexing throughput in functions/second, split into parse (read + blob hash + `extract_python`),
   encode (`Encoder.encode` over `embedding_text`) and build (`Index` with `build_bm25` via `.bm25`, and the
   faiss `IndexFlatIP` via `.dense`), plus the total. `index_repo` needs a git repo, which the stdlib is not,
   so its steps are replicated here over every `*.py` file under the root, skipping `site-packages`, files
   that cannot be read or are not UTF-8, and, unless `--include-tests`, test-suite folders (`test`, `tests`,
   `idle_test`): the stdlib's own tests are two thirds of its functions (~33,700 of ~49,400 in 3.11), which
   is what leaves ~16,000.
2. Query latency p50/p95 in milliseconds for the BM25, dense and hybrid retrievers (k=4) over that index,
   each warmed up once before timing. Queries are MBPP requirement texts (`../shared/data/mbpp.jsonl`, a
   seeded sample) when that file is present, else the docstring summaries of a seeded sample of the indexed
   functions (`--queries-from` picks explicitly).
3. With `--trained POOL` (e.g. `mbpp:../shared/data/mbpp.jsonl`): the retrievers trained for that pool
   (`assist train retriever lail|tstr --bank POOL`) that serve `--model` (default: assist's), found as
   `assist generate` finds them (`assistant.pipeline.registry.trained_folder`), timed the same way over the same
   large index. One trained for other models only ends the run with the product's one-line error, before the
   indexing (exit status 2); one not trained at all is skipped.
   LAIL is `assistant.methods.lail.LailRetriever` (the index re-embedded once with the trained encoder, reported as
   its setup time; its vector cache goes to a temp dir removed at exit, not the artifact); TST^R is
   `assistant.methods.tstr.TstrRetriever` (the MLP applied to the stored vectors, then to each query's).
4. The machine (CPU count, torch threads, Python version, load average before and after: other work on
   the machine skews every figure) and the sizes (files, functions).

It prints figures and asserts nothing about them. Run from the repo root:

    .venv/bin/python benchmarks/index_speed.py                 # the whole stdlib: several minutes on 2 cores
    .venv/bin/python benchmarks/index_speed.py --limit 2000    # quick run: encode a sample of 2,000 functions
    .venv/bin/python benchmarks/index_speed.py --json          # one JSON object instead of the table
    .venv/bin/python benchmarks/index_speed.py --trained mbpp:../shared/data/mbpp.jsonl   # + LAIL, TST^R
    .venv/bin/python benchmarks/index_speed.py --trained mbpp:../shared/data/mbpp.jsonl --model qwen2.5-coder-0.5b

Progress goes to stderr, figures to stdout.
"""

from __future__ import annotations

import os

os.environ["HF_HUB_OFFLINE"] = "1"  # before transformers is imported (through assistant.backends.encoder): no hub

import argparse
import json
import platform
import random
import sys
import sysconfig
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from assistant.backends.encoder import Encoder, load_encoder
from assistant.backends.models import DEFAULT_GENERATOR, resolve
from assistant.code.examples import Example
from assistant.code.extract import extract_python, git_blob_hash, humanize_identifier
from assistant.core.retrieve import BM25Retriever, DenseRetriever, HybridRetriever, Retriever
from assistant.errors import UsageError
from assistant.indexing.index import Index, embedding_text

T = TypeVar("T")

SEED = 0
TEST_DIRS = frozenset({"test", "tests", "idle_test"})
K = 4
MBPP = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "mbpp.jsonl"


@dataclass
class Corpus:
    """What the parse stage produced from the tree."""

    files_seen: int = 0
    files_parsed: int = 0
    files_skipped: int = 0
    examples: list[Example] = field(default_factory=list)
    parse_s: float = 0.0


class Ticker:
    """A one-line progress display on stderr, redrawn with `\\r` at most a few times a second."""

    def __init__(self, label: str, interval: float = 0.5) -> None:
        self.label = label
        self.interval = interval
        self.started = time.perf_counter()
        self.last = 0.0

    def __call__(self, done: int, total: int) -> None:
        now = time.perf_counter()
        if now - self.last < self.interval and done < total:
            return
        self.last = now
        elapsed = now - self.started
        rate = done / elapsed if elapsed > 0 else 0.0
        eta = (total - done) / rate if rate > 0 else 0.0
        sys.stderr.write(
            f"\r{self.label}: {done:,}/{total:,} ({100 * done / max(total, 1):5.1f}%)"
            f"  {rate:,.0f}/s  {elapsed:,.0f}s elapsed, ~{eta:,.0f}s left   "
        )
        if done >= total:
            sys.stderr.write("\n")
        sys.stderr.flush()


def python_files(root: Path, include_tests: bool = False) -> list[Path]:
    """Every `*.py` file under root, in a stable order, outside `site-packages` (and `__pycache__`), and
    outside test-suite folders unless `include_tests`."""
    skip = {"site-packages", "__pycache__"} | (set() if include_tests else TEST_DIRS)
    found: list[Path] = []
    for directory, subdirs, files in os.walk(root):
        subdirs[:] = sorted(d for d in subdirs if d not in skip)
        found.extend(Path(directory) / name for name in sorted(files) if name.endswith(".py"))
    return found


def parse_tree(root: Path, include_tests: bool = False) -> Corpus:
    """Read, hash and parse every Python file as `index_repo` does; the whole loop is timed as parse time."""
    paths = python_files(root, include_tests)
    corpus = Corpus(files_seen=len(paths))
    ticker = Ticker("parse")
    started = time.perf_counter()
    for number, path in enumerate(paths, start=1):
        ticker(number, len(paths))
        try:
            data = path.read_bytes()
            text = data.decode("utf-8")
        except (OSError, UnicodeDecodeError):
            corpus.files_skipped += 1
            continue
        blob = git_blob_hash(data)
        rel = path.relative_to(root).as_posix()
        corpus.examples.extend(extract_python(text.replace("\r\n", "\n"), rel, blob))
        corpus.files_parsed += 1
    corpus.parse_s = time.perf_counter() - started
    return corpus


def sample_examples(examples: list[Example], limit: int | None) -> list[Example]:
    """All examples, or a seeded random sample of `limit` of them kept in tree order."""
    if limit is None or limit >= len(examples):
        return examples
    rows = sorted(random.Random(SEED).sample(range(len(examples)), limit))
    return [examples[i] for i in rows]


def is_documented(example: Example) -> bool:
    """Whether the requirement is a docstring summary rather than the `name words: signature` fallback."""
    bare = example.name.rsplit(".", 1)[-1]
    return not example.requirement.startswith(f"{humanize_identifier(bare)}: {bare}(")


def load_queries(source: str, count: int, examples: Sequence[Example]) -> tuple[list[str], str]:
    """`count` query texts and a description of where they came from."""
    rng = random.Random(SEED)
    if source == "auto":
        source = "mbpp" if MBPP.is_file() else "docstrings"
    if source == "mbpp":
        with open(MBPP, encoding="utf-8") as handle:
            texts = [json.loads(line)["text"] for line in handle if line.strip()]
        picked = rng.sample(texts, count) if count <= len(texts) else [rng.choice(texts) for _ in range(count)]
        return picked, f"MBPP requirement texts (seeded sample of {len(texts)} in {MBPP})"
    documented = [e.requirement for e in examples if is_documented(e)]
    if not documented:
        raise SystemExit("no documented functions in the index to draw queries from")
    picked = rng.sample(documented, count) if count <= len(documented) else rng.choices(documented, k=count)
    return picked, f"docstring summaries of indexed functions (seeded sample of {len(documented):,} documented)"


def latencies_ms(run: Callable[[T], object], queries: Sequence[T]) -> dict[str, float]:
    """Warm up once, then time `run` on each query; p50/p95/mean/max in milliseconds."""
    run(queries[0])
    times = []
    for query in queries:
        started = time.perf_counter()
        run(query)
        times.append((time.perf_counter() - started) * 1000)
    values = np.asarray(times)
    return {
        "p50_ms": float(np.percentile(values, 50)),
        "p95_ms": float(np.percentile(values, 95)),
        "mean_ms": float(values.mean()),
        "max_ms": float(values.max()),
    }


def machine_facts() -> dict[str, Any]:
    """CPU, threads and versions that the timings depend on."""
    import faiss
    import torch

    affinity = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    return {
        "cpu_count": os.cpu_count(),
        "cpus_usable": affinity,
        "torch_threads": torch.get_num_threads(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "torch": torch.__version__,
        "faiss": faiss.__version__,
        "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
    }


def trained_folders(pool: str, encoder: Encoder, generator: str) -> dict[str, Path]:
    """The folders of the LAIL and TST^R artifacts trained for `pool` that serve `generator`, found as the product
    finds them; one trained for other models only is the product's one-line UsageError, one not trained at all
    is skipped (said on stderr)."""
    from assistant.evaluate import load_pool
    from assistant.methods import TRAINED_METHODS
    from assistant.pipeline.registry import trained_folder

    trained_on = load_pool(pool, encoder).index
    folders: dict[str, Path] = {}
    for method in ("lail", "tstr"):
        folder = trained_folder(method, trained_on, generator)
        if folder is None:
            sys.stderr.write(f"no {TRAINED_METHODS[method].what} trained for {pool}; skipped\n")
        else:
            folders[method] = folder
    return folders


def trained_retrievers(folders: dict[str, Path], index: Index, encoder: Encoder) -> tuple[list[Retriever], dict]:
    """The LAIL and TST^R retrievers of `folders` (:func:`trained_folders`), over the benchmark's `index`; and the
    seconds it took to make each searchable (LAIL re-embeds the whole index with its encoder)."""
    import atexit
    import shutil
    import tempfile

    from assistant.methods.lail import LailRetriever
    from assistant.methods.tstr import Tstr, TstrRetriever

    found: list[Retriever] = []
    setup: dict[str, float] = {}
    lail_dir = folders.get("lail")
    if lail_dir is not None:
        # A scratch copy of the artifact's manifest and encoder, so the 16,000 pool vectors are not cached
        # beside the real pool's.
        scratch = Path(tempfile.mkdtemp(prefix="lail-bench-"))
        atexit.register(shutil.rmtree, scratch, True)
        shutil.copy(lail_dir / "manifest.json", scratch / "manifest.json")
        (scratch / "encoder").symlink_to(lail_dir / "encoder")
        started = time.perf_counter()
        sys.stderr.write(f"encode ({len(index):,} functions with the LAIL encoder)\n")
        found.append(LailRetriever(index, scratch))
        setup["lail"] = time.perf_counter() - started
    tstr_dir = folders.get("tstr")
    if tstr_dir is not None:
        started = time.perf_counter()
        frozen = np.asarray(index.vectors, dtype=np.float32)  # the benchmark's index is embedded by `encoder`
        found.append(TstrRetriever(index, encoder, Tstr.load(tstr_dir), frozen))
        setup["tstr"] = time.perf_counter() - started
    return found, setup


def size_figures(root: Path, include_tests: bool, corpus: Corpus, indexed: int, limit: int | None) -> dict[str, Any]:
    """What was indexed: the tree, its files and functions (`indexed`: those encoded, with --limit a sample)."""
    return {
        "root": str(root),
        "test_suites": "included" if include_tests else "skipped (" + ", ".join(sorted(TEST_DIRS)) + ")",
        "files": corpus.files_seen,
        "files_parsed": corpus.files_parsed,
        "files_skipped": corpus.files_skipped,
        "functions_parsed": len(corpus.examples),
        "functions_indexed": indexed,
        "limit": limit,
    }


def indexing_figures(corpus: Corpus, indexed: int, encode_s: float, bm25_s: float, faiss_s: float) -> dict[str, Any]:
    """Each indexing stage's seconds and functions, their total, and functions per second (`indexed`: the
    functions encoded and indexed, a sample of those parsed with --limit)."""
    # Parse covers every function in the tree; with --limit only a sample goes on, so the parse share is
    # scaled to the indexed functions to keep the total comparable with a full run.
    parse_share_s = corpus.parse_s * indexed / max(len(corpus.examples), 1)
    total_s = parse_share_s + encode_s + bm25_s + faiss_s

    def rate(count: int, seconds: float) -> float:
        return count / seconds if seconds > 0 else float("inf")

    return {
        "parse": {"seconds": corpus.parse_s, "functions": len(corpus.examples)},
        "encode": {"seconds": encode_s, "functions": indexed},
        "bm25": {"seconds": bm25_s, "functions": indexed},
        "faiss": {"seconds": faiss_s, "functions": indexed},
        "total": {"seconds": total_s, "functions": indexed, "parse_seconds_counted": parse_share_s},
        "per_second": {
            "parse": rate(len(corpus.examples), corpus.parse_s),
            "encode": rate(indexed, encode_s),
            "bm25": rate(indexed, bm25_s),
            "faiss": rate(indexed, faiss_s),
            "total": rate(indexed, total_s),
        },
    }


def run_benchmark(
    root: Path,
    limit: int | None,
    query_count: int,
    queries_from: str,
    include_tests: bool = False,
    trained: str | None = None,
    engine: str = "openvino",
    generator: str | None = None,
) -> dict[str, Any]:
    """Index the tree, time the retrievers, and return every figure as one dict. `engine`: the encoder's,
    openvino (what assist loads) or torch (what training runs); `generator`: the model the trained retrievers
    must serve (None: assist's default)."""
    machine = machine_facts()
    generator = generator or resolve(None).name

    started = time.perf_counter()
    encoder = load_encoder() if engine == "openvino" else Encoder.load()
    load_s = time.perf_counter() - started
    folders = trained_folders(trained, encoder, generator) if trained is not None else {}  # before the long part

    corpus = parse_tree(root, include_tests)
    examples = sample_examples(corpus.examples, limit)

    texts = [embedding_text(e) for e in examples]
    started = time.perf_counter()
    vectors = encoder.encode(texts, progress=Ticker(f"encode ({encoder.name})"))
    encode_s = time.perf_counter() - started

    started = time.perf_counter()
    index = Index(examples=examples, vectors=vectors, meta={"encoder": encoder.name, "dim": encoder.dim})
    index.bm25  # noqa: B018 - build_bm25 now, as assistant.indexing.index._build does, so the cost lands here
    bm25_s = time.perf_counter() - started
    started = time.perf_counter()
    index.dense  # noqa: B018 - the faiss IndexFlatIP
    faiss_s = time.perf_counter() - started

    queries, query_source = load_queries(queries_from, query_count, examples)
    bm25 = BM25Retriever(index)
    dense = DenseRetriever(index, encoder)
    retrievers: list[Retriever] = [bm25, dense, HybridRetriever(bm25, dense)]
    trained_setup: dict[str, float] = {}
    if trained is not None:
        extra, trained_setup = trained_retrievers(folders, index, encoder)
        retrievers.extend(extra)
    latency: dict[str, dict[str, float]] = {}
    for retriever in retrievers:
        sys.stderr.write(f"timing {retriever.name} over {len(queries)} queries\n")
        latency[retriever.name] = latencies_ms(lambda q, r=retriever: r.search(q, K), queries)
    # Components, to say where the time of a search goes.
    query_vectors = encoder.encode(queries)
    components = {
        "bm25 get_scores": latencies_ms(bm25.scores, queries),
        "encode query": latencies_ms(lambda q: encoder.encode([q]), queries),
        "faiss search": latencies_ms(
            lambda v: index.dense_search(v, K + 16), [query_vectors[i : i + 1] for i in range(len(queries))]
        ),
    }

    machine["load_average_after"] = list(os.getloadavg()) if hasattr(os, "getloadavg") else None
    return {
        "machine": machine,
        "encoder": {
            "name": encoder.name,
            "engine": type(encoder).__name__,
            "dim": encoder.dim,
            "batch_size": encoder.batch_size,
            "load_s": load_s,
        },
        "sizes": size_figures(root, include_tests, corpus, len(examples), limit),
        "indexing": indexing_figures(corpus, len(examples), encode_s, bm25_s, faiss_s),
        "queries": {"count": len(queries), "source": query_source, "k": K},
        "trained": {"pool": trained, "model": generator, "setup_seconds": trained_setup},
        "latency_ms": latency,
        "latency_components_ms": components,
    }


def print_table(result: dict[str, Any]) -> None:
    """The figures as a plain-text report."""
    machine, sizes, indexing = result["machine"], result["sizes"], result["indexing"]
    encoder = result["encoder"]
    print("Machine")
    print(
        f"  CPUs: {machine['cpu_count']} (usable: {machine['cpus_usable']}), torch threads: {machine['torch_threads']}"
    )
    print(f"  Python {machine['python']}, torch {machine['torch']}, faiss {machine['faiss']}")
    print(f"  {machine['platform']} ({machine['processor']})")
    if machine["load_average"] is not None:
        before = ", ".join(f"{x:.2f}" for x in machine["load_average"])
        after = ", ".join(f"{x:.2f}" for x in machine["load_average_after"])
        print(f"  load average (1/5/15 min): {before} at start, {after} at end")
    print(
        f"  encoder: {encoder['name']} ({encoder['engine']}, dim {encoder['dim']}, batch {encoder['batch_size']}), "
        f"loaded in {encoder['load_s']:.2f} s"
    )
    print()
    print("Sizes")
    print(f"  root: {sizes['root']} (test suites {sizes['test_suites']})")
    print(f"  files: {sizes['files']:,} *.py ({sizes['files_parsed']:,} parsed, {sizes['files_skipped']:,} skipped)")
    limited = f" (--limit {sizes['limit']:,}, seeded sample)" if sizes["limit"] is not None else ""
    print(f"  functions: {sizes['functions_parsed']:,} parsed, {sizes['functions_indexed']:,} indexed{limited}")
    print()
    print("Indexing")
    print(f"  {'stage':<8} {'functions':>10} {'seconds':>9} {'functions/s':>12}")
    for stage in ("parse", "encode", "bm25", "faiss", "total"):
        row = indexing[stage]
        print(f"  {stage:<8} {row['functions']:>10,} {row['seconds']:>9.2f} {indexing['per_second'][stage]:>12,.0f}")
    if sizes["limit"] is not None and sizes["functions_indexed"] < sizes["functions_parsed"]:
        print(f"  (total counts parse time pro rata: {indexing['total']['parse_seconds_counted']:.2f} s)")
    print()
    queries = result["queries"]
    print(f"Query latency, k={queries['k']}, {queries['count']} queries: {queries['source']}")
    print(f"  {'retriever':<16} {'p50 ms':>8} {'p95 ms':>8} {'mean ms':>8} {'max ms':>8}")
    for name, row in result["latency_ms"].items():
        print(f"  {name:<16} {row['p50_ms']:>8.2f} {row['p95_ms']:>8.2f} {row['mean_ms']:>8.2f} {row['max_ms']:>8.2f}")
    trained = result["trained"]
    if trained["pool"] is not None:
        setup = ", ".join(f"{name} {seconds:.1f} s" for name, seconds in trained["setup_seconds"].items())
        print(
            f"  trained for {trained['pool']}, serving {trained['model']}; made searchable over this index in: "
            f"{setup or 'none found'}"
        )
    print("  components:")
    for name, row in result["latency_components_ms"].items():
        print(f"  {name:<16} {row['p50_ms']:>8.2f} {row['p95_ms']:>8.2f} {row['mean_ms']:>8.2f} {row['max_ms']:>8.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path(sysconfig.get_paths()["stdlib"]), help="tree to index")
    parser.add_argument("--limit", type=int, default=None, help="max functions to encode (seeded sample)")
    parser.add_argument("--queries", type=int, default=200, help="number of timed queries")
    parser.add_argument(
        "--queries-from",
        choices=("auto", "mbpp", "docstrings"),
        default="auto",
        help="query texts: MBPP requirements if the file is there (auto), or indexed functions' docstrings",
    )
    parser.add_argument(
        "--include-tests", action="store_true", help="also index test-suite folders (stdlib: ~49,000 functions)"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    parser.add_argument(
        "--trained",
        metavar="POOL",
        help="also time the LAIL and TST^R retrievers trained for this pool, e.g. mbpp:../shared/data/mbpp.jsonl",
    )
    parser.add_argument(
        "--model", default=DEFAULT_GENERATOR, help="the generator the trained retrievers must serve (default: assist's)"
    )
    parser.add_argument(
        "--encoder-engine",
        choices=("openvino", "torch"),
        default="openvino",
        help="run the encoder on OpenVINO (what assist loads) or torch (what training runs)",
    )
    args = parser.parse_args()
    if not args.root.is_dir():
        parser.error(f"{args.root} is not a directory")
    if args.limit is not None and args.limit < 1:
        parser.error("--limit must be at least 1")
    if args.queries < 1:
        parser.error("--queries must be at least 1")
    if args.queries_from == "mbpp" and not MBPP.is_file():
        parser.error(f"{MBPP} is not there")

    try:
        result = run_benchmark(
            args.root.resolve(),
            args.limit,
            args.queries,
            args.queries_from,
            args.include_tests,
            args.trained,
            args.encoder_engine,
            resolve(args.model).name,
        )
    except UsageError as exc:  # e.g. a retriever trained for another model only: the product's one line
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)
    if args.json:
        print(json.dumps(result, indent=1))
    else:
        print_table(result)


if __name__ == "__main__":
    main()
