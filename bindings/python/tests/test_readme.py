"""The README's "From Python" host runs as written and prints `natural_end`."""

from __future__ import annotations

import re
import subprocess
import sys

from conftest import ROOT


def readme_host() -> str:
    text = (ROOT / "README.md").read_text()
    section = text.split("## From Python", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    assert len(blocks) == 1, "the section holds one Python host"
    return blocks[0]


def test_the_readme_host_is_about_twenty_lines():
    lines = [line for line in readme_host().splitlines() if line.strip()]
    assert 15 <= len(lines) <= 25, len(lines)


def test_the_readme_host_runs_to_natural_end():
    result = subprocess.run([sys.executable, "-c", readme_host()], capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "natural_end\n"
    assert result.stderr == ""
