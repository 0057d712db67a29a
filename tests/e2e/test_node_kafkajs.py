"""kafkajs consumers in one group (tests/node, pinned by package-lock.json): disjoint
assignments covering all six partitions, every message consumed once."""

import pathlib
import shutil
import subprocess
import uuid

import pytest

from conftest import require

NODE_DIR = pathlib.Path(__file__).resolve().parents[2] / "tests/node"


def test_kafkajs_group(broker):
    require(shutil.which("node") is not None and shutil.which("npm") is not None, "node/npm")
    if not (NODE_DIR / "node_modules/kafkajs").exists():
        r = subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=NODE_DIR,
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
    topic = f"t-{uuid.uuid4().hex[:8]}"
    out = subprocess.run(
        ["node", "groupcheck.js", broker.bootstrap, topic, f"g-{topic}", "600"],
        cwd=NODE_DIR, capture_output=True, text=True, timeout=90,
    )
    assert out.returncode == 0, out.stdout + out.stderr[-3000:]
    assert "OK 600" in out.stdout
