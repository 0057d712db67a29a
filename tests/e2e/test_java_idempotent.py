"""The Java client's default producer (idempotence on, acks=all) against Kelp: every record
is read back exactly once and in order by a Java consumer group, which commits its offset."""

import glob
import os
import pathlib
import shutil
import subprocess
import uuid

import pytest

from conftest import require

ROOT = pathlib.Path(__file__).resolve().parents[2]
JARS = pathlib.Path(os.environ.get("KELP_JARS", pathlib.Path.home() / ".cache/kelp/jars/clients"))


def test_java_default_producer_exactly_once_in_order(broker):
    require(shutil.which("java") is not None, "java")
    jars = glob.glob(str(JARS / "*.jar"))
    require(any("kafka-clients-4" in j for j in jars), f"kafka-clients 4.x jars in {JARS}")
    topic = f"t-{uuid.uuid4().hex[:8]}"
    n = 5000
    out = subprocess.run(
        [
            "java", "-cp", os.pathsep.join(jars),
            str(ROOT / "tests/java/IdempotentRoundTrip.java"),
            broker.bootstrap, topic, f"g-{topic}", str(n),
        ],
        capture_output=True, text=True, timeout=180,
    )
    assert out.returncode == 0, out.stdout + out.stderr[-4000:]
    assert f"OK {n}" in out.stdout
    assert f"COMMITTED {n}" in out.stdout
