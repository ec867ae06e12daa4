"""The README's main job runs and reports an exact result."""
import subprocess
import sys


def test_edn_demo_runs_and_is_exact():
    result = subprocess.run([sys.executable, "-m", "edn.cli", "demo", "--standalone", "--events", "12"],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "exact match with local evaluation: yes" in result.stdout
    assert "stopped everything the demo started" in result.stdout


def test_edn_network_demo_small_runs_and_is_exact():
    result = subprocess.run(
        [sys.executable, "-m", "edn.cli", "demo", "--subscriptions", "150", "--events", "40",
         "--servers", "3", "--partitioners", "random"],
        capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "offline R-tree" in result.stdout
    assert "every network delivered exactly what a single event source would: yes" in result.stdout
