#!/usr/bin/env python3
"""Run every Rust test binary of the workspace, functional ones side by side.

`cargo test` runs its test binaries one after another; most of tunlab's
spend their time waiting on namespaces, daemons and timers, so two lanes
side by side halve the wall time. Tests whose results depend on having the
machine to themselves run afterwards, alone:

- the soak, which counts the whole system's BPF maps and frames lost;
- the SSH agreement test, which compares ratios measured over SSH with
  the same ratios measured here.
- the package test, which installs the Debian package into /usr and /etc
  and purges it (and takes /run/tunlab's shared lock file with it).

Each binary's output goes to a log; a failing binary's log is printed whole
at the end (the logs are kept then, and removed when everything passed),
and every binary runs even when an earlier one failed (as
`cargo test --no-fail-fast`). Usage: scripts/run-tests.py [--lanes N]
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor, as_completed

# (binary, test name): run alone, after everything else, with the whole
# machine (see the module's text).
ALONE = [
    ("soak", None),
    # Installs the Debian package into /usr and /etc and purges it.
    ("package", None),
    ("remote_netns", "the_quick_profile_over_ssh_agrees_with_the_same_run_here"),
]

# Binaries that take longest start first, so that the lanes end together
# (seconds measured here on 2026-11-27, two lanes).
EXPECTED_SECONDS = {
    "bench_lab": 217,
    "switch_netns": 216,
    "datapaths_netns": 163,
    "kernel_netns": 107,
    "remote_netns": 80,
    "openflow_netns": 57,
    "ovs_interop": 31,
}


def test_binaries():
    """Build every test binary; (name, executable, package folder) each."""
    out = subprocess.run(
        ["cargo", "test", "--workspace", "--locked", "--no-run", "--message-format=json"],
        check=True,
        stdout=subprocess.PIPE,
        text=True,
    ).stdout
    found = []
    for line in out.splitlines():
        try:
            m = json.loads(line)
        except json.JSONDecodeError:
            continue
        if m.get("reason") != "compiler-artifact" or not m.get("executable"):
            continue
        if not m.get("profile", {}).get("test"):
            continue
        target = m["target"]
        name = target["name"]
        if "lib" in target["kind"] or "rlib" in target["kind"]:
            name = f"{name} (unit)"
        elif "bin" in target["kind"]:
            name = f"{name} (bin unit)"
        found.append((name, m["executable"], os.path.dirname(m["manifest_path"])))
    return found


def run(job, logs):
    """Run one binary (or one test of it); (job, seconds, exit code, log)."""
    name, exe, cwd, args = job
    log = os.path.join(logs, name.replace(" ", "_").replace("/", "_") + ".log")
    started = time.monotonic()
    with open(log, "w") as f:
        rc = subprocess.run([exe, *args], cwd=cwd, stdout=f, stderr=subprocess.STDOUT).returncode
    return job, time.monotonic() - started, rc, log


def summary_line(log):
    """The binary's last `test result:` line."""
    last = ""
    with open(log, errors="replace") as f:
        for line in f:
            if line.startswith("test result:"):
                last = line.strip()
    return last


def bpffs_mounted():
    """Whether /sys/fs/bpf holds a bpf filesystem (in this mount namespace)."""
    with open("/proc/self/mounts") as f:
        return any(l.split()[1:3] == ["/sys/fs/bpf", "bpf"] for l in f)


def restore_bpffs(was_mounted):
    """The kernel datapath mounts a bpffs at /sys/fs/bpf in the host's mount
    namespace (as systemd does at boot) so that its pins outlive it: where
    none was mounted before the tests, the one they brought goes again."""
    if was_mounted or not bpffs_mounted():
        return
    # maps.debug and progs.debug are the kernel's own (bpf_preload).
    left = [
        os.path.join(d, f)
        for d, _, fs in os.walk("/sys/fs/bpf")
        for f in fs
        if d != "/sys/fs/bpf" or f not in ("maps.debug", "progs.debug")
    ]
    if left:
        print(f"/sys/fs/bpf: the tests left pins, kept mounted: {left}")
        return
    while bpffs_mounted():
        if subprocess.run(["umount", "/sys/fs/bpf"], check=False).returncode != 0:
            break


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--lanes", type=int, default=2, help="binaries side by side (default 2)")
    lanes = p.parse_args().lanes

    side_by_side, alone = [], []
    for name, exe, cwd in test_binaries():
        mine = [t for b, t in ALONE if b == name]
        if None in mine:
            alone.append((name, exe, cwd, []))
            continue
        skip = [a for t in mine for a in ("--skip", t)]
        side_by_side.append((name, exe, cwd, ["-q", *skip]))
        for t in mine:
            alone.append((f"{name}::{t}", exe, cwd, ["--exact", t]))
    side_by_side.sort(key=lambda j: -EXPECTED_SECONDS.get(j[0], 0))

    was_mounted = bpffs_mounted()
    logs = tempfile.mkdtemp(prefix="tunlab-tests-")
    failed = []
    started = time.monotonic()

    def report(result):
        job, secs, rc, log = result
        mark = "ok" if rc == 0 else f"FAILED (exit {rc})"
        print(f"  {secs:6.0f} s  {job[0]:<48} {mark}  {summary_line(log)}", flush=True)
        if rc != 0:
            failed.append(result)

    print(f"{len(side_by_side)} test binaries in {lanes} lanes, then {len(alone)} alone; logs in {logs}")
    with ThreadPoolExecutor(max_workers=lanes) as pool:
        for done in as_completed([pool.submit(run, j, logs) for j in side_by_side]):
            report(done.result())
    for job in alone:
        report(run(job, logs))
    print(f"all test binaries: {time.monotonic() - started:.0f} s")
    restore_bpffs(was_mounted)

    for job, _, rc, log in failed:
        print(f"\n===== {job[0]}: exit {rc}; its whole output ({log}) =====")
        with open(log, errors="replace") as f:
            sys.stdout.write(f.read())
    if failed:
        print(f"\nfailed: {', '.join(j[0] for j, *_ in failed)} (every log kept in {logs})")
        return 1
    # Every binary passed: the logs go, as everything else the tests made.
    shutil.rmtree(logs, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
