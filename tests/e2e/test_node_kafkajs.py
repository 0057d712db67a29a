"""kafkajs consumers in one group (tests/node, pinned by package-lock.json): disjoint
assignments covering all six partitions, every message consumed once."""

import subprocess
import uuid

from conftest import kafkajs_dir


def test_kafkajs_group(broker):
    node = kafkajs_dir()
    topic = f"t-{uuid.uuid4().hex[:8]}"
    out = subprocess.run(
        ["node", "groupcheck.js", broker.bootstrap, topic, f"g-{topic}", "600"],
        cwd=node, capture_output=True, text=True, timeout=90,
    )
    assert out.returncode == 0, out.stdout + out.stderr[-3000:]
    assert "OK 600" in out.stdout
