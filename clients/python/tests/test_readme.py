"""README's "Python in five minutes", run as written against a real server
(issue 55: there was no Python quick start): its code block runs, and prints
what the README shows under it."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

from harness import TidemarkServer

README = pathlib.Path(__file__).resolve().parents[3] / "README.md"


def blocks_under(heading: str) -> tuple[str, str]:
    text = README.read_text()
    section = text[text.index(heading) :]
    section = section[: section.index("\n## ", 3)]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    shown = section.split("```text\n", 1)[1].split("```", 1)[0]
    return code, shown


def test_the_readme_python_walkthrough_runs_as_written(tmp_path):
    from conftest import database_url

    code, shown = blocks_under("## Python in five minutes")
    server = TidemarkServer(database_url(tmp_path), tmp_path / "server.log").start()
    try:
        ran = subprocess.run(
            [sys.executable, "-c", code],
            env={**os.environ, "TIDEMARK_SERVER": server.endpoint},
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        server.stop()
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout == shown, f"README shows:\n{shown}\nthe code printed:\n{ran.stdout}"
