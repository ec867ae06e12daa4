"""The layering of paper Fig. 11 holds: import-linter's contracts in ``.importlinter`` (layers
that only look down, no test code in the product, no engine libraries in the framework), and
importing the messaging layer loads none of numpy, rtree or elementpath."""
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_import_contracts_are_kept():
    lint = Path(sys.executable).with_name("lint-imports")
    if not lint.exists():
        pytest.fail("import-linter is not installed (pip install -e '.[test]')")
    result = subprocess.run([str(lint), "--config", str(ROOT / ".importlinter")], cwd=ROOT,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "BROKEN" not in result.stdout and "KEPT" in result.stdout


@pytest.mark.parametrize("statement", [
    "import wsframework.messaging",
    "from wsframework.messaging import MessagingLayer; MessagingLayer()",
    "import wsframework.service",
])
def test_messaging_layer_loads_no_engine_library(statement):
    result = subprocess.run([sys.executable, "-X", "importtime", "-c", statement], cwd=ROOT,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    modules = {line.rsplit("|", 1)[-1].strip() for line in result.stderr.splitlines()
               if line.startswith("import time:")}
    assert "wsframework.messaging" in modules or "wsframework.service" in modules
    loaded = {m.split(".")[0] for m in modules} & {"numpy", "rtree", "elementpath"}
    assert not loaded, f"{statement!r} loaded {sorted(loaded)}"
