"""Shared helpers: where the repository's scenario files and reviewed snapshots are."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import List, Tuple

import pytest

ROOT = Path(__file__).resolve().parents[3]


def _first_dir(*candidates: str) -> Path:
    for candidate in candidates:
        path = ROOT / candidate
        if path.is_dir():
            return path
    raise FileNotFoundError(f"none of {candidates} exists under {ROOT}")


# The CLI may move the scenario files and snapshots beside it (cli/); either place works.
SCENARIOS = _first_dir("tests/scenarios", "cli/tests/scenarios")
SNAPSHOTS = _first_dir("snapshots", "cli/snapshots", "cli/tests/snapshots")


def runcore_binary() -> str:
    """The `runcore` binary: $RUNCORE_BIN (set by scripts/test.sh), else the debug build."""
    path = os.environ.get("RUNCORE_BIN") or str(ROOT / "target" / "debug" / "runcore")
    if Path(path).is_file():
        return path
    if os.environ.get("CI") == "true":
        pytest.fail(f"the runcore binary is not at {path} (scripts/test.sh builds it)")
    pytest.skip(f"no runcore binary at {path}; run `cargo build` first")


def input_lines(path: Path) -> List[str]:
    """The non-empty lines of a scenario file, without their newline."""
    return [line for line in path.read_text().split("\n") if line.strip()]


def read_snapshot(name: str) -> Tuple[List[str], List[Tuple[str, List[str]]]]:
    """A driver-scenario snapshot as (lines before any input, [(input, output lines)]).

    The body follows insta's header (between the first two `---` lines): `> INPUT` lines, each
    followed by the lines the driver wrote for it; `#` lines are comments.
    """
    text = (SNAPSHOTS / f"driver_scenarios__{name}.snap").read_text()
    parts = text.split("---\n", 2)
    body = parts[2] if len(parts) == 3 else text
    preamble: List[str] = []
    steps: List[Tuple[str, List[str]]] = []
    for line in body.split("\n"):
        if not line or line.startswith("#"):
            continue
        if line.startswith("> "):
            steps.append((line[2:], []))
        elif steps:
            steps[-1][1].append(line)
        else:
            preamble.append(line)
    return preamble, steps


def parse_lines(lines: List[str]) -> List[dict]:
    return [json.loads(line) for line in lines]


@pytest.fixture
def weather_config() -> dict:
    """A tool catalog with one automatic tool and one that needs approval."""
    return {
        "tools": {
            "weather": {"description": "Weather in a city"},
            "delete_file": {"description": "Delete a file", "policy": "require_approval",
                            "deadline_after_ms": 5000},
        }
    }


def require(module: str):
    """Imports a test-only dependency (scripts/test.sh installs it): skips without it, except
    under CI=true, where that is a failure."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{module} is not installed (scripts/test.sh installs it)")
        pytest.skip(f"{module} is not installed", allow_module_level=True)
