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


def mypy(*files: str) -> subprocess.CompletedProcess:
    if importlib.util.find_spec("mypy") is None:
        if os.environ.get("CI") == "true":
            pytest.fail("mypy is not installed (scripts/test.sh installs it)")
        pytest.skip("mypy is not installed")
    return subprocess.run([sys.executable, "-m", "mypy", "--check-untyped-defs",
                           "--no-incremental", *files], capture_output=True, text=True)


def test_mypy_accepts_the_readme_host_and_the_example(tmp_path):
    host = tmp_path / "readme_host.py"
    host.write_text(readme_host())
    result = mypy(str(host), str(EXAMPLE))
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_rejects_misuse(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import runcore\nagent = runcore.Agent()\nagent.prompt(42)\n"
                   "out = agent.poll()\nassert out is not None\nout['calls']\n")
    result = mypy(str(bad))
    assert result.returncode == 1
    assert 'Argument 1 to "prompt" of "Agent" has incompatible type "int"' in result.stdout
    assert '"calls"' in result.stdout
