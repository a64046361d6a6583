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


PROVIDERS_OK = """
from typing import List
import runcore
from runcore.providers import anthropic, openai_chat, openai_responses
from runcore.providers._codec import DecodedInput

agent = runcore.Agent()
run_id = agent.prompt("hi")
request = agent.model_request()
assert request is not None
body = anthropic.encode(request, {"model": "m", "max_tokens": 10})["body"]
left = openai_chat.encode(request, {"model": "m"})["left_out"]
decoder = openai_responses.Decoder(run_id, request["step"], status=200)
inputs: List[DecodedInput] = decoder.feed(b"data: {}") + decoder.finish()
for line in inputs:
    if line["type"] == "model_failed":
        print(line["code"])
    agent.handle(line)
error: runcore.CodecError
"""


def test_mypy_types_the_provider_codecs(tmp_path):
    (tmp_path / "ok.py").write_text(PROVIDERS_OK)
    result = mypy(tmp_path, "ok.py")
    assert result.returncode == 0, result.stdout + result.stderr
    (tmp_path / "bad.py").write_text(
        "from runcore.providers import anthropic\n"
        "anthropic.Decoder(1, 1)\n"
        "anthropic.encode({}, {'modle': 'm'})\n"
        "anthropic.Decoder('r', 1).feed('text')\n")
    result = mypy(tmp_path, "bad.py")
    assert result.returncode == 1
    assert 'Argument 1 to "Decoder" has incompatible type "int"' in result.stdout
    assert '"modle"' in result.stdout
    assert 'Argument 1 to "feed" of "BaseDecoder" has incompatible type "str"' in result.stdout
