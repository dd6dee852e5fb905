"""Issue 69's acceptance in one run: a stub's latency cold and warm, the first visible token, decode speed, cancel
latency and agree's cost, measured one part after another in one session and printed as one table.

    python benchmarks/speed_report.py [--model qwen2.5-coder-1.5b] [--stubs 20]
        [--parts stub,first-token,decoding,cancel,agree] [--json OUT]

Each part is an existing script, run as a subprocess with `--json FILE` (never two model jobs at once; their own
output goes to this terminal as they run):

- stub: `stub_latency.py`: `assist generate --function NAME -n 5` on `--stubs` stubs of the repository benchmark,
  p50 and p90 cold (a fresh process, no server) and warm (a server running). Goal (the 1.5B): warm p50 <= 12 s, and
  no request over twice the median.
- first-token: `first_token.py`, once in-process and once through a warm server of the model that this script
  starts (and checks that it answered). Goal: the first visible token <= 2 s, warm.
- decoding: `decoding_speed.py --tokens T`: tokens/s plain, speculative and prompt-lookup, the 0.5B's for reference.
- cancel: `cancel_latency.py --runs R` (no model): Escape in the TUI under Textual's Pilot, SIGINT to the CLI.
  Goal: under 1 s, no process left.
- agree: `agree_cost.py --stubs N --warm` (N: `--agree-stubs`, else `--stubs`): agree's test-writing call's cost
  per request, before (a call of its own after sampling) and after (decoded with the samples), and whether its
  tests stayed identical (then its pass@1 on the committed candidates cannot move; agree_cost.py says why);
  skipped with a note where that script is not there.

Before each part it waits up to `--settle` seconds for the 1-minute load average to fall to 0.5 (a part that has
just ended leaves its own load in the average for minutes), then records it and the share of CPU time in use over a
few seconds; after the part, the load again. A part that began on a machine that was not idle is flagged in the
table: its figures are inflated. A warm server of the model that runs before a part that starts its own is stopped
first (with a note).

Prints the machine's facts (cores, CPU, AVX2 / AVX-512 / AMX, memory, commit, versions), then one Markdown table
(what, figure, goal, met?). The report (facts, each part's exit status, seconds, load and figures, the table) is
written to OUT (default: a file in the temp folder, named at the start) each time a part ends, so a stopped run keeps
the parts it finished. Exit status 1 when a part failed. Nothing is asserted: run it on an otherwise idle machine.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import importlib.util
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

ROOT = Path(__file__).resolve().parent.parent
BENCHMARKS = ROOT / "benchmarks"
PARTS = ("stub", "first-token", "decoding", "cancel", "agree")
SERVER_PARTS = ("stub", "first-token", "agree")  # they start a warm server of the model themselves
IDLE_LOAD = 0.5  # a 1-minute load average above this is not an idle machine
BUSY_SHARE = 0.1  # ... unless the CPUs are this idle now (the average still falls from the part before)
BUSY_WINDOW_S = 3.0
GOAL_MODEL = "qwen2.5-coder-1.5b"  # the issue sets the warm p50 goal for the 1.5B
WARM_P50_S = 12.0
SPREAD = 2.0  # no request over twice the median
FIRST_TOKEN_S = 2.0
CANCEL_S = 1.0

Row = tuple[str, str, str, str]  # what, figure, goal, met?


def _names(text: str) -> list[str]:
    """`--parts`: a comma-separated subset of PARTS, run in PARTS' order."""
    wanted = {name.strip() for name in text.split(",") if name.strip()}
    unknown = sorted(wanted - set(PARTS))
    if unknown or not wanted:
        named = ", ".join(map(repr, unknown)) or repr(text)
        raise argparse.ArgumentTypeError(f"unknown part {named}; choose from {','.join(PARTS)}")
    return [name for name in PARTS if name in wanted]


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number of 1 or more, not {text!r}")
    return value


