"""The TUI's dialogs: target file picker, tests editor, settings, history, confirmation."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any, ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Grid, Horizontal, Vertical
from textual.fuzzy import Matcher
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, OptionList, Select, Static, Switch, TextArea
from textual.widgets.option_list import Option

from assistant.backends import describe_backends
from assistant.code.asserts import split_asserts
from assistant.config import DEFAULT_K, DEFAULT_STUB_K
from assistant.errors import UsageError
from assistant.pipeline.registry import RETRIEVER_CHOICES
from assistant.ui.session import Options
from assistant.ui.text import printable

NO_FILE = "\0none"
MARK = "  ✓"  # after a name the picker shows as chosen already
RANKER_CHOICES = ("auto", "logprob", "condor", "exec", "first", "random", "exec+logprob", "exec+condor")
# The settings form's switches for filling a stub, in the order shown: (Options field and widget id, label,
# tooltip). Each is generate's flag of that name (--apis, --own-file, --fragments, --redraw).
STUB_SWITCHES = (
    (
        "apis",
        "Stubs: used APIs",
        "When filling a stub, also show the model the repo's functions from other files that the file calls or imports",
    ),
    (
        "own_file",
        "Stubs: own-file demos",
        "When filling a stub, let the demonstrations be the file's own other functions, whole (the stub itself "
        "never is); else they come from the repo's other files",
    ),
    (
        "fragments",
        "Stubs: code fragments",
        "When filling a stub, show the model k 20-line fragments of the repo's other files, found with the code "
        "before the body, instead of demonstrations (needs `assist index`)",
    ),
    (
        "redraw",
        "Stubs: redraw empty",
        "When filling a stub, draw once more each sample that wrote no body (about one in ten does; the default "
        "engine reuses the prompt it read, so a redraw costs only its own tokens)",
    ),
)


class ConfirmScreen(ModalScreen[bool]):
    """A yes/no question; Escape or "n" says no."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "answer(True)", "Yes"),
        Binding("n,escape", "answer(False)", "No"),
    ]

    def __init__(self, question: str) -> None:
        super().__init__()
        self.question = question

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="dialog"):
            yield Static(self.question, id="question")
            with Horizontal(classes="buttons"):
                yield Button("Yes (y)", id="yes", variant="warning")
                yield Button("No (n)", id="no", variant="primary")

    def on_mount(self) -> None:
        self.query_one("#no", Button).focus()

    @on(Button.Pressed)
    def pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")

    def action_answer(self, answer: bool) -> None:
        self.dismiss(answer)


