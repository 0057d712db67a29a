"""franz-go consumers in one group (tests/go): disjoint assignments covering all six
partitions and every record consumed once. Modules come from the Go module proxy into a
cached GOMODCACHE (~/.cache/kelp/gomod)."""

import os
import pathlib
import shutil
import subprocess
import uuid

import pytest

from conftest import require

ROOT = pathlib.Path(__file__).resolve().parents[2]
CACHE = pathlib.Path.home() / ".cache/kelp"


def test_franz_go_group(broker, tmp_path):
    require(shutil.which("go") is not None, "go toolchain")
    env = dict(os.environ, GOMODCACHE=str(CACHE / "gomod"), GOFLAGS="-mod=mod")
    binary = tmp_path / "groupcheck"
    build = subprocess.run(
        ["go", "build", "-o", str(binary), "."],
        cwd=ROOT / "tests/go", env=env, capture_output=True, text=True, timeout=300,
    )
    assert build.returncode == 0, build.stderr
    topic = f"t-{uuid.uuid4().hex[:8]}"
    out = subprocess.run(
        [str(binary), broker.bootstrap, topic, f"g-{topic}", "600"],
        capture_output=True, text=True, timeout=90,
    )
    assert out.returncode == 0, out.stdout + out.stderr[-3000:]
    assert "OK 600" in out.stdout
