"""Stub latency (issue 69): `assist generate --function NAME -n 5` on 20 stubs of the repository benchmark, cold and
warm, side by side in one run.

    python benchmarks/stub_latency.py [--model qwen2.5-coder-1.5b] [--stubs 20] [--seed 0] [--ranker NAME]
        [--in-project] [--json [OUT]]

Each stub is a function task of the benchmark's four projects (boltons, click, tabulate, cachetools; prepared by
`assist eval repo`, so run one of those first): its file, with the body removed as the task shows it, is put alone
in a fresh git repo, so no repo tests run and the default ranking without tests applies. With `--in-project` it
stays in a git copy of its whole project instead (the project's tests beside it, `--python` its prepared venv), as a
user fills a stub in a project that has tests: the tests that check it are picked and rank the candidates, and
agree's test-writing call is not made. The stubs are the first `--stubs` of the correctness plan's task list
(`results/correctness-1.5b-plan/tasks-four.txt`), taken in turn from each project.

- **cold**: a fresh `assist generate` process with `ASSIST_LOCAL_WARM=off` (loads the model itself);
- **warm**: the same command while an `assist serve` of the same model runs (started once, before the first warm
  request; its start-up is reported apart), with `ASSIST_LOCAL_WARM=auto`.

Cold and warm alternate per stub, so drift in the machine's load falls on both. Each request is the first on its
stub's files: the tests a run picked, which a repeated request would recall (`<cache>/picked-tests`), are
forgotten before each. Prints p50, p90 and the largest
over the median for each, and each stub's seconds; `--json` rows also carry where each warm request's time went
(`warm`: its stages' seconds, its distinct candidates and the tokens it wrote). Run it on an otherwise idle
machine: the figures are wall times.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TASKS = ROOT / "results" / "correctness-1.5b-plan" / "tasks-four.txt"
JSON_HELP = "print one JSON object; given OUT, print as usual and write the JSON object to OUT"


def _task_ids(count: int) -> list[str]:
    """The first `count` task ids, one project after another in turn (the list is grouped by project)."""
    ids = [line.strip() for line in TASKS.read_text().splitlines() if line.strip() and not line.startswith("#")]
    by_project: dict[str, list[str]] = {}
    for task_id in ids:
        by_project.setdefault(task_id.split(":", 1)[0], []).append(task_id)
    chosen: list[str] = []
    while len(chosen) < count and any(by_project.values()):
        for tasks in by_project.values():
            if tasks and len(chosen) < count:
                chosen.append(tasks.pop(0))
    return chosen


def _stub_repos(task_ids: list[str], folder: Path, in_project: bool) -> list[tuple[str, Path, str, str, str | None]]:
    """(task id, repo, file, qualname, interpreter) for each task: the stubbed file alone in a fresh git repo, or
    (`in_project`) in a committed copy of its whole project, with the project's interpreter."""
    from assistant.evaluate.repo.projects import parse_projects, prepare
    from assistant.evaluate.repo.tasks import function_tasks

    projects = {spec.name: prepare(spec) for spec in parse_projects(None)}
    tasks = {task.task_id: (task, project) for project in projects.values() for task in function_tasks(project)}
    made = []
    for number, task_id in enumerate(task_ids):
        task, project = tasks[task_id]
        repo = folder / f"stub{number:02d}"
        if in_project:
            shutil.copytree(project.root, repo, ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache"))
        target = repo / task.path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(task.stubbed((project.root / task.path).read_text()))
        subprocess.run(["git", "init", "-q", str(repo)], check=True)
        if in_project:  # committed, as a project is: the stub is the one change
            for args in (["add", "-A"], ["-c", "user.email=b@b", "-c", "user.name=b", "commit", "-qm", "x"]):
                subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)
        made.append((task_id, repo, task.path, task.qualname, str(project.python) if in_project else None))
    return made


def _generate(
    stub: tuple[str, Path, str, str, str | None], model: str, seed: int, warm: str, ranker: str | None = None
) -> tuple[float, int, dict]:
    """Seconds, exit code and what the request reported (:func:`_stages`) of one `assist generate --function` in a
    fresh process (`ranker`: --ranker, if given)."""
    _, repo, path, qualname, python = stub
    from assistant.paths import cache_dir

    shutil.rmtree(cache_dir() / "picked-tests", ignore_errors=True)  # the first request on these files
    env = {**os.environ, "ASSIST_LOCAL_WARM": warm, "HF_HUB_OFFLINE": "1"}
    argv = [sys.executable, "-m", "assistant", "generate", "--file", path, "--function", qualname, "-n", "5"]
    argv += ["--seed", str(seed), "--model", model, "--json", *(["--ranker", ranker] if ranker else [])]
    argv += ["--python", python] if python else []
    started = time.perf_counter()
    done = subprocess.run(argv, cwd=repo, env=env, capture_output=True, text=True)
    return time.perf_counter() - started, done.returncode, _stages(done.stdout)