class FilePicker(ModalScreen[str | None]):
    """Fuzzy-pick the target file from the repo's tracked Python files (or type a new path); with other
    labels, any name from a list (the stub picker; the rewrite picker, which marks the names already chosen).
    Dismisses with the name, "" for none, None on cancel."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Cancel"),
        Binding("down", "focus_list", show=False),
    ]

    def __init__(
        self,
        files: list[str],
        *,
        label: str = "Target file (type to filter, Enter to pick, Escape to cancel)",
        placeholder: str = "path/to/file.py",
        none_label: str = "(no target file)",
        allow_new: bool = True,
        marked: Collection[str] = (),
    ) -> None:
        super().__init__()
        self.files = files
        self.label = label
        self.placeholder = placeholder
        self.none_label = none_label
        self.allow_new = allow_new
        self.marked = frozenset(marked)  # shown with a mark after the name

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog", id="picker"):
            yield Label(self.label)
            yield Input(placeholder=self.placeholder, id="query")
            yield OptionList(id="files")

    def on_mount(self) -> None:
        self.refresh_options("")
        self.query_one("#query", Input).focus()

    def refresh_options(self, query: str) -> None:
        options = self.query_one("#files", OptionList)
        options.clear_options()
        query = query.strip()
        if query:
            matcher = Matcher(query)
            scored = sorted(((matcher.match(name), name) for name in self.files), key=lambda pair: (-pair[0], pair[1]))
            # A file's name is the repo's text: control characters written out before it is shown.
            matches = [(matcher.highlight(printable(name)), name) for score, name in scored if score > 0]
            if self.allow_new and query.endswith(".py") and query not in self.files:
                options.add_option(Option(Text(printable(f"new file: {query}")), id=query))
        else:
            matches = [(Text(printable(name)), name) for name in self.files]
            options.add_option(Option(self.none_label, id=NO_FILE))
        marked = [(label + MARK if name in self.marked else label, name) for label, name in matches[:200]]
        options.add_options([Option(label, id=name) for label, name in marked])
        if options.option_count:
            options.highlighted = 0

    @on(Input.Changed, "#query")
    def changed(self, event: Input.Changed) -> None:
        self.refresh_options(event.value)

    @on(Input.Submitted, "#query")
    def submitted(self) -> None:
        options = self.query_one("#files", OptionList)
        if options.highlighted is not None:
            self.choose(options.get_option_at_index(options.highlighted).id)

    @on(OptionList.OptionSelected, "#files")
    def selected(self, event: OptionList.OptionSelected) -> None:
        self.choose(event.option.id)

    def choose(self, name: str | None) -> None:
        self.dismiss("" if name == NO_FILE else name)

    def action_focus_list(self) -> None:
        self.query_one("#files", OptionList).focus()

    def action_cancel(self) -> None:
        self.dismiss(None)


class TestsEditor(ModalScreen[list[str] | None]):
    """Edit the tests that `exec` ranking and "run tests" use: Python text, cut into one chunk per assert
    (with the statements just before it) by :func:`~assistant.code.asserts.split_asserts`, as `--tests` is."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+s", "save", "Save and run", priority=True),
        Binding("escape", "cancel", "Cancel"),
    ]

    def __init__(self, tests: list[str]) -> None:
        super().__init__()
        self.tests = tests

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog", id="tests-dialog"):
            yield Label("Tests: assert statements (ctrl+s runs them on the selected candidate, Escape cancels)")
            yield TextArea("\n".join(self.tests), id="tests-text", language=None, show_line_numbers=True)
            yield Static("", id="tests-error")

    def on_mount(self) -> None:
        self.query_one("#tests-text", TextArea).focus()

    def action_save(self) -> None:
        text = self.query_one("#tests-text", TextArea).text
        if not text.strip():
            self.dismiss([])  # no tests: candidates are ranked without running them
            return
        try:
            chunks = split_asserts(text, "the text")
        except UsageError as exc:
            self.query_one("#tests-error", Static).update(Text(printable(str(exc))))
            return
        self.dismiss(chunks)

    def action_cancel(self) -> None:
        self.dismiss(None)


