# SPDX-License-Identifier: MIT
"""util.py - what the Python tests share: unique ring names, the built
binaries, exporting a ring or a capture, the DevTools engine check, and
RingTest, a test case with a ring and a tracer on it."""
import json
import os
import shutil
import subprocess
import tempfile
import unittest

import shmtrace

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.environ.get("SHMTRACE_BIN") or os.path.join(ROOT, os.environ.get("BUILD", "build"))
PREFIX = os.environ.get("SHMTRACE_TEST_PREFIX", "t%d-" % os.getpid())
_seq = [0]


def ring_name(what):
    _seq[0] += 1
    return "%spy-%s-%d-%d" % (PREFIX, what, os.getpid(), _seq[0])


def tool(*args, **kw):
    """Runs the shmtrace CLI; returns the CompletedProcess."""
    return subprocess.run([os.path.join(BIN, "shmtrace"), *args], capture_output=True,
                          text=True, check=False, **kw)


def export(tmpdir, *sources):
    """Exports a ring (("--ring", name)) or captures; returns (events, stderr)."""
    out = os.path.join(tmpdir, "trace-%d.json" % len(os.listdir(tmpdir)))
    r = tool("export", *sources, "-o", out)
    if r.returncode != 0:
        raise AssertionError("shmtrace export %s: %s" % (" ".join(sources), r.stderr))
    with open(out, encoding="utf-8") as f:
        t = json.load(f)
    return (t["traceEvents"] if isinstance(t, dict) else t), r.stderr, out


def devtools(trace, *expect):
    """What the Chrome DevTools trace engine sees in trace (check-trace.mjs)."""
    if not shutil.which("node"):
        raise unittest.SkipTest("node is not installed")
    engine = os.path.join(ROOT, "tests/devtools/node_modules/@paulirish/trace_engine")
    if not os.path.isdir(engine):
        r = subprocess.run(["npm", "ci", "--prefix", os.path.join(ROOT, "tests/devtools"),
                            "--no-audit", "--no-fund"], capture_output=True, check=False)
        if r.returncode != 0:
            raise unittest.SkipTest("npm ci --prefix tests/devtools failed (offline?)")
    r = subprocess.run(["node", os.path.join(ROOT, "tests/devtools/check-trace.mjs"), trace,
                        *expect], capture_output=True, text=True, check=False)
    if r.returncode != 0:
        raise AssertionError("DevTools engine: %s" % r.stderr.strip())
    return json.loads(r.stdout)


def metadata(trace):
    """The export's own counts (metadata.shmtrace of the Chrome JSON)."""
    with open(trace, encoding="utf-8") as f:
        return json.load(f)["metadata"]["shmtrace"]


def spans(events, name=None, pid=None):
    return [e for e in events if e.get("ph") == "X" and (name is None or e["name"] == name)
            and (pid is None or e["pid"] == pid)]


def names(events, what):
    """{pid: name} for what="process_name", {(pid, tid): name} for thread_name."""
    out = {}
    for e in events:
        if e.get("ph") == "M" and e.get("name") == what:
            key = e["pid"] if what == "process_name" else (e["pid"], e["tid"])
            out[key] = e["args"]["name"]
    return out


def unlink(ring):
    try:
        os.unlink("/dev/shm/" + ring)
    except FileNotFoundError:
        pass


class RingTest(unittest.TestCase):
    """A ring of its own for each test, self.t a tracer on it, and
    self.export(), what `shmtrace export --ring` makes of it."""

    def setUp(self):
        self.ring = ring_name(self._testMethodName)
        shmtrace.create_ring(self.ring, capacity=65536)
        self.addCleanup(unlink, self.ring)
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        self.t = shmtrace.open(self.ring)
        self.addCleanup(self.t.close)

    def export(self):
        self.t.flush()
        events, _, _ = export(self.tmp.name, "--ring", self.ring)
        return events
