"""The README's "Threads that begin with history" host runs as written."""

from __future__ import annotations

import re
import subprocess
import sys

from conftest import ROOT


def readme_history_host() -> str:
    text = (ROOT / "README.md").read_text()
    section = text.split("## Threads that begin with history", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    assert len(blocks) == 1, "the section holds one Python host"
    return blocks[0]


def test_the_readme_history_host_runs(tmp_path):
    result = subprocess.run([sys.executable, "-c", readme_history_host()], capture_output=True,
                            text=True, timeout=60, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "{'thread_id': 'support-42', 'version': 1}\n"
    assert (tmp_path / "threads.db").exists()
