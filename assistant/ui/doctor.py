"""`assist doctor`: one screen that says whether this install can be trusted, each line OK or what to do.

Checks, in order: the models (downloaded, converted and checked against their manifest), the index of
the repo you stand in (present, readable, up to date), where the settings come from, which sandbox
layers this kernel gives (Landlock, seccomp, no_new_privs, capabilities, dumpable, the audit hook), and
the optional extras. Fast: no model or encoder is loaded; the sandbox check runs one trivial candidate.

Each :class:`Check` has ``ok``: True (fine), None (works, but worth knowing or fixing), False (broken).
:func:`doctor_report` returns them, :func:`render` makes the screen, :func:`to_json` the ``--json`` form.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path

from assistant.errors import AssistError, UsageError, install_extra
from assistant.ui.text import counted


@dataclass(frozen=True)
class Check:
    """One line of the doctor's report."""

    name: str  # e.g. "model qwen2.5-coder-0.5b", "sandbox landlock"
    ok: bool | None  # True fine, None a warning, False broken
    detail: str  # what was found, one line
    fix: str | None = None  # what to do, when not fine


def doctor_report(root: Path | None = None) -> list[Check]:
    """Every check; the index is that of the repo containing `root` (default: the working directory).

    Settings are always those that apply in the working directory (as for every other command).
    """
    start = Path(root) if root is not None else Path.cwd()
    return [
        *model_checks(),
        *warm_checks(),
        *index_checks(start),
        *trained_checks(start),
        *hook_checks(start),
        *tests_python_checks(start),
        *config_checks(),
        *sandbox_checks(),
        *extra_checks(),
    ]


def render(checks: list[Check]) -> str:
    """The report as plain text: one line per check, a fix under each that needs one, a summary line."""
    labels = {True: "OK  ", None: "WARN", False: "FAIL"}
    width = max((len(check.name) for check in checks), default=0)
    lines = []
    for check in checks:
        lines.append(f"{labels[check.ok]}  {check.name:<{width}}  {check.detail}")
        if check.ok is not True and check.fix:
            lines.append(f"      {'':<{width}}  -> {check.fix}")
    failed = sum(check.ok is False for check in checks)
    warned = sum(check.ok is None for check in checks)
    lines.append(f"{len(checks)} checks: {failed} failed, {warned} to look at")
    return "\n".join(lines)


def to_json(checks: list[Check]) -> str:
    """The report for `assist doctor --json`: a list of {name, ok, detail, fix}."""
    return json.dumps([asdict(check) for check in checks], indent=1)


def exit_code(checks: list[Check]) -> int:
    """1 when any check failed (warnings do not count), else 0."""
    return 1 if any(check.ok is False for check in checks) else 0


# --- models ------------------------------------------------------------------------------------------


def model_checks() -> list[Check]:
    """Each registered model: ready and verified (default ones must be), or what to run."""
    from assistant.backends.models import (
        DEFAULT_ENCODER,
        DEFAULT_GENERATOR,
        REGISTRY,
        encoder_dir,
        generator_dir,
        ov_encoder_failure,
        ov_encoder_ready,
        ov_ready,
        status,
        weights_for,
    )

    checks = []
    asked = weights_setting()  # read once: every generator's OpenVINO folder is the one of these weights
    for spec in REGISTRY.values():
        name = f"model {spec.name}"
        default = spec.name in (DEFAULT_GENERATOR, DEFAULT_ENCODER)
        pull = f"assist models pull {spec.name}"
        try:
            state = status(spec)
            if state == "ready":
                # Verified: the encoder's files are where its package says; a generator's converted files
                # match the sizes recorded when its sha256-checked GGUF was converted.
                where = encoder_dir(spec) if spec.kind == "encoder" else generator_dir(spec)
                engine = ""
                if spec.kind == "generator":
                    weights = weights_for(spec.name, asked)
                    converted = ov_ready(spec, weights)
                    # ~30 s for the 0.5B, ~1 min for the 1.5B on 2 cores (measured 62 s, the machine shared)
                    made = "ready" if converted else "made on first use (~30 s to 1 min)"
                    engine = f"; OpenVINO {weights} {made}"
                else:
                    failure = ov_encoder_failure(spec)
                    if ov_encoder_ready(spec):
                        engine = "; OpenVINO ready"
                    elif failure:
                        engine = f"; runs on torch: {failure} (`{pull} --force` tries again)"
                    else:
                        engine = "; OpenVINO made on first use (~15 s)"
                checks.append(Check(name, True, f"ready and verified ({spec.kind}, {where}){engine}"))
                continue
            if state == "ready (openvino)":
                checks.append(
                    Check(
                        name,
                        True,
                        "ready for the OpenVINO engine (the default); training and --engine transformers need "
                        f"the transformers copy: {pull}",
                    )
                )
                continue
        except AssistError as exc:
            checks.append(Check(name, False, str(exc), f"{pull} --force"))
            continue
        if default:
            checks.append(Check(name, False, f"{state} (the default {spec.kind})", pull))
        else:
            # An optional model not downloaded is not a problem: say what it is and how to get it, as an OK line.
            checks.append(Check(name, True, f"{state} (optional {spec.kind}: {spec.description}; {pull})"))
    return checks + _generator_in_use_check()


