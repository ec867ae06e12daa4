"""The README's main job runs and reports an exact result."""
import subprocess
import sys


def test_edn_demo_runs_and_is_exact():
    result = subprocess.run([sys.executable, "-m", "wsframework.cli", "demo", "--events", "12"],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "exact match with local evaluation: yes" in result.stdout
    assert "stopped everything the demo started" in result.stdout
