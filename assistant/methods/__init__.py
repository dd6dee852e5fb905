"""The trained methods and their one contract (sentence-transformers' style).

Each method is a config dataclass, a `train` function, and a trained object that saves to and loads from one
folder of the artifact store (:mod:`assistant.methods.artifacts`), its loss a named function of
:mod:`assistant.methods.losses`. The trained object is a :class:`TrainedMethod`: `save(directory)` writes its
files and then its manifest (returned as written), `load(directory)` reads them back, and `manifest` records,
among its provenance, the generator it was trained for. :data:`TRAINED_METHODS` maps each method's name (as its
manifest records it) to where its parts live; the classes are imported only when asked for (some need torch).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Protocol, Self, runtime_checkable


@runtime_checkable
class TrainedMethod(Protocol):
    """A method's trained object: what it learned, and the manifest it is saved with."""

    method: ClassVar[str]  # the name its manifest records (`lail`, `tstr`, ...)
    manifest: dict[str, Any]

    def save(self, directory: Path) -> dict[str, Any]:
        """Write the artifact into `directory` through the store (files first, manifest last); the manifest as
        written."""
        ...

    @classmethod
    def load(cls, directory: Path) -> Self:
        """The artifact saved in `directory`; none there (or another method's) is a one-line error."""
        ...


@dataclass(frozen=True)
class MethodEntry:
    """One trained method: the name manifests record, how messages name its artifact, what it serves, where its
    config, train function and trained class live (`module:name`), and whether `auto` may choose it.

    `in_auto` is earned by measurement: a method whose paired interval against its plain counterpart, at the
    default model, lies above 0 on the planned tasks. Then `auto` (the retriever, the ranker, the docstring
    exemplars) picks its artifact once one is trained for the model that will generate; otherwise the artifact
    serves only where it is asked for by name.
    """

    name: str
    what: str
    kind: str  # "retriever", "docstring retriever" or "ranker"
    config: str
    train: str
    trained: str
    in_auto: bool = False

    def _find(self, spec: str) -> Any:
        module, _, name = spec.partition(":")
        return getattr(importlib.import_module(module), name)

    def trained_class(self) -> type[TrainedMethod]:
        """The class of the trained object (importing its module: torch for some)."""
        return self._find(self.trained)

    def config_class(self) -> type:
        """The method's config dataclass."""
        return self._find(self.config)

    def train_function(self) -> Callable[..., Any]:
        """The method's `train` function (each takes its own data; see its docstring)."""
        return self._find(self.train)


# None is in `auto`: retrained for the 1.5B default and measured against its plain counterpart, none beat it
# (docs/results/methods-1.5b.md), so a trained artifact serves only when its method is asked for by name.
TRAINED_METHODS: dict[str, MethodEntry] = {
    entry.name: entry
    for entry in (
        MethodEntry(
            "lail", "LAIL retriever", "retriever",
            "assistant.methods.lail:LailConfig", "assistant.methods.lail:train_lail", "assistant.methods.lail:Lail",
        ),
        MethodEntry(
            "tstr", "TST^R retriever", "retriever",
            "assistant.methods.tstr:TstrConfig", "assistant.methods.tstr:train_tstr", "assistant.methods.tstr:Tstr",
        ),
        MethodEntry(
            "selfracg", "SelfRACG adapters", "retriever",
            "assistant.methods.selfracg:SelfRacgConfig", "assistant.methods.selfracg:train_selfracg",
            "assistant.methods.selfracg:SelfRacg",
        ),
        MethodEntry(
            "jointcom", "JOINTCOM retriever", "docstring retriever",
            "assistant.methods.jointcom:JointcomConfig", "assistant.methods.jointcom:train_docstring_retriever",
            "assistant.methods.jointcom:Jointcom",
        ),
        MethodEntry(
            "condor", "discriminator", "ranker",
            "assistant.methods.condor.model:CondorConfig", "assistant.methods.condor.model:train_discriminator",
            "assistant.methods.condor.model:Condor",
        ),
    )
}  # fmt: skip


def trained_retrievers() -> list[str]:
    """The methods that train a retriever of demonstrations (one `assist train retriever` subcommand each)."""
    return [name for name, entry in TRAINED_METHODS.items() if entry.kind == "retriever"]


def in_auto(name: str) -> bool:
    """Whether `auto` may choose the trained method `name` once it is trained for the model in use (see
    :class:`MethodEntry`)."""
    return TRAINED_METHODS[name].in_auto
