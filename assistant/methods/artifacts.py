"""The one artifact store of the trained methods (LAIL, TST^R, SelfRACG, JOINTCOM, Condor): where each lives, how it is
saved, and the provenance it carries.

Every method saves through :func:`save_artifact`: its files are written aside first, then swapped in, and the
manifest (config, data, statistics, and the store's provenance: method, time, versions, each file's sha256) is
written last, so a folder with a manifest is always complete and a reader keeps the previous artifact until the
swap. Every method loads through :func:`load_manifest`.

The methods' contract (sentence-transformers' style, :class:`~assistant.methods.TrainedMethod`): a config
dataclass, a `train` function, and a trained object whose `save(dir)` writes through this store and whose
`load(dir)` reads back, its loss a named function of :mod:`assistant.methods.losses`; the registry
:data:`~assistant.methods.TRAINED_METHODS` names each one's parts, and :func:`load_trained` loads any folder:

- LAIL: `LailConfig`, `lail.train_lail`; `Lail` (a :class:`TrainedEncoder`).
- JOINTCOM: `JointcomConfig`, `jointcom.train_docstring_retriever`; `Jointcom` (a :class:`TrainedEncoder`).
- TST^R: `TstrConfig`, `tstr.train_tstr`; `Tstr`.
- Condor: `CondorConfig`, `condor.model.train_discriminator`; `Condor`.
- SelfRACG: `SelfRacgConfig`, `selfracg.train_selfracg`; `SelfRacg`: the adapters only, the model they extend
  being the generator's (`SelfRacg.load(dir, ine)` loads them into a branch already over it).

Trained retrievers: a repo's are in `<repo>/.assist/retrievers/<method>/` (git-ignored with the rest of
`.assist/`). A bank's, or an evaluation pool's, are in the user cache under `retrievers/<method>-<fingerprint>/`,
where the fingerprint is a hash of the examples' requirements and code: the same pool finds the same artifacts.

Keyed by generator: a trained artifact belongs to the model that labelled or produced its training data (LAIL's
labels, SelfRACG's adapters, Condor's samples, JOINTCOM's losses); its manifest records it as `generator`
(`"none"` where no generator enters training, as for TST^R). `assist train` saves each generator's artifact in
its own folder, `<folder>@<generator>`, beside the unkeyed `<folder>` earlier versions (and the evaluations) use,
so artifacts for several models live side by side; :func:`find_artifact` picks the one trained for a model.
An old manifest without the field is read from its provenance (LAIL's labeler, SelfRACG's model, a Condor head's
backbone); one that says nothing is of an unknown model, never picked for any.
"""

from __future__ import annotations

import datetime as dt
import glob
import hashlib
import io
import json
import platform
import re
import shutil
from collections.abc import Callable, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any, ClassVar, Self

import numpy as np

from assistant.code.examples import Example
from assistant.errors import UsageError
from assistant.indexing.index import Index, TextEncoder
from assistant.methods import TRAINED_METHODS, TrainedMethod
from assistant.paths import atomic_write_bytes, atomic_write_text, cache_dir, file_sha256, read_json_object, repo_dir
from assistant.progress import Progress

METHODS = ("lail", "tstr")  # the trained retrievers, best first
NO_GENERATOR = "none"  # what a manifest records when no generator enters training (TST^R)
MANIFEST_BYTES = 16 * 2**20  # a manifest is a few KB; a larger file is not one


def fingerprint(examples: Sequence[Example]) -> str:
    """A stable hash of a pool's content (order-independent)."""
    digest = hashlib.sha256()
    for line in sorted(f"{e.requirement}\x00{e.code}" for e in examples):
        digest.update(line.encode("utf-8"))
        digest.update(b"\x01")
    return digest.hexdigest()


def artifact_dir(index: Index, method: str, generator: str | None = None) -> Path:
    """The folder holding `method`'s trained artifacts for this index's pool: the one for `generator`'s
    (:func:`keyed_dir`), or with None the unkeyed folder of earlier versions and the evaluations."""
    source = index.meta.get("source", {})
    if source.get("kind") == "repo":
        base = repo_dir(Path(source["path"])) / "retrievers" / method
    else:
        base = cache_dir() / "retrievers" / f"{method}-{fingerprint(index.examples)[:16]}"
    return keyed_dir(base, generator)


