"""Screenshots of `assist tui` for docs/: a real session with the default local model, in a scratch repo.

    python scripts/tui_screenshots.py [--out docs]

Writes tui-160x45.svg and tui-80x24.svg: the main screen after generating candidates for a requirement,
with the second candidate selected (its code and its diff against the target file).
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import tempfile
from pathlib import Path

from assistant.indexing.index import index_repo
from assistant.ui.session import Options, Session
from assistant.ui.tui import AssistApp

FILES = {
    "mathutils.py": '''def is_even(n):
    """Return True when n is even."""
    return n % 2 == 0


def cube_all(values):
    """Return the cubes of the numbers in a list."""
    return [v ** 3 for v in values]
''',
    "text/words.py": '''def word_count(text: str) -> int:
    """Count the words in a string."""
    return len(text.split())
''',
}


def scratch_repo(base: Path) -> Path:
    root = base / "demo"
    for name, text in FILES.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    for args in (["init", "-q"], ["add", "."], ["commit", "-qm", "init"]):
        subprocess.run(["git", "-c", "user.email=demo@x.org", "-c", "user.name=demo", *args], cwd=root, check=True)
    return root


async def shoot(root: Path, out: Path) -> None:
    session = Session(root, options=Options(n=3, seed=0))
    index_repo(root, session.encoder())
    app = AssistApp(session, target="mathutils.py")
    async with app.run_test(size=(160, 45)) as pilot:
        await app.workers.wait_for_complete()
        await pilot.click("#requirement")
        await pilot.press(*"return the squares of the numbers in a list")
        await pilot.press("ctrl+g")
        await pilot.pause()
        await app.workers.wait_for_complete()
        await pilot.pause()
        await pilot.press("down")
        await pilot.pause()
        app.save_screenshot(str(out / "tui-160x45.svg"))
        await pilot.resize_terminal(80, 24)
        await pilot.pause(0.5)
        app.save_screenshot(str(out / "tui-80x24.svg"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("docs"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as base:
        asyncio.run(shoot(scratch_repo(Path(base)), args.out.resolve()))
    print(f"wrote {args.out / 'tui-160x45.svg'} and {args.out / 'tui-80x24.svg'}")


if __name__ == "__main__":
    main()