def _generator(text: str) -> str:
    """`--model`: a registered generator's name (an alias resolved, so that goals and engines find it)."""
    from assistant.backends.models import resolve
    from assistant.errors import UsageError

    try:
        return resolve(text, "generator").name
    except UsageError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _parser() -> argparse.ArgumentParser:
    from assistant.backends.models import DEFAULT_GENERATOR

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=_generator, default=DEFAULT_GENERATOR, help="the generator (default: assist's)")
    parser.add_argument("--stubs", type=_positive, default=20, help="stubs of the stub part (default 20)")
    parser.add_argument("--agree-stubs", type=_positive, help="stubs of the agree part (default: --stubs)")
    parser.add_argument("--parts", type=_names, default=list(PARTS), help=f"a subset of {','.join(PARTS)} (all)")
    parser.add_argument("--tokens", type=_positive, default=96, help="decoding: most new tokens a row (default 96)")
    parser.add_argument("--runs", type=_positive, default=5, help="cancel: runs of each (default 5)")
    parser.add_argument(
        "--settle", type=float, default=90.0, help="seconds to wait for the load to fall to 0.5 before a part (90)"
    )
    parser.add_argument("--json", metavar="OUT", help="the report (default: a file in the temp folder)")
    return parser


# -- the machine ------------------------------------------------------------------------------------------------


def _cpuinfo() -> dict[str, str]:
    """The first processor's fields of /proc/cpuinfo (empty where there is none)."""
    fields: dict[str, str] = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").splitlines():
            key, _, value = line.partition(":")
            fields.setdefault(key.strip(), value.strip())
    return fields


def _memory_gb() -> float | None:
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path("/proc/meminfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 1024**2, 1)
    return None


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def _commit() -> str:
    """HEAD's short hash, and whether the measured code (assistant/, benchmarks/) has uncommitted changes."""
    git = ["git", "-C", str(ROOT)]
    head = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False)
    if head.returncode:
        return "unknown (not a git checkout)"
    status = [*git, "status", "--porcelain", "--untracked-files=no", "--", "assistant", "benchmarks"]
    changed = subprocess.run(status, capture_output=True, text=True, check=False).stdout.strip()
    return head.stdout.strip() + (" with uncommitted changes in assistant/ or benchmarks/" if changed else "")


def machine_facts() -> dict[str, Any]:
    """What the figures depend on: cores, CPU and its vector extensions, memory, commit, versions, warm servers."""
    cpu = _cpuinfo()
    flags = set(cpu.get("flags", "").split())
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {
        "date_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
        "commit": _commit(),
        "cores": os.cpu_count(),
        "usable_cores": usable,
        "cpu": cpu.get("model name") or platform.processor() or "unknown",
        "avx2": "avx2" in flags,
        "avx512": sorted(flag for flag in flags if flag.startswith("avx512")),
        "amx": sorted(flag for flag in flags if flag.startswith("amx")),
        "memory_gb": _memory_gb(),
        "python": platform.python_version(),
        "openvino_genai": _version("openvino-genai"),
        "warm_servers": _warm_servers(),
    }


def describe(facts: dict[str, Any]) -> str:
    """The facts as Markdown list lines."""
    lines = [
        f"- {facts['date_utc']} UTC, commit {facts['commit']}",
        f"- CPU: {facts['cpu']}; {facts['cores']} cores ({facts['usable_cores']} usable); "
        f"AVX2 {'yes' if facts['avx2'] else 'no'}; AVX-512 {' '.join(facts['avx512']) or 'no'}; "
        f"AMX {' '.join(facts['amx']) or 'no'}; {facts['memory_gb']} GB memory",
        f"- Python {facts['python']}, openvino-genai {facts['openvino_genai']}",
    ]
    if facts["warm_servers"]:
        lines.append("- warm servers running at the start: " + "; ".join(facts["warm_servers"]))
    return "\n".join(lines)


def _load() -> list[float]:
    return [round(value, 2) for value in os.getloadavg()]


def _cpu_busy(seconds: float) -> float | None:
    """The share of all CPUs' time spent working over the next `seconds` (None without /proc/stat)."""

    def times() -> tuple[int, int]:
        values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:9]]
        return sum(values), values[3] + values[4]  # all, idle + waiting for I/O

    try:
        total, idle = times()
        time.sleep(seconds)
        total_after, idle_after = times()
    except (OSError, ValueError, IndexError):
        return None
    return round(1 - (idle_after - idle) / max(1, total_after - total), 3)


