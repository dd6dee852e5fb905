"""`assist train ...`: train the retrievers (one subcommand per method), the discriminator and the docstring
retriever on a repo, a bank or a benchmark pool. Each artifact is kept for the model it was trained for."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import click
import typer
from typer.core import TyperGroup

from assistant.errors import UsageError
from assistant.paths import repo_dir
from assistant.ui.console import ProgressUI, command, out, show_progress
from assistant.ui.errors import ASKED_BY
from assistant.ui.options import check_range, check_seed

if TYPE_CHECKING:
    from assistant.methods.condor.model import CondorConfig
    from assistant.methods.lail import LailConfig
    from assistant.methods.selfracg import SelfRacgConfig

train_app = typer.Typer(
    short_help="Train retrievers and the discriminator on your code.",
    help="Train what assist learns from your code: retrievers that pick the demonstrations this model finds useful, "
    "and a discriminator that picks the correct candidate without running it.",
    no_args_is_help=True,
)


def check_training_pool(path: Path, bank: str | None) -> None:
    """What :func:`training_index` will read, checked before any model loads: a repo at `path`, or a readable
    bank (a benchmark's split is checked where it loads)."""
    if bank is None:
        from assistant.indexing.index import repo_root

        repo_root(path)
    elif bank.split(":")[0] != "mbpp":
        from assistant.code.examples import read_bank

        read_bank(Path(bank))


def training_index(path: Path, bank: str | None, encoder, ui: ProgressUI):  # -> Index
    """The pool to train on: a benchmark's train split (`mbpp[:PATH]`), a JSONL bank, or the repo at `path`."""
    from assistant.indexing.index import index_bank, index_repo

    if bank is None:
        return index_repo(path, encoder, ui)[0]
    if bank.split(":")[0] == "mbpp":
        from assistant.evaluate import load_pool

        return load_pool(bank, encoder).index
    return index_bank(Path(bank), encoder, ui)[0]


class _RetrieverGroup(TyperGroup):
    """`assist train retriever`: one subcommand per method. The old spelling still works: `--method NAME`
    anywhere is the subcommand NAME, and options without a method are TST^R's (the old default)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        return super().parse_args(ctx, old_spelling(args, list(self.commands)))


def old_spelling(args: list[str], methods: list[str]) -> list[str]:
    """`--method lail --bank B` → `lail --bank B`; `--epochs 5` → `tstr --epochs 5`; anything else unchanged."""
    for at, arg in enumerate(args):
        if arg == "--method" and at + 1 < len(args):
            return [args[at + 1], *args[:at], *args[at + 2 :]]
        if arg.startswith("--method="):
            return [arg.partition("=")[2], *args[:at], *args[at + 1 :]]
    if args and args[0] not in methods and args[0] not in ("--help", "-h"):
        return ["tstr", *args]
    return args


retriever_app = typer.Typer(
    cls=_RetrieverGroup,
    short_help="Train a retriever: tstr, lail or selfracg.",
    help="Train a retriever for a pool of examples, for the model that will generate; `assist generate --retriever "
    "NAME` then uses it (`auto` does not: none beat the plain retrievers where measured). Artifacts: "
    "<repo>/.assist/retrievers/ for a repo, the user cache for banks, one folder per generating model.",
    no_args_is_help=True,
)
train_app.add_typer(retriever_app, name="retriever")

# The options the methods share; each subcommand takes only its own.
PathArg = Annotated[
    Path, typer.Argument(help="The git repo to train on (default: where you stand).", show_default=False)
]
BankOpt = Annotated[
    str | None,
    typer.Option(help="Train on a JSONL bank, or a benchmark's train split (mbpp[:PATH]), instead of the repo."),
]
SeedOpt = Annotated[int, typer.Option(help="Random seed.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print the training summary as JSON.")]
PrecisionOpt = Annotated[
    str,
    typer.Option(
        help="The local model's precision: auto (bf16 where the CPU does bf16 natively, e.g. AVX512-BF16: about 2x "
        "faster; else fp32), fp32 or bf16."
    ),
]


@command(retriever_app, "tstr", short_help="TST^R: an MLP over frozen embeddings (seconds; serves every model).")
def tstr(
    path: PathArg = Path("."),
    bank: BankOpt = None,
    epochs: Annotated[int, typer.Option(help="Training epochs.")] = 60,
    seed: SeedOpt = 0,
    embedder: Annotated[
        str,
        typer.Option(
            help="The frozen embeddings to transform: default (the local MiniLM encoder) or openai:<model> (any "
            "OpenAI-compatible embeddings endpoint, at --base-url; queries are embedded there too)."
        ),
    ] = "default",
    base_url: Annotated[
        str | None,
        typer.Option("--base-url", help="The embeddings server, e.g. http://127.0.0.1:8080/v1 (env OPENAI_BASE_URL)."),
    ] = None,
    json_output: JsonOpt = False,
) -> None:
    """TST^R: a small MLP over the frozen embeddings, so that requirement similarity predicts code similarity
    (trains in seconds; no generator enters it, so it serves every model)."""
    from assistant.pipeline.pipeline import load_encoder

    check_range("--epochs", epochs, 1)
    check_seed(seed)
    check_training_pool(path, bank)
    with ProgressUI(show_progress(json_output)) as ui:
        encoder = load_encoder()
        index = training_index(path, bank, encoder, ui)
        from assistant.backends.embeddings import load_embedder
        from assistant.methods.tstr import TstrConfig, train_for_index

        if embedder != "default":
            ui.status(f"Embedding the pool with {embedder}")
        frozen = encoder if embedder == "default" else load_embedder(embedder, base_url=base_url)
        directory, stats = train_for_index(index, frozen, TstrConfig(seed=seed, epochs=epochs), progress=ui)
    summary = {"method": "tstr", "embedder": frozen.name, "examples": len(index), "saved": str(directory), **stats}
    if json_output:
        out.print_json(json.dumps(summary))
        return
    out.print(
        f"Trained TST^R on {len(index)} examples ({stats['pairs']} boundary pairs, {frozen.name} embeddings) in "
        f"{stats['seconds']:.1f} s: "
        f"loss {stats['loss_before']:.4f} → {stats['loss_after']:.4f}\nSaved to {directory}\n" + _use_it("tstr")
    )


# LAIL's own options.
LabelerOpt = Annotated[
    str,
    typer.Option(
        help="The LLM that labels: local, or openai (a server whose completions endpoint echoes prompt "
        "log-probabilities, e.g. vLLM; others are refused)."
    ),
]
CandidatesOpt = Annotated[
    int | None,
    typer.Option(
        help="BM25 candidates scored per example, t (paper 50). Default: 16 when the local model labels in bf16, "
        "else 8: on 2 cores about 26 minutes per 100 examples with the 1.5B (13 with the 0.5B).",
        show_default=False,
    ),
]
QueriesOpt = Annotated[
    int,
    typer.Option(
        help="Label at most this many examples as queries, a seeded sample of the documented ones (every example "
        "stays a candidate); labeling time grows with it. 0: every example (the paper)."
    ),
]
TemperatureOpt = Annotated[
    float, typer.Option(help="The contrastive loss's temperature τ (the paper leaves it unstated; lower sharpens).")
]
LossOpt = Annotated[
    str,
    typer.Option(
        help="infonce (the paper's: one positive, one soft negative) or listwise (every labeled candidate, "
        "weighted by softmax of its score; about 2.6x InfoNCE's training time; see assistant/methods/losses.py)."
    ),
]
LabelerUrlOpt = Annotated[
    str | None,
    typer.Option(
        "--base-url", help="The openai labeler's server, e.g. http://127.0.0.1:8000/v1 (env OPENAI_BASE_URL)."
    ),
]
LabelerModelOpt = Annotated[
    str | None,
    typer.Option(help="The labeling model, the one the retriever serves (default: the default generator)."),
]


@command(retriever_app, "lail", short_help="LAIL: the LLM labels which demonstrations help it.")
def lail(
    path: PathArg = Path("."),
    bank: BankOpt = None,
    epochs: Annotated[int, typer.Option(help="Training epochs.")] = 4,
    seed: SeedOpt = 0,
    labeler: LabelerOpt = "local",
    model: LabelerModelOpt = None,
    base_url: LabelerUrlOpt = None,
    precision: PrecisionOpt = "auto",
    candidates: CandidatesOpt = None,
    queries: QueriesOpt = 0,
    positives: Annotated[int, typer.Option(help="Top-scored kept as positives, z (paper 5).")] = 2,
    soft_negatives: Annotated[int, typer.Option(help="Bottom-scored soft negatives, v (paper 5).")] = 2,
    hard_negatives: Annotated[int, typer.Option(help="Hard negatives from outside S_i, h (paper 63).")] = 32,
    temperature: TemperatureOpt = 0.05,
    loss: LossOpt = "infonce",
    resume: Annotated[
        bool, typer.Option("--resume/--fresh", help="Reuse the labels already computed (default) or relabel.")
    ] = True,
    json_output: JsonOpt = False,
) -> None:
    """LAIL: the LLM scores t BM25 candidates per example by how likely they make the example's code; the encoder
    then learns to retrieve the best-scored ones. It serves the model that labeled.

    Labeling dominates the cost: on 2 CPU cores at t=16 in bf16, about 26 minutes per 100 examples with the
    default 1.5B (MBPP's 374 train tasks: 99 min labeling, 2 min training) and 14 with the 0.5B (53 min). Labels
    are cached per labeler and precision, so an interrupted run resumes.
    """
    from assistant.backends.local import resolve_precision
    from assistant.methods.lail import LailConfig

    check_range("--epochs", epochs, 1)
    check_seed(seed)
    check_range("--candidates", candidates, 1)
    check_range("--queries", queries, 0)
    check_range("--positives", positives, 1)
    check_range("--soft-negatives", soft_negatives, 1)
    check_range("--hard-negatives", hard_negatives, 0)
    check_range("--temperature", temperature, 0, low_open=True)
    if labeler not in ("local", "openai"):
        raise UsageError(f"unknown labeler {labeler!r}; choose local or openai")
    precision = resolve_precision(precision)  # a bad value fails here, before anything loads
    # What fits the hour: bf16 labels about twice as fast (MBPP's 374 tasks at t=16: 56 min in all).
    t = candidates or (16 if labeler == "local" and precision == "bf16" else 8)
    config = LailConfig(
        candidates=t,
        queries=queries,
        positives=positives,
        soft_negatives=soft_negatives,
        hard_negatives=hard_negatives,
        temperature=temperature,
        loss=loss,
        seed=seed,
        epochs=epochs,
    )
    _train_lail(path, bank, config, labeler, model, base_url, precision, resume, json_output)


# `train retriever selfracg`
SynthesizedOpt = Annotated[
    int,
    typer.Option(
        help="Stage 2's examples, fragments the model continues (its next lines are the positive, its later ones "
        "hard negatives), e.g. 96 (with the 1.5B about 13 more minutes on 2 CPU cores: 6 for the model to write "
        "them, 7 to train); 0 (the default: it measured no gain with the 0.5B or the 1.5B, "
        "docs/results/trained-retrievers.md) trains stage 1 only."
    ),
]
CandidatePrefixOpt = Annotated[
    bool,
    typer.Option(
        help="Mark each candidate fragment with a one-line comment before encoding it, as the paper does "
        "(--no-candidate-prefix: encode candidates as they are, an ablation)."
    ),
]
TrainDeviceOpt = Annotated[
    str,
    typer.Option(
        help="Where to train: auto (a CUDA GPU if torch sees one, else the CPU), cpu or cuda. On a GPU, stage 2's "
        "continuations are written by the same transformers model there (bf16)."
    ),
]
CorpusOpt = Annotated[
    Path | None,
    typer.Option(
        help="Train generic adapters on every .py file under this folder (e.g. the standard library) instead of "
        "the repo; any pool without adapters of its own then uses them."
    ),
]


@command(retriever_app, "selfracg", short_help="SelfRACG: adapters on the model's attention fetch what comes next.")
def selfracg(
    path: PathArg = Path("."),
    epochs: Annotated[int, typer.Option(help="Passes over stage 1's pairs.")] = 1,
    seed: SeedOpt = 0,
    model: Annotated[
        str | None,
        typer.Option(
            help="The model whose attention gets the branch, the one it serves (default: the default generator)."
        ),
    ] = None,
    precision: PrecisionOpt = "auto",
    pairs: Annotated[int, typer.Option(help="Stage 1's (fragment, next fragment) pairs, sampled from the repo.")] = 768,
    rank: Annotated[int, typer.Option(help="The adapters' rank (paper 16; alpha is twice the rank).")] = 16,
    layers: Annotated[
        int | None, typer.Option(help="Use the first N layers only (default all; fewer is proportionally cheaper).")
    ] = None,
    lr: Annotated[float, typer.Option(help="AdamW learning rate (unstated in the paper).")] = 1e-3,
    batch: Annotated[int, typer.Option(help="Pairs per step (batch - 1 in-batch negatives).")] = 16,
    synthetic: SynthesizedOpt = 0,
    stage2_epochs: Annotated[int, typer.Option(help="Passes over stage 2's examples.")] = 2,
    candidate_prefix: CandidatePrefixOpt = True,
    device: TrainDeviceOpt = "auto",
    corpus: CorpusOpt = None,
    json_output: JsonOpt = False,
) -> None:
    """SelfRACG: low-rank adapters on a parallel retrieval branch of the generator's attention learn, by InfoNCE,
    to find the fragment that follows a fragment (stage 1: 768 pairs take about 20 minutes with the 1.5B on 2 CPU
    cores, 6 with the 0.5B), then, with `--synthetic N`, what the model itself writes after a fragment (stage 2:
    it continues N fragments first, cached). `--device cuda` trains on a GPU. Then `--retriever selfracg`
    (`selfracg-init`: the branch untrained); the adapters serve the model they were trained on."""
    from assistant.methods.selfracg import PREFIX, SelfRacgConfig

    check_range("--epochs", epochs, 1)
    check_seed(seed)
    check_range("--pairs", pairs, 2)
    check_range("--rank", rank, 1)
    check_range("--layers", layers, 1)
    check_range("--lr", lr, 0, low_open=True)
    check_range("--batch", batch, 2)
    check_range("--synthetic", synthetic, 0)
    check_range("--stage2-epochs", stage2_epochs, 1)
    config = SelfRacgConfig(
        rank=rank,
        alpha=2.0 * rank,
        layers=layers,
        prefix=PREFIX if candidate_prefix else "",
        pairs=pairs,
        epochs=epochs,
        batch=batch,
        lr=lr,
        seed=seed,
        synthetic=synthetic,
        stage2_epochs=stage2_epochs,
    )
    _train_selfracg(path, config, model, precision, json_output, corpus, device)


def _train_selfracg(
    path: Path,
    config: SelfRacgConfig,
    model: str | None,
    precision: str,
    json_output: bool,
    corpus: Path | None,
    device: str = "auto",
) -> None:
    import numpy as np

    from assistant.backends.local import resolve_device, resolve_precision
    from assistant.backends.models import resolve
    from assistant.indexing.index import Index, index_repo, load_repo_index, repo_root
    from assistant.methods.artifacts import artifact_dir
    from assistant.methods.selfracg import (
        STAGE1_SUFFIX,
        corpus_fragments,
        generic_dir,
        local_transformers,
        train_selfracg,
    )
    from assistant.pipeline.pipeline import load_encoder, load_generator

    device = resolve_device(device)
    # "auto" reads the CPU's bf16 support; a GPU does bf16 natively.
    precision = resolve_precision("bf16" if device != "cpu" and precision == "auto" else precision)
    if corpus is not None and not corpus.is_dir():
        raise UsageError(f"--corpus {corpus} is not a folder")
    name = resolve(model).name  # the adapters serve this model: they are kept in its own folder
    with ProgressUI(show_progress(json_output), plain=True) as ui:
        if corpus is not None:
            examples = corpus_fragments(corpus)
            source = {"kind": "corpus", "path": str(corpus.resolve())}
            fragments = Index(
                examples=examples, vectors=np.zeros((len(examples), 1), "float32"), meta={"source": source}
            )
        else:
            root = repo_root(path)
            index_repo(root, load_encoder(), ui)  # brings the fragments up to date
            fragments = load_repo_index(root, fragments=True)
        if fragments is None or not len(fragments):
            raise UsageError(f"{corpus or path} has no Python fragments to train on")
        target = generic_dir(name) if corpus is not None else artifact_dir(fragments, "selfracg", name)
        # Stage 2's continuations come from the engine that samples (the branch needs transformers' internals);
        # on a GPU, from the transformers model already there (the OpenVINO engine runs on CPUs).
        generator = None
        if config.synthetic:
            generator = (
                local_transformers(model, precision, device)
                if device != "cpu"
                else load_generator("local", model, progress=ui)
            )
        directory, stats = train_selfracg(
            fragments, config, model, precision, ui, directory=target, generator=generator, device=device
        )
    summary = {"method": "selfracg", "fragments": len(fragments), "saved": str(directory), **stats}
    if stats["stage2"] is not None:
        summary["stage1_saved"] = str(directory.with_name(directory.name + STAGE1_SUFFIX))
    if json_output:
        out.print_json(json.dumps(summary))
        return
    lines = [
        f"Trained SelfRACG stage 1 on {stats['pairs']} pairs of consecutive fragments of {len(fragments)} in "
        f"{stats['seconds']:.0f} s: loss {_losses(stats['losses'])}"
    ]
    second = stats["stage2"]
    if second is not None:
        lines.append(
            f"stage 2 on the model's continuations of {second['examples']} of {second['starts']} fragments "
            f"({second['hard_negatives']} hard negatives) in {second['seconds']:.0f} s: loss "
            f"{_losses(second['losses'])}"
        )
    lines.append(f"Saved to {directory}")
    lines.append(_use_it("selfracg"))
    if second is not None:
        lines.append(f"Stage 1's adapters alone (the ablation without stage 2) are in {summary['stage1_saved']}")
    out.print("\n".join(lines))


def _use_it(method: str) -> str:
    """The line after a training run: how to use what it made, and why `auto` will not by itself."""
    return (
        f"Use it with {ASKED_BY[method]}: auto leaves the trained methods out, as none beat its plain counterpart "
        "where measured (docs: Results > The five trained methods at the 1.5B default)"
    )


def _losses(losses: list[float]) -> str:
    """First step's loss → the mean of the last five."""
    if not losses:
        return "no step"
    tail = losses[-5:]
    return f"{losses[0]:.3f} → {sum(tail) / len(tail):.3f} (last {len(tail)} steps)"


def _train_lail(
    path: Path,
    bank: str | None,
    config: LailConfig,
    labeler: str,
    model: str | None,
    base_url: str | None,
    precision: str,
    resume: bool,
    json_output: bool,
) -> None:
    """Label with `labeler` and train; saved in the pool's folder for the labeling model (the one it serves)."""
    from assistant.backends.models import encoder_dir, resolve
    from assistant.methods.artifacts import artifact_dir
    from assistant.methods.lail import adopt_labels, labeler_name, train_lail
    from assistant.pipeline.pipeline import load_encoder, load_generator

    check_training_pool(path, bank)
    with ProgressUI(show_progress(json_output), plain=True) as ui:
        encoder = load_encoder()
        index = training_index(path, bank, encoder, ui)
        if labeler == "local":
            # Shared-prefix scoring (and bf16) needs the transformers engine.
            backend = load_generator("local", model, progress=ui, precision=precision, engine="transformers")
        else:
            from assistant.config import backend_settings

            # Scoring given text needs the completions endpoint's echo, whatever the config says for sampling.
            settings = backend_settings("openai", model, base_url, api="completions")
            backend = load_generator("openai", settings.model, progress=ui, **settings.backend_options())
        folder = artifact_dir(index, "lail", backend.model)
        if resume:
            adopt_labels(folder, artifact_dir(index, "lail"))
        else:
            (folder / "labels.jsonl").unlink(missing_ok=True)
        encoder_path = encoder_dir(resolve(None, "encoder"))
        directory, stats = train_lail(index, encoder, encoder_path, backend, config, ui, directory=folder)
    summary = {"method": "lail", "examples": len(index), "saved": str(directory), **stats}
    if json_output:
        out.print_json(json.dumps(summary))
        return
    out.print(
        f"Trained LAIL on {len(index)} examples: {stats['pairs_labeled']} pairs labeled by {labeler_name(backend)} "
        f"({stats['label_seconds']:.0f} s), encoder trained in {stats['train_seconds']:.0f} s, "
        f"epoch losses {stats['epoch_losses']}\nSaved to {directory}\n" + _use_it("lail")
    )


# The discriminator's data and backbone options.
FromBankOpt = Annotated[
    str | None,
    typer.Option(
        "--from-bank",
        help="Learn from a bank instead of the repo: mbpp[:PATH] (MBPP's train split, with tests) or a JSONL "
        "bank (tests, if present, label the mutants).",
    ),
]
FromEvalOpt = Annotated[
    list[Path] | None,
    typer.Option(
        "--from-eval",
        help="Also learn from the model's own candidates in an `assist eval codegen` run on MBPP's train split "
        "(labelled by their tests). Repeatable.",
    ),
]
BackboneOpt = Annotated[
    str,
    typer.Option(
        help="Encoder to fine-tune: a registered one, or a folder with a transformers model; or generator "
        "(generator:MODEL): the local generator, frozen, with a head over its hidden states (use "
        "--no-contrastive and more --epochs: only the head trains)."
    ),
]
DiscriminatorOutOpt = Annotated[
    Path | None,
    typer.Option(
        "--out",
        help="Where to save (default: <repo>/.assist/discriminator when trained on the repo, else the user cache).",
    ),
]


@command(train_app, "discriminator", short_help="Train Condor, the discriminator that ranks candidates.")
def discriminator(
    path: Annotated[
        Path,
        typer.Argument(
            help="The git repo whose functions to learn from (default: where you stand).", show_default=False
        ),
    ] = Path("."),
    from_bank: FromBankOpt = None,
    from_eval: FromEvalOpt = None,
    mutants: Annotated[int, typer.Option(help="Mutants per known-correct program.")] = 4,
    epochs: Annotated[int, typer.Option(help="Classifier epochs.")] = 2,
    contrastive_epochs: Annotated[int, typer.Option(help="Contrastive epochs (stage 1).")] = 1,
    contrastive: Annotated[
        bool, typer.Option("--contrastive/--no-contrastive", help="Stage 1 on near-identical pairs (ablation: off).")
    ] = True,
    partial: Annotated[
        bool, typer.Option("--partial-fixes/--no-partial-fixes", help="Add partial fixes as negatives (ablation).")
    ] = True,
    backbone: BackboneOpt = "all-minilm-l6-v2",
    holdout: Annotated[float, typer.Option(help="Share of problems held out and scored (0 trains on all).")] = 0.2,
    seed: Annotated[int, typer.Option(help="Random seed (mutants, split, training).")] = 0,
    resume: Annotated[
        bool,
        typer.Option("--resume/--fresh", help="Reuse the test outcomes of mutants already run (default) or rerun."),
    ] = True,
    out_dir: DiscriminatorOutOpt = None,
    json_output: Annotated[bool, typer.Option("--json", help="Print the manifest as JSON.")] = False,
) -> None:
    """Train Condor, the discriminator that ranks candidates by p(correct) without running them.

    Data: known-correct programs (the repo's functions, a bank's code, MBPP references), their semantic
    mutants (a flipped comparison, an off-by-one, a wrong variable, ... labelled by running the tests where
    there are any), the model's own candidates (--from-eval), and partial fixes between near-identical wrong
    and correct versions. Then a contrastive stage and a classifier. `assist generate --ranker condor` (or
    agree+condor) ranks with it; `auto` does not, as it did not beat agree and log-probability where measured.
    """
    from assistant.methods.condor.model import CondorConfig, summary_line, train_and_save

    check_range("--mutants", mutants, 0)
    check_range("--epochs", epochs, 1)
    check_range("--contrastive-epochs", contrastive_epochs, 1)
    check_range("--holdout", holdout, 0, 1, high_open=True)  # 0: train on every problem
    check_seed(seed)
    config = CondorConfig(
        backbone=backbone,
        contrastive=contrastive,
        partial_fixes=partial,
        epochs=epochs,
        contrastive_epochs=contrastive_epochs,
        seed=seed,
    )
    problems, sources, directory = _discriminator_data(path, from_bank, from_eval or [], out_dir, config)
    if not resume:
        from assistant.methods.condor.model import verification_cache

        verification_cache().path.unlink(missing_ok=True)
    with ProgressUI(show_progress(json_output)) as ui:
        ui.status(f"Building training data from {len(problems)} problems")
        manifest = train_and_save(
            problems, config, directory, holdout=holdout, mutants=mutants, sources=sources, progress=ui
        )
    if json_output:
        out.print_json(json.dumps({"saved": str(directory), **manifest}))
        return
    out.print(f"Trained Condor in {manifest['stats']['seconds']:.0f} s on {summary_line(manifest)}")
    out.print(f"Saved to {directory}\n{_use_it('condor')}")


def _discriminator_data(
    path: Path, from_bank: str | None, from_eval: list[Path], out_dir: Path | None, config: CondorConfig
) -> tuple[list, dict, Path]:
    """The problems to learn from, where they came from, and where the discriminator is saved: trained on the
    repo, the repo's own (.assist/); on a bank or benchmark, the user's, for every repo without one of its own;
    in either, the folder for the model whose candidates it learns from (or the unkeyed one, for none)."""
    from assistant.indexing.index import repo_root
    from assistant.methods.condor.data import training_problems
    from assistant.methods.condor.model import discriminator_dir, planned_generator

    root = repo_root(path) if from_bank is None and not from_eval else None
    problems, sources = training_problems(from_bank, from_eval, root)
    directory = out_dir or discriminator_dir(root, planned_generator(config, sources))
    if root is not None and out_dir is None:
        repo_dir(root, create=True)  # .assist/ with its .gitignore: the model stays out of git status
    return problems, sources, directory


@command(train_app, "docstring-retriever", short_help="Train the retriever of docstring exemplars (JOINTCOM).")
def docstring_retriever(
    path: Annotated[
        Path,
        typer.Argument(
            help="The git repo whose documented functions to learn from (default: where you stand).",
            show_default=False,
        ),
    ] = Path("."),
    stdlib: Annotated[
        bool,
        typer.Option(
            "--stdlib", help="Train on the standard library's exemplar modules (the pool `assist eval docstring` uses)."
        ),
    ] = False,
    k: Annotated[int, typer.Option("-k", help="Exemplars scored per function (paper 4).")] = 4,
    epochs: Annotated[int, typer.Option(help="Epochs; the index is refreshed before each.")] = 2,
    limit: Annotated[int, typer.Option(help="Training functions drawn from the pool (0: all).")] = 120,
    seed: Annotated[int, typer.Option(help="Random seed (and, with --stdlib, the module split).")] = 0,
    model: Annotated[str | None, typer.Option(help="The generator whose loss trains the retriever.")] = None,
    json_output: Annotated[bool, typer.Option("--json", help="Print the manifest as JSON.")] = False,
) -> None:
    """Train the docstring-exemplar retriever from the generator's own loss (JOINTCOM, frozen LLM).

    For each documented function, its k nearest exemplars are scored by the generator's loss of the real
    docstring given each; the encoder learns to rank the helpful ones first. `assist docstring` and the hook use it
    with `docstring.exemplars = "jointcom"` in the config (not by default: it did not beat plain exemplars).
    Losses are cached, so a second run (or more epochs) only scores new pairs.
    """
    from assistant.backends.models import encoder_dir, resolve
    from assistant.methods.artifacts import keyed_dir
    from assistant.methods.jointcom import JointcomConfig, retriever_dir, train_docstring_retriever
    from assistant.pipeline.pipeline import load_generator

    check_range("-k", k, 1)
    check_range("--epochs", epochs, 1)
    check_range("--limit", limit, 0)  # 0: every function
    check_seed(seed)
    if stdlib:
        from assistant.evaluate.docstring_eval import load_docstring_task

        pool, _, split = load_docstring_task(None, seed)
        directory = retriever_dir(pool)
        provenance = {"kind": "stdlib", "modules": split["exemplar_modules"], "functions": len(pool), "seed": seed}
    else:
        from assistant.code.extract import repo_functions
        from assistant.indexing.index import repo_root

        root = repo_root(path)
        pool = repo_functions(root)
        directory = retriever_dir(pool, root)
        repo_dir(root, create=True)  # .assist/ with its .gitignore: the model stays out of git status
        provenance = {"kind": "repo", "path": str(root), "functions": len(pool)}
    config = JointcomConfig(k=k, epochs=epochs, limit=limit or None, seed=seed)
    with ProgressUI(show_progress(json_output), plain=True) as ui:
        backend = load_generator("local", model, progress=ui)
        directory = keyed_dir(directory, backend.model)  # the losses are this model's: it serves this model
        manifest = train_docstring_retriever(
            pool, backend, encoder_dir(resolve(None, "encoder")), directory, config, ui, provenance
        )
    if json_output:
        out.print_json(json.dumps({"saved": str(directory), **manifest}))
        return
    stats = manifest["stats"]
    last = stats["epochs"][-1]
    out.print(
        f"Trained on {stats['trained_on']} of {stats['functions']} documented functions in {stats['seconds']:.0f} s; "
        f"last epoch: expected loss {last['expected_loss']} (uniform over the top {k}: {last['uniform_loss']}, "
        f"best of {k}: {last['best_of_k_loss']})\nSaved to {directory}\n" + _use_it("jointcom")
    )