def _stages(output: str) -> dict:
    """Where a request's time went, from its `--json` output: each stage's seconds, the distinct candidates and the
    tokens written ({} when the output is not a result)."""
    try:
        result = json.loads(output)
    except json.JSONDecodeError:
        return {}
    usage = result.get("usage") or {}
    stages = {name: round(seconds, 1) for name, seconds in (result.get("timings_s") or {}).items()}
    candidates = len(result.get("candidates") or [])
    tests = (result.get("repo_tests") or {}).get("args")
    said = {"stages_s": stages, "candidates": candidates, "tokens_out": usage.get("completion_tokens")}
    return {**said, "repo_tests": None if tests is None else len(tests), "rankers": result.get("rankers")}


def _serve(model: str) -> tuple[subprocess.Popen, float]:
    """Start `assist serve` for `model` and wait until `--status` finds it; its start-up seconds."""
    started = time.perf_counter()
    server = subprocess.Popen(
        [sys.executable, "-m", "assistant", "serve", "--model", model],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    while server.poll() is None:
        status = subprocess.run(
            [sys.executable, "-m", "assistant", "serve", "--status", "--model", model], capture_output=True, text=True
        )
        if status.returncode == 0 and "ready" in status.stdout.lower():
            return server, time.perf_counter() - started
        time.sleep(2)
    raise SystemExit(f"assist serve ended with {server.returncode} before it was ready")


def _summary(seconds: list[float]) -> dict[str, float]:
    median = statistics.median(seconds)
    ordered = sorted(seconds)
    return {
        "p50": round(median, 1),
        "p90": round(ordered[max(0, round(0.9 * len(ordered)) - 1)], 1),
        "max_over_median": round(max(seconds) / median, 2),
    }


def _json_alone(report: dict, target: str | None) -> bool:
    """`--json`: print the report as JSON and nothing else ("-", True), or also write it to the file `target`."""
    if target == "-":
        print(json.dumps(report, indent=1))
        return True
    if target:
        from assistant.paths import atomic_write_text

        atomic_write_text(Path(target), json.dumps(report, indent=1) + "\n")
    return False


def main() -> None:
    from assistant.backends.models import DEFAULT_GENERATOR

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=DEFAULT_GENERATOR, help="the model (default: assist's default)")
    parser.add_argument("--stubs", type=int, default=20, help="how many stubs (default 20)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--ranker", help="generate's --ranker, e.g. logprob (default: assist's, auto)")
    parser.add_argument("--in-project", action="store_true", help="each stub in a copy of its project, tests and all")
    parser.add_argument("--json", nargs="?", const="-", metavar="OUT", help=JSON_HELP)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="assist-latency-"))
    rows, server = [], None
    try:
        for stub in _stub_repos(_task_ids(args.stubs), folder, args.in_project):
            task_id = stub[0]
            cold = _generate(stub, args.model, args.seed, "off", args.ranker)
            if server is None:
                server, startup = _serve(args.model)
            warm = _generate(stub, args.model, args.seed, "auto", args.ranker)
            rows.append({"task": task_id, "cold_s": round(cold[0], 1), "warm_s": round(warm[0], 1)})
            rows[-1]["exit"] = [cold[1], warm[1]]
            rows[-1]["warm"] = warm[2]
            if args.json != "-":
                print(f"{task_id}: cold {cold[0]:.1f} s, warm {warm[0]:.1f} s (exit {cold[1]}, {warm[1]})", flush=True)
    finally:
        if server is not None:
            subprocess.run([sys.executable, "-m", "assistant", "serve", "--stop", "--model", args.model])
            server.wait(timeout=60)
        shutil.rmtree(folder, ignore_errors=True)
    report = {
        "model": args.model,
        "ranker": args.ranker or "auto",
        "in_project": args.in_project,
        "stubs": len(rows),
        "server_startup_s": round(startup, 1),
        "cold": _summary([row["cold_s"] for row in rows]),
        "warm": _summary([row["warm_s"] for row in rows]),
        "rows": rows,
    }
    if _json_alone(report, args.json):
        return
    where = "each in its project" if args.in_project else "each file alone"
    print(f"\n{args.model}, {len(rows)} stubs ({where}), -n 5; server start-up {report['server_startup_s']} s (once)")
    for mode in ("cold", "warm"):
        figures = report[mode]
        print(f"{mode}: p50 {figures['p50']} s, p90 {figures['p90']} s, largest/median {figures['max_over_median']}")


if __name__ == "__main__":
    main()