def _generator_in_use_check() -> list[Check]:
    """When the settings leave the local generator at its default (the 1.5B), a line naming the fast, low-memory
    choice; nothing for another model or a server (a settings file that does not load is config's line)."""
    from assistant.backends.models import DEFAULT_GENERATOR, FAST_GENERATOR, resolve
    from assistant.config import load_settings

    try:
        settings = load_settings(check_trust=False)
        in_use = resolve(settings.model).name
    except UsageError:
        return []
    if not settings.backend.startswith("local") or in_use != DEFAULT_GENERATOR:
        return []
    fast = f'{FAST_GENERATOR} is the fast, low-memory choice (--model {FAST_GENERATOR}, or model = "{FAST_GENERATOR}")'
    return [Check("model in use", True, f"{in_use} (the default); {fast}")]


def warm_checks() -> list[Check]:
    """The warm model servers that run (`assist serve`), and whether commands here would use them."""
    from assistant.backends import warm
    from assistant.ui.serve_cmd import describe_server

    try:
        servers = warm.all_servers()
    except warm.Refused as exc:
        return [Check("warm server", None, str(exc), "remove that folder; assist makes it again, private")]
    wanted, mode = _warm_wanted()
    if not servers:
        return [Check("warm server", True, f"none runs (local.warm = {mode}); `assist serve` keeps the model loaded")]
    checks = []
    for path, state, why in servers:
        if state is None:
            checks.append(Check(f"warm server {path.stem}", None, why or "", f"remove {path}"))
            continue
        used = mode != "off" and wanted is not None and state.matches(*wanted)
        note = "used by commands here" if used else f"not used here (local.warm = {mode}, or other settings)"
        checks.append(Check(f"warm server {state.model}", True, f"{note}: {describe_server(state)}"))
    return checks


def weights_setting() -> str:
    """The local.weights setting here (auto where the settings cannot be read: their own check says why)."""
    from assistant.config import load_settings

    try:
        return load_settings(check_trust=False)["local.weights"]
    except UsageError:
        return "auto"


def _warm_wanted() -> tuple[tuple[str, str, str, int | None, str] | None, str]:
    """What a command here would ask a warm server for (model, engine, decoding, context, weights), and
    local.warm."""
    from assistant.backends.models import resolve, weights_for
    from assistant.backends.ov import decoding_for
    from assistant.config import load_settings

    try:
        settings = load_settings(check_trust=False)
        mode = settings["local.warm"]
        if settings.backend != "local" or settings["local.engine"] != "openvino":
            return None, mode
        model = resolve(settings.model, "generator").name
        decoding = decoding_for(model, settings["local.decoding"])
        weights = weights_for(model, settings["local.weights"])
        return (model, "openvino", decoding, settings["local.context"], weights), mode
    except UsageError:
        return None, "?"


# --- the repo's index ----------------------------------------------------------------------------------


