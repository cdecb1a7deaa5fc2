"""Shared fixtures for the interop tests: the tunlab binary and its JSON."""

import json
import os
import pathlib
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def tunlab_bin() -> pathlib.Path:
    """The binary under test: $TUNLAB_BIN, else the debug build."""
    p = pathlib.Path(os.environ.get("TUNLAB_BIN", ROOT / "target" / "debug" / "tunlab"))
    if not p.exists():
        pytest.fail(f"{p} does not exist: build with `cargo build` (scripts/test does)")
    return p


def decode_json(pcap: pathlib.Path) -> list:
    """Run `tunlab decode --json` and return its frames."""
    out = subprocess.run([tunlab_bin(), "decode", "--json", str(pcap)], capture_output=True, text=True)
    if out.returncode != 0:
        raise AssertionError(f"tunlab decode failed ({out.returncode}): {out.stderr}")
    return json.loads(out.stdout)