def keyed_dir(base: Path, generator: str | None) -> Path:
    """`base@<generator>`, the folder of the artifact trained for `generator` (its name made safe for a file
    name: a server's model may be `org/name`); `base` itself for None or a model-independent artifact."""
    if generator is None or generator == NO_GENERATOR:
        return base
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", generator)
    if safe != generator:  # two names that differ only in unsafe characters must not share a folder
        safe += "-" + hashlib.sha256(generator.encode()).hexdigest()[:8]
    return base.with_name(f"{base.name}@{safe}")


def trained_when(manifest: dict[str, Any]) -> str:
    """When an artifact was trained, as its manifest says: its own `trained` time, else the time the artifact
    store saved it (SelfRACG's adapters record only that), else "?"."""
    return str(manifest.get("trained") or (manifest.get("provenance") or {}).get("saved") or "?")


def recorded_generator(manifest: dict[str, Any]) -> str | None:
    """The generator an artifact was trained for, as its manifest says (`"none"`: any model), or None when
    unknown. Manifests from before the field: LAIL's labeler, SelfRACG's model, a Condor head's backbone model (a
    Condor trained on no model's samples: none); TST^R never involves the generator; anything else says nothing,
    so it serves no model by itself."""
    generator = manifest.get("generator")
    if isinstance(generator, dict):  # JOINTCOM has always recorded its generator as {"backend", "model"}
        generator = generator.get("model")
    if isinstance(generator, str) and generator:
        return generator
    legacy: Any = None
    method = manifest.get("method")
    if method == "tstr":
        legacy = NO_GENERATOR
    elif method == "lail":
        legacy = (manifest.get("labeler") or {}).get("model")
    elif method == "selfracg":
        legacy = manifest.get("model")
    elif method == "condor":  # a generator backbone's model; else only `--from-eval` samples bring one in
        sources = (manifest.get("data") or {}).get("sources") or {}
        legacy = (manifest.get("stats") or {}).get("backbone_model") or (
            NO_GENERATOR if sources.get("eval") == [] else None
        )
    return legacy if isinstance(legacy, str) and legacy else None


def serves(manifest: dict[str, Any], generator: str | None) -> bool:
    """Whether an artifact may serve `generator`: it was trained for that model, or for none in particular."""
    recorded = recorded_generator(manifest)
    return recorded == NO_GENERATOR or (generator is not None and recorded == generator)


def side_by_side(base: Path) -> list[tuple[Path, dict[str, Any]]]:
    """Every artifact kept for one pool and method: the unkeyed folder, then each generator's (sorted)."""
    folders = [base, *sorted(base.parent.glob(glob.escape(base.name) + "@*"))] if base.parent.is_dir() else [base]
    found = [(folder, read_manifest(folder)) for folder in folders]
    return [(folder, manifest) for folder, manifest in found if manifest is not None]


def latest_artifact(base: Path) -> Path:
    """The most recently saved of the artifacts kept side by side at `base` (`base` itself when none is), for
    the tools that measure whichever was trained last."""
    found = side_by_side(base)

    def when(item: tuple[Path, dict[str, Any]]) -> tuple[str, int]:  # saved (to the second), then the file's time
        return str((item[1].get("provenance") or {}).get("saved", "")), (item[0] / "manifest.json").stat().st_mtime_ns

    return max(found, key=when)[0] if found else base


def find_artifact(base: Path, generator: str | None) -> Path | None:
    """The folder of the artifact that serves `generator` among those kept side by side at `base`: its own
    keyed folder first, then the unkeyed one; None when none was trained for it."""
    for folder in dict.fromkeys((keyed_dir(base, generator), base)):
        manifest = read_manifest(folder)
        if manifest is not None and serves(manifest, generator):
            return folder
    return None


def serving_artifact(base: Path, generator: str | None, what: str, how_to_train: str) -> Path | None:
    """The folder of the artifact at `base` that serves `generator` (:func:`find_artifact`); None when none is kept
    there at all; where only other models' are, the one-line error of :func:`not_trained_for`. What an evaluation
    reads: it measures the artifact trained for the model it runs, never another model's."""
    folder = find_artifact(base, generator)
    if folder is None and other_generators(base, generator):
        raise not_trained_for(what, base, generator, how_to_train)
    return folder