def index_checks(start: Path) -> list[Check]:
    """The index of the repo containing `start`: present, readable, and built from the current files."""
    from assistant.code.extract import git_blob_hash, read_repo_file
    from assistant.indexing.files import repo_files, utf8_name
    from assistant.indexing.index import (
        NO_DEMONSTRATIONS,
        NO_FUNCTIONS,
        holds_nothing,
        load_existing,
        repo_index_dir,
        repo_root,
    )

    try:
        root = repo_root(start)
    except UsageError:
        return [
            Check(
                "index",
                None,
                f"{start.resolve()} is not in a git repo: generate retrieves from the default bank",
                "run `assist index` inside a git repo to retrieve from its functions",
            )
        ]
    try:
        directory = repo_index_dir(root)  # only looks: nothing is created
    except UsageError as exc:  # a link or submodule the repo ships in .assist/
        return [Check("index", False, str(exc), f"remove it from the repo (git rm --cached) and from {root}")]
    try:
        index = load_existing(directory)
    except UsageError as exc:
        return [Check("index", False, str(exc), "assist index (it rebuilds an unreadable index)")]
    if index is None:
        return [Check("index", None, f"{root} is not indexed yet", "assist index")]
    indexed: dict[str, str] = dict(index.meta.get("files", {}))
    try:
        listed = repo_files(root).indexed  # what `assist index` reads: tracked files, and untracked ones not ignored
    except (OSError, subprocess.SubprocessError, UsageError) as exc:
        return [Check("index", None, f"{len(index)} functions indexed; cannot list the repo's files ({exc})")]
    current = {}
    for rel in filter(utf8_name, listed):  # the index leaves a name that is not UTF-8 out
        data = read_repo_file(root, rel)  # what the index would read: no links, nothing outside
        if data is not None:
            current[rel] = git_blob_hash(data)
    changed = sum(current.get(rel) != blob for rel, blob in indexed.items()) + len(set(current) - set(indexed))
    summary = f"{len(index)} functions from {len(indexed)} files in {directory}"
    if index.encoder_name:
        summary += f", encoder {index.encoder_name}"
    if changed:
        return [
            Check("index", None, f"{summary}; {counted(changed, 'file')} changed since it was built", "assist index")
        ]
    if not len(index):  # a repo with no Python yet: generate retrieves from the default bank
        note = NO_FUNCTIONS if holds_nothing(root, index) else NO_DEMONSTRATIONS
        return [Check("index", True, f"{summary}, up to date; {note}")]
    return [Check("index", True, summary + ", up to date")]


# --- settings ------------------------------------------------------------------------------------------


def trained_checks(start: Path) -> list[Check]:
    """The trained methods, one line each: method, pool, the generator it was trained for and when, whether it
    serves the model in use, and how to ask for it where `auto` leaves it out. Never a warning: training is
    optional."""
    from assistant.indexing.index import repo_root
    from assistant.methods import in_auto
    from assistant.methods.artifacts import NO_GENERATOR, inventory
    from assistant.ui.errors import ASKED_BY

    try:
        root: Path | None = repo_root(start)
    except UsageError:
        root = None
    try:
        found = inventory(root)
    except UsageError:  # the repo ships files in .assist/ (the index line says so): the user's own only
        found = inventory(None)
    if not found:
        return [Check("trained", True, "no trained retriever or discriminator (optional: `assist train --help`)")]
    current = _model_in_use()
    lines = []
    for item in found:
        generator = item["generator"]
        made = {None: "an unknown model", NO_GENERATOR: "any model (no generator enters it)"}.get(generator)
        fits = generator == NO_GENERATOR or (current is not None and generator == current)
        used = "serves" if fits else "does not serve"
        serving = f"; {used} {current}" if current is not None else ""  # settings that do not load: no model to name
        if not item["serves"]:
            serving = "; kept beside stage 1 + 2 (the ablation without stage 2), not served"
        elif fits and not in_auto(item["method"]):
            serving += f" when named ({ASKED_BY.get(item['method'], 'by name')}; auto leaves it out)"
        variant = f"{item['variant']}, " if item.get("variant") else ""
        detail = f"for {made or generator}, {item['trained'][:10]}, {variant}on {item['pool']}{serving}"
        lines.append(Check(f"trained {item['method']}", True, detail))
    return lines


def _model_in_use() -> str | None:
    """The model `generate` would use here, by name (None when the settings do not load)."""
    from assistant.backends.models import resolve
    from assistant.config import load_settings

    try:
        settings = load_settings(check_trust=False)
        return resolve(settings.model).name if settings.backend.startswith("local") else settings.model
    except UsageError:
        return None


def tests_python_checks(start: Path) -> list[Check]:
    """Which interpreter runs the repo's tests and a stub's candidates in their module here, and where it came from
    (found, never run: importing the repo's code here would run it outside the sandbox)."""
    from assistant.core.home import found_python
    from assistant.paths import git_toplevel

    root = git_toplevel(start)
    if root is None:
        return []
    python, origin = found_python(root)
    if origin == "assist's own":
        why = "assist's own (no .venv or venv in the repo, no active virtualenv): give --python where the project "
        return [Check("tests python", True, f"{python}, {why}needs other packages, or its tests cannot run")]
    return [Check("tests python", True, f"{python}, {origin}: the repo's tests and a stub's candidates run with it")]


