"""scripts/article-pair: two article runs side by side, verdicts compared."""

import json
import pathlib
import subprocess

ROOT = pathlib.Path(__file__).resolve().parents[2]


def check(finding, outcome, here, clear=True):
    return {
        "finding": finding,
        "compared": "a / b, Gbit/s, tcp_stream-32768B-1i",
        "claim": "> 0.90x",
        "here": here,
        "outcome": outcome,
        "clear": clear,
    }


def run(tmp_path, checks):
    """Write one findings.json per run and return the script's output."""
    outs = []
    for n, cs in enumerate(checks):
        d = tmp_path / f"run{n}" / "stt-gre"
        d.mkdir(parents=True)
        doc = {"article": "stt-gre", "title": "T", "date": "2026-11-28", "checked": cs}
        (d / "findings.json").write_text(json.dumps(doc))
        outs.append(str(d.parent))
    p = subprocess.run([ROOT / "scripts" / "article-pair", *outs], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    return p.stdout


def test_verdicts_that_differ_are_counted_and_said(tmp_path):
    one = [
        check("sg1", "holds", "1.05x [0.95, 1.15]"),
        check("sg5", "holds", "1.02x [0.92, 1.12]"),
        check("gv5", "cannot_test", "needs a NIC"),
        check("ovs", "not_run", "ovs-gre is not in this profile's plan"),
    ]
    two = [
        check("sg1", "holds", "1.04x [0.93, 1.16]"),
        check("sg5", "does_not_hold", "0.95x [0.85, 1.06] (not shown)", clear=False),
        check("gv5", "cannot_test", "needs a NIC"),
        check("ovs", "not_run", "ovs-gre is not in this profile's plan"),
    ]
    out = run(tmp_path, [one, two])
    assert "| sg1 |" in out and "**holds here** |" in out
    assert "**holds here / does not hold here (not shown)** (differ)" in out
    assert "| gv5 | - | - | needs a NIC | (same) | **cannot be tested here** |" in out
    assert "| ovs |" not in out
    assert out.strip().endswith("Verdicts alike in both runs: 1 of 2 checks measured.")


def test_ruled_out_and_not_shown_are_one_verdict(tmp_path):
    one = [check("sg4", "does_not_hold", "0.43x [0.37, 0.51]")]
    two = [check("sg4", "does_not_hold", "0.88x [0.80, 0.97] (not shown)", clear=False)]
    out = run(tmp_path, [one, two])
    assert "**does not hold here** (ruled out / not shown)" in out
    assert "1 of 1 checks measured" in out


def test_an_empty_folder_is_an_error_that_names_it(tmp_path):
    p = subprocess.run(
        [ROOT / "scripts" / "article-pair", str(tmp_path), str(tmp_path)], capture_output=True, text=True
    )
    assert p.returncode != 0
    assert str(tmp_path) in p.stderr
