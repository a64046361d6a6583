"""The stub types real code: mypy checks the README's host and the asyncio example against
the shipped `__init__.pyi` (tagged outputs narrow on `out["type"]`)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

import runcore
from test_readme import readme_host

EXAMPLE = Path(runcore.__file__).parent / "examples" / "asyncio_host.py"


def mypy(cwd: Path, *files: str) -> subprocess.CompletedProcess:
    """mypy on `files` in `cwd` (a scratch directory: run from the repository, mypy would take
    the virtual environment under target/ for the user's own modules)."""
    if importlib.util.find_spec("mypy") is None:
        if os.environ.get("CI") == "true":
            pytest.fail("mypy is not installed (scripts/test.sh installs it)")
        pytest.skip("mypy is not installed")
    return subprocess.run([sys.executable, "-m", "mypy", "--check-untyped-defs",
                           "--no-incremental", *files], capture_output=True, text=True, cwd=cwd)


def test_mypy_accepts_the_readme_host_and_the_example(tmp_path):
    (tmp_path / "readme_host.py").write_text(readme_host())
    (tmp_path / "asyncio_host.py").write_text(EXAMPLE.read_text())
    result = mypy(tmp_path, "readme_host.py", "asyncio_host.py")
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_rejects_misuse(tmp_path):
    (tmp_path / "bad.py").write_text("import runcore\nagent = runcore.Agent()\nagent.prompt(42)\n"
                                     "out = agent.poll()\nassert out is not None\nout['calls']\n")
    result = mypy(tmp_path, "bad.py")
    assert result.returncode == 1
    assert 'Argument 1 to "prompt" of "Agent" has incompatible type "int"' in result.stdout
    assert '"calls"' in result.stdout