def hook_checks(start: Path) -> list[Check]:
    """The repo's pre-commit hook, when assist wrote it: current, or one an older assist wrote that runs
    `python -m assistant` without `-P`, so a package named `assistant` at the repo's top would be imported."""
    from assistant.code.git import KEPT, MARKER, hook_path

    try:
        path = hook_path(start)
        text = path.read_text(errors="replace") if path.is_file() else ""
    except (UsageError, OSError):
        return []
    if MARKER not in text:
        return []  # none, or not assist's
    kept = path.with_name(KEPT)
    if os.path.lexists(kept) and KEPT not in text:  # an older assist kept it aside, unused
        fix = "assist hook uninstall (puts it back), or assist hook install (runs it first)"
        return [Check("hook", None, f"{path} does not run the hook it replaced, {kept.name}", fix)]
    if " -P -m assistant " in text:
        return [Check("hook", True, f"{path}: assist's pre-commit hook")]
    again = "assist hook install --check-only" if "--check" in text else "assist hook install"
    return [
        Check(
            "hook",
            None,
            f"{path} was written by an older assist: it would import a package named `assistant` from the repo",
            f"{again} (rewrites it)",
        )
    ]


def config_checks() -> list[Check]:
    """Where the effective settings come from (for the working directory); a file that does not load fails."""
    from assistant.backends import backend_class
    from assistant.config import ConfigFileError, load_settings
    from assistant.pipeline.options import GenerationOptions

    try:
        settings = load_settings(check_trust=False)  # report an untrusted repo file, do not refuse
    except ConfigFileError as exc:  # `assist config show` fails on the same file: point at the file itself
        at = f" at line {exc.line}" if exc.line is not None else ""
        return [Check("config", False, str(exc), f"fix {exc.path}{at}, or move it away")]
    except UsageError as exc:  # an environment variable's value (`assist config show` reads it too), the trust record
        fix = "fix or unset the variable it names" if " from env " in str(exc) else "fix what it names"
        return [Check("config", False, str(exc), fix)]
    try:
        rows = settings.describe()
        # What `generate` would refuse, refused here too: an unknown backend, retriever or ranker name.
        backend_class(settings.backend)
        GenerationOptions.from_settings(settings).check()
    except UsageError as exc:
        fix = "fix or unset the variable" if str(exc).startswith("ASSIST_") else "fix or remove the setting it names"
        return [Check("config", False, str(exc), f"{fix} (`assist config show`)")]
    by_key = {row["key"]: row for row in rows}
    chosen = [row for row in rows if row["source"] != "default"]
    sources = sorted({row["source"] for row in chosen})
    backend = by_key.get("backend")
    parts = []
    if backend is not None:
        parts.append(f"backend {backend['value']} ({backend['source']})")
    parts.append(f"{counted(len(chosen), 'setting')} not default" + (f", from {', '.join(sources)}" if sources else ""))
    checks = [Check("config", True, "; ".join(parts))]
    repo = settings.repo
    if repo is not None:
        state = repo.describe_trust(settings.backend)
        needs_trust = bool(repo.routing(settings.backend)) and not repo.trusted
        checks.append(
            Check(
                "repo config",
                None if needs_trust else True,
                f"{repo.path}: {state}",
                "assist config trust (after reading the file)" if needs_trust else "",
            )
        )
    return checks


# --- the sandbox -------------------------------------------------------------------------------------------

_SANDBOX_FIXES = {
    "landlock": "use Linux 5.13+ with Landlock enabled (lsm=...,landlock); until then only the audit hook "
    "guards the filesystem and the network",
    "seccomp": "on x86_64/aarch64 Linux with seccomp; until then only the audit hook stops fork, exec and "
    "signals to other processes",
    "no_new_privs": "needs Linux; Landlock and seccomp depend on it",
    "caps": "needs Linux; or run assist as an unprivileged user",
    "dumpable": "needs Linux",
    "hook": "unset ASSIST_SANDBOX_DISABLE",
}