def other_generators(base: Path, generator: str | None) -> list[str]:
    """The models the artifacts kept at `base` were trained for, other than `generator` (unknown ones named so)."""
    recorded = [recorded_generator(manifest) or "an unknown model" for _, manifest in side_by_side(base)]
    return [name for name in dict.fromkeys(recorded) if name not in (generator, NO_GENERATOR)]


class NotTrainedFor(UsageError):
    """An artifact asked for that was trained for other models only (:func:`not_trained_for`), told apart from
    none trained at all."""


def not_trained_for(what: str, base: Path, generator: str | None, how_to_train: str) -> NotTrainedFor:
    """The one-line error for an artifact asked for by name that was trained for other models only."""
    others = " and ".join(other_generators(base, generator))
    return NotTrainedFor(f"the {what} in {base.parent}: trained for {others}, not {generator}; {how_to_train}")


def describe_pool(index: Index) -> str:
    """How a pool reads in messages and provenance records."""
    source = index.meta.get("source", {})
    kind = source.get("kind", "memory")
    where = source.get("path") or source.get("name") or ""
    return f"{kind} {where}".strip() + f" ({len(index)} examples)"


def write_manifest(directory: Path, data: dict[str, Any]) -> None:
    """The artifact's config and provenance, written last: its presence means the artifact is complete."""
    atomic_write_text(directory / "manifest.json", json.dumps(data, indent=1))