class SettingsScreen(ModalScreen[dict[str, Any] | None]):
    """Switch backend, model, retriever, ranker and sampling settings."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+s", "save", "Save", priority=True),
        Binding("escape", "cancel", "Cancel"),
    ]

    def __init__(
        self, options: Options, backend: str, model: str | None, base_url: str | None, engine: str | None = None
    ) -> None:
        """`engine` says what runs the chosen backend when it is not what the registry describes (the local
        backend runs on OpenVINO by default, and its registry entry describes the transformers engine)."""
        super().__init__()
        self.engine = engine
        self.options = options
        self.backend = backend
        self.model = model
        self.base_url = base_url

    def compose(self) -> ComposeResult:
        o = self.options
        with Vertical(classes="dialog", id="settings"):
            yield Label("Settings (ctrl+s saves, Escape cancels)")
            with Grid(id="settings-grid"):
                yield Label("Backend")
                backends = describe_backends()  # the registry, with what each backend is
                backends.setdefault(self.backend, "")
                if self.engine:
                    backends[self.backend] = f"running now: {self.engine}"
                choices = [(f"{name}: {what}" if what else name, name) for name, what in backends.items()]
                yield Select(choices, value=self.backend, allow_blank=False, id="backend")
                yield Label("Model")
                yield Input(self.model or "", placeholder="default", id="model")
                yield Label("Base URL")
                yield Input(self.base_url or "", placeholder="http://127.0.0.1:8080/v1 (openai)", id="base_url")
                yield Label("Retriever")
                yield Select([(r, r) for r in RETRIEVER_CHOICES], value=o.retriever, allow_blank=False, id="retriever")
                yield Label("Ranker")
                rankers = RANKER_CHOICES if o.ranker in RANKER_CHOICES else (*RANKER_CHOICES, o.ranker)
                yield Select([(r, r) for r in rankers], value=o.ranker, allow_blank=False, id="ranker")
                yield Label("Candidates (n)")
                yield Input(str(o.n), type="integer", id="n")
                yield Label("Demonstrations (k)")
                demos = "" if o.k is None else str(o.k)
                yield Input(demos, placeholder=f"auto ({DEFAULT_K}; a stub {DEFAULT_STUB_K})", type="integer", id="k")
                yield Label("Temperature")
                yield Input(str(o.temperature), type="number", id="temperature")
                yield Label("Max new tokens")
                tokens = "" if o.max_new_tokens is None else str(o.max_new_tokens)
                yield Input(tokens, placeholder="auto", type="integer", id="max_new_tokens")
                for name, label, tooltip in STUB_SWITCHES:
                    yield Label(label)
                    yield Switch(getattr(o, name), id=name, tooltip=tooltip)
            yield Static("", id="settings-error")
            with Horizontal(classes="buttons"):
                yield Button("Save (ctrl+s)", id="save", variant="primary")
                yield Button("Cancel", id="cancel")

    @on(Button.Pressed, "#save")
    def action_save(self) -> None:
        def text(name: str) -> str:
            return self.query_one(f"#{name}", Input).value.strip()

        try:
            values = {
                "backend": self.query_one("#backend", Select).value,
                "model": text("model") or None,
                "base_url": text("base_url") or None,
                "retriever": self.query_one("#retriever", Select).value,
                "ranker": self.query_one("#ranker", Select).value,
                "n": int(text("n")),
                "k": int(text("k")) if text("k") else None,
                "temperature": float(text("temperature")),
                "max_new_tokens": int(text("max_new_tokens")) if text("max_new_tokens") else None,
                "apis": self.query_one("#apis", Switch).value,
                "redraw": self.query_one("#redraw", Switch).value,
                "fragments": self.query_one("#fragments", Switch).value,
                "own_file": self.query_one("#own_file", Switch).value,
            }
        except ValueError:
            self.query_one("#settings-error", Static).update("n, k, temperature and max new tokens must be numbers")
            return
        self.dismiss(values)

    @on(Button.Pressed, "#cancel")
    def action_cancel(self) -> None:
        self.dismiss(None)


class HistoryScreen(ModalScreen[dict[str, Any] | None]):
    """Browse this repo's past requirements and applied candidates; Enter loads one back."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Close")]

    def __init__(self, entries: list[dict[str, Any]]) -> None:
        super().__init__()
        self.entries = entries

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog", id="history"):
            yield Label("History, newest first (Enter loads the requirement, Escape closes)")
            yield OptionList(id="history-list")

    def on_mount(self) -> None:
        options = self.query_one("#history-list", OptionList)
        if not self.entries:
            options.add_option(Option("no history yet in this repo", disabled=True))
        for number, entry in enumerate(self.entries):
            what = {"generate": "asked", "apply": "applied", "undo": "undid"}.get(entry.get("event", ""), "?")
            target = f"  → {entry['target']}" if entry.get("target") else ""
            when = str(entry.get("time", ""))[:16].replace("T", " ")
            requirement = " ".join(str(entry.get("requirement", "")).split())[:70]
            options.add_option(Option(Text(printable(f"{when}  {what:<7} {requirement}{target}")), id=str(number)))
        options.focus()

    @on(OptionList.OptionSelected)
    def selected(self, event: OptionList.OptionSelected) -> None:
        if event.option.id is not None:
            self.dismiss(self.entries[int(event.option.id)])

    def action_cancel(self) -> None:
        self.dismiss(None)