def sandbox_checks() -> list[Check]:
    """One line per sandbox layer, as a real sandboxed run on this machine reported it."""
    from assistant import sandbox

    try:
        layers = sandbox.boundary_layers()
    except UsageError as exc:  # a bad ASSIST_SANDBOX_DISABLE
        return [Check("sandbox", False, str(exc), f"fix or unset {sandbox.DISABLE_ENV}")]
    checks = []
    for name in sandbox.LAYERS:
        on, detail = layers[name]
        if on:
            checks.append(Check(f"sandbox {name}", True, detail))
        elif "ASSIST_SANDBOX_DISABLE" in detail:
            checks.append(Check(f"sandbox {name}", None, detail, f"unset {sandbox.DISABLE_ENV} (meant for tests)"))
        elif detail.startswith("failed"):
            checks.append(Check(f"sandbox {name}", False, detail, "report this: the kernel offers the layer"))
        else:
            checks.append(Check(f"sandbox {name}", None, f"not available: {detail}", _SANDBOX_FIXES[name]))
    checks.append(_memory_check())
    checks.append(_namespaces_check())
    checks.append(_root_check())
    return checks


def _memory_check() -> Check:
    """Which boundary keeps a sandboxed run inside its memory limit on this kernel (RLIMIT_AS misses memfd pages)."""
    from assistant import sandbox

    on, detail = sandbox.memory_boundary()
    if on:
        return Check("sandbox memory", True, detail)
    fix = "use x86_64/aarch64 Linux with seccomp, or unset ASSIST_SANDBOX_DISABLE; until then memfd pages escape it"
    return Check("sandbox memory", None, detail, fix)


def _root_check() -> Check:
    """Whether a project's test suite runs in a root of its own (no socket file of the host to connect to)."""
    from assistant import sandbox
    from assistant.sandbox import boundary

    name = "sandbox root"
    off = sorted({"namespaces", "root"} & sandbox.disabled_layers())
    if off:
        return Check(name, None, f"{off[0]} disabled by ASSIST_SANDBOX_DISABLE", f"unset {sandbox.DISABLE_ENV}")
    on, detail = boundary.root_available()
    if on:
        return Check(name, True, "project test suites run in a root holding only what Landlock grants")
    return Check(
        name,
        None,
        f"not available ({detail}): a project's tests can connect to a unix socket file they can reach (a docker "
        "or tmux socket)",
        "the namespaces above are needed, and the kernel must allow mounts in them",
    )


def _namespaces_check() -> Check:
    """Whether a project's test suite (`--test-cmd`, `eval repo`) can run in namespaces of its own."""
    from assistant import sandbox
    from assistant.sandbox import boundary

    name = "sandbox namespaces"
    if "namespaces" in sandbox.disabled_layers():
        return Check(name, None, "disabled by ASSIST_SANDBOX_DISABLE", f"unset {sandbox.DISABLE_ENV} (meant for tests)")
    on, detail = boundary.namespaces_available()
    if on:
        return Check(name, True, f"project test suites run in their {detail}")
    return Check(
        name,
        None,
        f"not available ({detail}): a project's tests may use UDP and System V IPC, connect to a unix socket file "
        "they can reach (a docker or tmux socket), and a process they start in a session of its own may outlive "
        "the run",
        "run assist where unprivileged user namespaces are allowed (sysctl kernel.unprivileged_userns_clone=1; on "
        "Ubuntu 24.04+ kernel.apparmor_restrict_unprivileged_userns=0), or in a container that permits unshare",
    )


# --- optional extras -----------------------------------------------------------------------------------------

_EXTRAS = (
    ("matplotlib", "eval", "PNG charts in `assist eval report`", "the report is written without its charts"),
    (
        "llama_cpp",
        "serve",
        "`assist serve --engine llama.cpp` (llama.cpp's server; pip builds it, up to an hour on 2 cores)",
        "`assist serve` runs on the built-in OpenVINO engine",
    ),
)


def extra_checks() -> list[Check]:
    """Optional extras, installed or not: every line is OK, since assist works without them (a missing one says
    what it would add, what happens without it, and how to install it)."""
    checks = []
    for module, extra, purpose, without in _EXTRAS:
        if importlib.util.find_spec(module) is not None:
            checks.append(Check(f"extra {extra}", True, f"{module} installed: {purpose}"))
        else:
            detail = f"{module} not installed (optional; {without}): for {purpose}, {install_extra(extra)}"
            checks.append(Check(f"extra {extra}", True, detail))
    return checks