def settle(limit_s: float) -> dict[str, Any]:
    """Wait up to `limit_s` for the 1-minute load to fall to IDLE_LOAD, then the load averages and the CPUs' busy
    share over BUSY_WINDOW_S."""
    started = time.monotonic()
    if os.getloadavg()[0] > IDLE_LOAD and limit_s > 0:
        print(f"waiting up to {limit_s:g} s for the load ({os.getloadavg()[0]:.2f}) to fall to {IDLE_LOAD}", flush=True)
    while os.getloadavg()[0] > IDLE_LOAD and time.monotonic() - started < limit_s:
        time.sleep(5)
    busy = _cpu_busy(BUSY_WINDOW_S)
    return {"load": _load(), "busy": busy, "waited_s": round(time.monotonic() - started, 1)}


# -- warm servers -------------------------------------------------------------------------------------------------


def _assist(*options: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "assistant", *options], capture_output=True, text=True, check=False)


def _warm_servers(model: str | None = None) -> list[str]:
    """`assist serve --status`'s lines: the warm servers that run (of `model` only, if given)."""
    status = _assist("serve", "--status", *(["--model", model] if model else []))
    lines = [line for line in status.stdout.splitlines() if line.strip()]
    return [] if not lines or lines[0].startswith("No warm model server runs") else lines


def _idle_s(model: str) -> float | None:
    """Seconds since the warm server of `model` last answered (0 while busy; None if none runs or it won't say)."""
    for line in _warm_servers(model):
        if re.search(r", busy \(", line):
            return 0.0
        found = re.search(r"idle for (\d+) s", line)
        if found:
            return float(found.group(1))
    return None