def read_manifest(directory: Path) -> dict[str, Any] | None:
    """The artifact's manifest, or None when missing or unreadable (a link, not a JSON object, not UTF-8)."""
    return read_json_object(directory / "manifest.json", limit=MANIFEST_BYTES)


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def save_artifact(directory: Path, method: str, write: Callable[[Path], None], manifest: dict[str, Any]) -> dict:
    """Save a trained method's artifact: `write(folder)` writes its files into a staging folder; they then replace
    the same-named entries of `directory` (other files there, e.g. a resumable labels cache, stay), and the manifest
    is written last with the store's provenance. Returns the manifest as written.

    The old manifest goes only once the new files are complete, so a reader uses the previous artifact while
    training runs, and never sees half of the new one."""
    directory.mkdir(parents=True, exist_ok=True)
    staging = directory / ".partial"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    try:
        write(staging)
        files = {p.relative_to(staging).as_posix(): file_sha256(p) for p in sorted(staging.rglob("*")) if p.is_file()}
        (directory / "manifest.json").unlink(missing_ok=True)
        for entry in sorted(staging.iterdir()):
            target = directory / entry.name
            if target.is_dir() and not target.is_symlink():
                shutil.rmtree(target)
            else:
                target.unlink(missing_ok=True)
            entry.rename(target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    provenance = {
        "method": method,
        "saved": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "assist": _version("assist"),
        "python": platform.python_version(),
        "torch": _version("torch"),
        "files_sha256": files,
    }
    # A manifest read back (a loaded artifact saved again) carries its old method and provenance: both are the store's.
    kept = {key: value for key, value in manifest.items() if key not in ("method", "provenance")}
    written = {"method": method, **kept, "provenance": provenance}
    write_manifest(directory, written)
    return written


def load_manifest(directory: Path, method: str, what: str, how_to_train: str) -> dict[str, Any]:
    """The manifest of `method`'s artifact in `directory`; none (or another method's) is a one-line error naming
    `what` is missing and saying how to train one."""
    manifest = read_manifest(directory)
    if manifest is None or manifest.get("method", method) != method:
        raise UsageError(f"no trained {what} in {directory}; {how_to_train}")
    return manifest


def save_encoder(model: Any, tokenizer: Any, folder: Path) -> None:
    """A fine-tuned transformers encoder and its tokenizer, as safetensors (what LAIL, JOINTCOM and Condor train)."""
    model.save_pretrained(str(folder / "encoder"), safe_serialization=True)
    tokenizer.save_pretrained(str(folder / "encoder"))


class TrainedEncoder:
    """A fine-tuned text encoder and its manifest, saved and loaded through the store: the trained object of the
    methods that fine-tune an encoder (:class:`~assistant.methods.lail.Lail`,
    :class:`~assistant.methods.jointcom.Jointcom`), each a subclass naming its `method` and `what` it is.

    It holds the transformers model and tokenizer (`model`, `tokenizer`); loaded, also the encoder that embeds
    with them (`encoder`). On disk: `encoder/` (safetensors and tokenizer) and `manifest.json`."""

    method: ClassVar[str] = ""  # the name its manifest records
    what: ClassVar[str] = "encoder"  # how a message names it

    def __init__(self, manifest: dict[str, Any], model: Any = None, tokenizer: Any = None) -> None:
        self.manifest, self.model, self.tokenizer = manifest, model, tokenizer
        self.encoder: Any = None

    def save(self, directory: Path) -> dict[str, Any]:
        """Write the encoder, then the manifest (with the store's provenance), into `directory`; returns the
        manifest as written."""
        self.manifest = save_artifact(
            directory, self.method, lambda folder: save_encoder(self.model, self.tokenizer, folder), self.manifest
        )
        return self.manifest

    @classmethod
    def load(cls, directory: Path, how_to_train: str = "") -> Self:
        """The encoder saved in `directory`, named `<method>:<folder>`, embedding with the token limit its training
        used (the manifest's `max_tokens`; before it was recorded, the default); none there is a one-line error
        naming what is missing and `how_to_train` one."""
        from assistant.backends.encoder import MAX_TOKENS, Encoder

        how = how_to_train or f"`assist train` one ({cls.method})"
        loaded = cls(load_manifest(directory, cls.method, cls.what, how))
        limit = int(loaded.manifest.get("max_tokens", MAX_TOKENS))
        loaded.encoder = Encoder(directory / "encoder", name=f"{cls.method}:{directory.name}", max_length=limit)
        loaded.model, loaded.tokenizer = loaded.encoder.model, loaded.encoder.tokenizer  # so it saves again as it is
        return loaded


def artifact_identity(index: Index, method: str, generator: str | None = None) -> dict[str, Any] | None:
    """What identifies the trained artifact `method` keeps for this index's pool (see `directory_identity`): the
    one that serves `generator` (None: the unkeyed folder's)."""
    base = artifact_dir(index, method)
    folder = find_artifact(base, generator) if generator is not None else base
    return directory_identity(folder) if folder is not None else None


def directory_identity(directory: Path) -> dict[str, Any] | None:
    """What identifies a trained artifact in a results folder: its manifest (less the training statistics) and
    the sha256 of each weight file (as `sha256sum` prints it), which tells two trainings apart even when their
    settings are the same. None when the folder holds no artifact."""
    manifest = read_manifest(directory)
    if manifest is None:
        return None
    weights = {}
    for path in sorted(directory.rglob("*.safetensors")):
        digest = hashlib.sha256()
        with path.open("rb") as stream:
            for block in iter(lambda: stream.read(1 << 20), b""):
                digest.update(block)
        weights[path.relative_to(directory).as_posix()] = digest.hexdigest()
    return {key: value for key, value in manifest.items() if key not in ("stats", "provenance")} | {
        "weights_sha256": weights
    }


def trained_methods(index: Index, generator: str | None = None) -> list[tuple[str, Path]]:
    """The trained retrievers that serve `generator` for this index, best first (LAIL, then TST^R), with the
    folder of each."""
    found = [(method, find_artifact(artifact_dir(index, method), generator)) for method in METHODS]
    return [(method, folder) for method, folder in found if folder is not None]


def cached_vectors(
    path: Path, texts: Sequence[str], encoder: TextEncoder, progress: Progress | None = None, stage: str = "encode"
) -> np.ndarray:
    """`encoder.encode(texts)`, reusing the vectors stored in `path` (an .npz keyed by encoder and text).

    A pool that gains a few examples embeds only those; the file then holds exactly this pool's vectors. The
    encoding is reported to `progress` as `stage` (a trained branch's first pass over a repository takes minutes).
    """
    keys = [hashlib.sha256(f"{encoder.name}\x00{text}".encode()).hexdigest()[:24] for text in texts]
    known: dict[str, np.ndarray] = {}
    if path.exists():
        stored = np.load(path)
        known = dict(zip(json.loads(str(stored["keys"])), stored["vectors"], strict=True))
    missing = [i for i, key in enumerate(keys) if key not in known]
    if missing:
        step = (lambda done, total: progress(stage, done, total)) if progress is not None else None
        fresh = encoder.encode([texts[i] for i in missing], step)
        known.update({keys[i]: fresh[row] for row, i in enumerate(missing)})
    if not keys:
        return np.zeros((0, encoder.dim), "float32")
    vectors = np.stack([known[key] for key in keys]).astype("float32")
    if missing:
        path.parent.mkdir(parents=True, exist_ok=True)
        buffer = io.BytesIO()
        np.savez(buffer, keys=json.dumps(keys), vectors=vectors)
        atomic_write_bytes(path, buffer.getvalue())
    return vectors


# Where the stage-1 adapters of a two-stage SelfRACG training are kept too, beside the folder that serves (the
# "without stage 2" ablation, kept to measure stage 2 against; nothing serves from it).
STAGE1_SUFFIX = "-stage1"


def inventory(root: Path | None) -> list[dict[str, Any]]:
    """Every trained artifact kept for the repo at `root` (None: none) and in the user cache: its method, pool,
    the generator it was trained for (None: unknown), when, its folder, and whether anything serves from it (not
    the stage-1 copy a two-stage SelfRACG training keeps); what `assist doctor` lists."""
    bases = [cache_dir() / "retrievers", cache_dir()]
    if root is not None:
        bases = [repo_dir(root) / "retrievers", repo_dir(root), *bases]
    found = []
    for base in bases:
        if not base.is_dir() or base.is_symlink():
            continue
        for folder in sorted(base.iterdir()):
            manifest = read_manifest(folder) if folder.is_dir() and not folder.is_symlink() else None
            if manifest is None or manifest.get("method") not in TRAINED_METHODS:  # not a trained method's folder
                continue
            found.append(
                {
                    "method": manifest["method"],
                    "pool": _pool_of(manifest),
                    "generator": recorded_generator(manifest),
                    "trained": trained_when(manifest),
                    "variant": _variant_of(manifest),
                    "folder": folder,
                    "serves": not (manifest["method"] == "selfracg" and folder.name.endswith(STAGE1_SUFFIX)),
                }
            )
    return found


def _variant_of(manifest: dict[str, Any]) -> str:
    """How a SelfRACG branch was trained where one training differs from another ("stage 1 + 2, first 8 layers, no
    candidate prefix"); "" for the other methods, whose options do not change what they are."""
    config = manifest.get("config") or {}
    if manifest.get("method") != "selfracg" or not isinstance(config, dict):
        return ""
    parts = ["stage 1 + 2" if manifest.get("stage2") or config.get("synthetic") else "stage 1"]
    if config.get("layers"):
        parts.append(f"first {config['layers']} layers")
    if config.get("prefix") == "":
        parts.append("no candidate prefix")
    return ", ".join(parts)


def _pool_of(manifest: dict[str, Any]) -> str:
    """What an artifact was trained on, in a few words: its pool, or a discriminator's sources."""
    pool = manifest.get("pool")
    if isinstance(pool, str):
        return pool
    if isinstance(pool, dict):  # JOINTCOM: {"kind", "path" or "modules", "functions"}
        return f"{pool.get('kind', '?')} {pool.get('path', '')}".strip() + f" ({pool.get('functions', '?')} functions)"
    sources = (manifest.get("data") or {}).get("sources") or {}  # Condor
    parts = [str(sources[key]) for key in ("repo", "bank") if sources.get(key)]
    parts += [f"{len(sources['eval'])} eval run(s)"] if sources.get("eval") else []
    return ", ".join(parts) or "?"


def load_trained(directory: Path) -> TrainedMethod:
    """The trained object saved in `directory`, of whichever registered method its manifest names (see
    :data:`~assistant.methods.TRAINED_METHODS`); a folder without one is a one-line error."""
    manifest = read_manifest(directory) or {}
    entry = TRAINED_METHODS.get(str(manifest.get("method")))
    if entry is None:
        raise UsageError(f"no trained method's artifact in {directory}")
    return entry.trained_class().load(directory)