def _benchmark(name: str) -> ModuleType:
    """benchmarks/`name`.py as a module (the folder is not a package)."""
    spec = importlib.util.spec_from_file_location(f"benchmark_{name}", BENCHMARKS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@contextlib.contextmanager
def _served(model: str) -> Iterator[float]:
    """A warm server of `model` for the block (started as stub_latency.py starts it); its start-up seconds."""
    server, startup = _benchmark("stub_latency")._serve(model)
    try:
        yield startup
    finally:
        _assist("serve", "--stop", "--model", model)
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


# -- the parts ----------------------------------------------------------------------------------------------------


def _run(script: str, out: Path, *options: str) -> tuple[int, Any]:
    """Run benchmarks/`script`.py with `--json out`, its output to this terminal; its exit status and JSON."""
    print(f"$ {script}.py {' '.join(options)}", flush=True)
    argv = [sys.executable, str(BENCHMARKS / f"{script}.py"), *options, "--json", str(out)]
    code = subprocess.run(argv, cwd=ROOT, check=False).returncode
    return code, json.loads(out.read_text(encoding="utf-8")) if out.is_file() else None


def run_stub(args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    code, figures = _run("stub_latency", folder / "stub.json", "--model", args.model, "--stubs", str(args.stubs))
    return {"exit": code, "figures": figures}


def run_first_token(args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    """In-process (the model loaded in the request), then through a warm server started here: was it used?"""
    code, local = _run("first_token", folder / "first-token.json", "--model", args.model)
    with _served(args.model) as startup:
        started = time.monotonic()
        out = folder / "first-token-server.json"
        served_code, served = _run("first_token", out, "--model", args.model, "--server")
        idle = _idle_s(args.model)  # the server's idle time runs from the last request it answered
    figures = {
        "in_process": (local or [None])[0],
        "server": (served or [None])[0],
        "server_used": idle is not None and idle < time.monotonic() - started,
        "server_startup_s": round(startup, 1),
    }
    return {"exit": code or served_code, "figures": figures}


def run_decoding(args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    out = folder / "decoding.json"
    code, figures = _run("decoding_speed", out, "--model", args.model, "--tokens", str(args.tokens))
    return {"exit": code, "figures": figures}


def run_cancel(args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    code, figures = _run("cancel_latency", folder / "cancel.json", "--runs", str(args.runs))
    return {"exit": code, "figures": figures}


def run_agree(args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    out = folder / "agree.json"
    stubs = str(args.agree_stubs or args.stubs)
    code, figures = _run("agree_cost", out, "--model", args.model, "--stubs", stubs, "--warm")
    return {"exit": code, "figures": figures}


RUNNERS: dict[str, Callable[[argparse.Namespace, Path], dict[str, Any]]] = {
    "stub": run_stub,
    "first-token": run_first_token,
    "decoding": run_decoding,
    "cancel": run_cancel,
    "agree": run_agree,
}


def _unavailable(part: str) -> str | None:
    """Why `part` cannot run here (None when it can)."""
    if part == "agree" and not (BENCHMARKS / "agree_cost.py").is_file():
        return "benchmarks/agree_cost.py is not there (yet)"
    return None


def run_part(part: str, args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    """One part, once the machine has settled: exit status, figures, seconds, load before and after."""
    print(f"\n## {part}", flush=True)
    missing = _unavailable(part)
    if missing:
        print(f"skipped: {missing}", flush=True)
        return {"skipped": missing}
    result: dict[str, Any] = {}
    if part in SERVER_PARTS and _warm_servers(args.model):  # the part's own server would not start beside it
        print(f"stopping the warm server of {args.model} that runs (the part starts its own)", flush=True)
        result["server_stopped_before"] = _assist("serve", "--stop", "--model", args.model).stdout.strip()
    result["before"] = settle(args.settle)
    started = time.monotonic()
    try:
        result |= RUNNERS[part](args, folder)
    except (SystemExit, OSError, subprocess.SubprocessError, ValueError) as exc:  # SystemExit: a server that ended
        result |= {"exit": 1, "error": f"{type(exc).__name__}: {exc}"}
    result |= {"seconds": round(time.monotonic() - started, 1), "after": _load()}
    return result


# -- the table ----------------------------------------------------------------------------------------------------


def _met(ok: bool) -> str:
    return "yes" if ok else "no"


def _s(value: float | None) -> str:
    return "none" if value is None else f"{value:g} s"


def stub_rows(figures: dict[str, Any], model: str) -> list[Row]:
    """Cold and warm p50 / p90 and spread of `generate --function -n 5` (stub_latency.py's JSON)."""
    stubs, rows = figures["stubs"], []
    for mode, label in (("cold", "cold (fresh process, no server)"), ("warm", "warm (server running)")):
        f = figures[mode]
        what, figure = (
            f"`generate --function -n 5`, {stubs} stubs, {label}: p50 / p90",
            f"{_s(f['p50'])} / {_s(f['p90'])}",
        )
        if mode == "warm" and model == GOAL_MODEL:
            rows.append((what, figure, f"p50 ≤ {WARM_P50_S:g} s", _met(f["p50"] <= WARM_P50_S)))
        else:
            rows.append((what, figure, "", "-"))
        spread = f["max_over_median"]
        rows.append((f"{mode}: slowest request / median", f"{spread:g}", f"≤ {SPREAD:g}", _met(spread <= SPREAD)))
    startup = _s(figures["server_startup_s"])
    rows.append(("warm server's start-up (once, before the first warm request)", startup, "", "-"))
    failed = sum(code != 0 for row in figures["rows"] for code in row["exit"])
    rows.append(("requests that failed (exit status not 0)", f"{failed} of {2 * stubs}", "0", _met(failed == 0)))
    return rows


def first_token_rows(figures: dict[str, Any], model: str) -> list[Row]:
    """Seconds to the first visible token and to the whole request, in-process and through the warm server."""
    rows: list[Row] = []
    local, served = figures["in_process"], figures["server"]
    if local:
        what = "first visible token / whole request, in-process: first request (loads the model)"
        rows.append((what, f"{_s(local['cold_first_token_s'])} / {_s(local['cold_request_s'])}", "", "-"))
        what = "in-process: second request (the model loaded)"
        rows.append((what, f"{_s(local['warm_first_token_s'])} / {_s(local['warm_request_s'])}", "", "-"))
    if served:
        first, used = served["cold_first_token_s"], figures["server_used"]
        what = "first visible token / whole request, warm server: first request"
        ok = used and first is not None and first <= FIRST_TOKEN_S
        goal = f"first token ≤ {FIRST_TOKEN_S:g} s"
        rows.append((what, f"{_s(first)} / {_s(served['cold_request_s'])}", goal, _met(ok)))
        what = "warm server: second request (the prompt's shared prefix cached)"
        rows.append((what, f"{_s(served['warm_first_token_s'])} / {_s(served['warm_request_s'])}", "", "-"))
        if not used:
            rows.append(("the warm server answered those requests", "no: they ran in-process", "yes", "no"))
    return rows


def decoding_rows(figures: dict[str, Any], model: str) -> list[Row]:
    """Tokens/s of each engine (decoding_speed.py's JSON); drafted decodings against the plain one, case by case."""
    engines: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for row in figures["rows"]:
        engines.setdefault((row["model"], row["decoding"]), []).append(row)
    plain = {row["prompt"]: row for row in engines.get((figures["model"], "plain"), [])}
    rows: list[Row] = []
    for (name, decoding), measured in engines.items():
        prompts = " / ".join(row["prompt"] for row in measured)
        greedy = " / ".join(f"{row['greedy']:.1f}" for row in measured)
        sampled = " / ".join(f"{row['sampled']:.1f}" for row in measured)
        figure = f"greedy {greedy}, n={figures['n']} sampled {sampled} ({prompts})"
        what = f"decode tokens/s, {name} {decoding}" + ("" if name == figures["model"] else " (reference)")
        if name == figures["model"] and decoding != "plain" and plain:
            pairs = [
                (row[key], plain[row["prompt"]][key])
                for row in measured
                if row["prompt"] in plain
                for key in ("greedy", "sampled")
            ]
            same = " / ".join(row["same_greedy"] or "-" for row in measured)
            faster = f"in {sum(a > b for a, b in pairs)} of {len(pairs)}"
            rows.append((what, f"{figure}; greedy text as plain: {same}", "faster than plain", faster))
        else:
            rows.append((what, figure, "", "-"))
    return rows


def cancel_rows(figures: dict[str, Any], model: str) -> list[Row]:
    """Escape's and SIGINT's seconds to the work's end, and processes left (cancel_latency.py's JSON)."""
    rows: list[Row] = []
    runs, statuses = figures["runs"], ", ".join(map(str, figures["sigint_exit_status"]))
    for key, what in (
        ("escape_s", "Escape in the TUI (Textual's Pilot, a slowed scripted backend)"),
        ("sigint_s", f"SIGINT to `assist generate` (a slow 127.0.0.1 server; exit status {statuses})"),
    ):
        f = figures[key]
        figure = f"{f['p50']:.3f} s / {f['max']:.3f} s"
        rows.append((f"cancel: {what}, {runs} runs: p50 / max", figure, f"< {CANCEL_S:g} s", _met(f["max"] < CANCEL_S)))
    left = figures["processes_left"]
    rows.append(("cancel: runs that left a process of the CLI's group", str(left), "0", _met(left == 0)))
    return rows


def agree_rows(figures: dict[str, Any], model: str) -> list[Row]:
    """agree's test-writing call per request, before (a call of its own after sampling) and after (decoded beside
    the samples), and whether its tests stayed the same (agree_cost.py's JSON)."""
    summary, stubs = figures["summary"], figures["stubs"]

    def both(name: str) -> str:
        before, after = summary[f"{name}_off"], summary[f"{name}_on"]
        return f"{_s(before['p50'])} ({_s(before['p90'])}) / {_s(after['p50'])} ({_s(after['p90'])})"

    before, after = summary["call_off"]["p50"], summary["call_on"]["p50"]
    cheaper = before is not None and after is not None and after < before
    ran = sum(bool(row["agree_ran"]) for row in figures["rows"])
    failed = sum(code != 0 for row in figures["rows"] for code in row["exit"])
    same = figures["tests_identical"]
    where = "warm server" if figures.get("warm") else "fresh processes"
    return [
        (f"agree's test call per request, before / after, {stubs} stubs ({where}): p50 (p90)", both("call"), "cheaper",
         _met(cheaper)),
        ("agree: the whole request, before / after: p50 (p90)", both("wall"), "", "-"),
        ("agree: stubs where agree ranked", f"{ran} of {stubs}", "all", _met(ran == stubs)),
        ("agree: stubs whose written tests are identical before and after", f"{same} of {stubs}", "all",
         _met(same == stubs)),
        ("agree: stubs whose output is identical (timings aside)", f"{figures['output_identical']} of {stubs}", "all",
         _met(figures["output_identical"] == stubs)),
        ("agree: requests that failed (exit status not 0)", f"{failed} of {2 * stubs}", "0", _met(failed == 0)),
        ("agree's pass@1 on the committed HumanEval/MBPP candidates", "unchanged where the tests are identical "
         "(agree_cost.py says why; else re-score as it says)", "unchanged", _met(same == stubs)),
    ]  # fmt: skip


ROWS: dict[str, Callable[[dict[str, Any], str], list[Row]]] = {
    "stub": stub_rows,
    "first-token": first_token_rows,
    "decoding": decoding_rows,
    "cancel": cancel_rows,
    "agree": agree_rows,
}


def load_row(part: str, result: dict[str, Any]) -> Row:
    """Whether the machine was idle when `part` began (1-minute load, CPUs' busy share), and the load after it."""
    before, after = result.get("before") or {}, result.get("after") or [None]
    load, busy = (before.get("load") or [None])[0], before.get("busy")
    figure = f"{load} (CPUs {'?' if busy is None else f'{busy:.0%}'} busy) → {after[0]}"
    if load is None:
        met = "-"
    elif load <= IDLE_LOAD:
        met = "yes"
    elif busy is not None and busy < BUSY_SHARE:
        met = "yes: the load still falls from the part before; the CPUs are idle"
    else:
        met = "no: NOT IDLE, its figures are inflated"
    what = f"{part}: 1-minute load before it (CPUs busy over {BUSY_WINDOW_S:g} s) → after"
    return (what, figure, f"≤ {IDLE_LOAD:g} (idle)", met)


def rows_for(part: str, result: dict[str, Any], model: str) -> list[Row]:
    """The table's rows of one part's result: its figures against the goals, its failure, the load around it."""
    if result.get("skipped"):
        return [(f"{part}: skipped", result["skipped"], "", "-")]
    rows: list[Row] = []
    if result.get("server_stopped_before"):
        rows.append((f"{part}: a warm server of the model ran before it", "stopped first", "", "-"))
    if result.get("figures") is not None:
        try:
            rows += ROWS[part](result["figures"], model)
        except (KeyError, TypeError, IndexError, ValueError, AttributeError) as exc:
            rows.append((f"{part}: its figures could not be read", f"{type(exc).__name__}: {exc}", "", "no"))
    if result.get("exit"):
        why = result.get("error") or f"exit status {result['exit']} (its output is above)"
        rows.append((f"{part}: failed", why, "it runs", "no"))
    return [*rows, load_row(part, result)]


def render(rows: Sequence[Row]) -> str:
    """One Markdown table: what, figure, goal, met?"""
    lines = ["| what | figure | goal | met? |", "|---|---|---|---|"]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def _write(path: Path, report: dict[str, Any]) -> None:
    from assistant.paths import atomic_write_text

    atomic_write_text(path, json.dumps(report, indent=1) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    model = args.model
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    out = Path(args.json) if args.json else Path(tempfile.gettempdir()) / f"assist-speed-report-{stamp}.json"
    if not out.parent.is_dir():
        parser.error(f"--json: the folder {out.parent} does not exist")
    # The children run this tree's code, whatever the environment installed.
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, (str(ROOT), os.environ.get("PYTHONPATH"))))
    facts = machine_facts()
    stubs = f"{args.stubs} stubs (agree: {args.agree_stubs or args.stubs})"
    settings = f"- model {args.model}; {stubs}; decoding {args.tokens} tokens a row; cancel {args.runs} runs"
    print(f"{describe(facts)}\n{settings}\n- the report: {out} (written as each part ends)", flush=True)
    report: dict[str, Any] = {"machine": facts, "options": vars(args), "parts": {}, "table": []}
    with tempfile.TemporaryDirectory(prefix="assist-speed-") as folder:
        for part in args.parts:
            report["parts"][part] = run_part(part, args, Path(folder))
            report["table"] = [row for name, done in report["parts"].items() for row in rows_for(name, done, model)]
            _write(out, report)
            print(render(rows_for(part, report["parts"][part], model)), flush=True)
    report["warm_servers_after"] = _warm_servers()
    _write(out, report)
    print(f"\n## Speed report: {args.model}\n\n{describe(facts)}\n{settings}\n\n{render(report['table'])}")
    if report["warm_servers_after"]:
        print("\nwarm servers still running: " + "; ".join(report["warm_servers_after"]))
    print(f"\nreport: {out}")
    return 1 if any(done.get("exit") for done in report["parts"].values()) else 0


if __name__ == "__main__":
    sys.exit(main())
