"""The command-line path a new user takes: sink, subscribe, publish against a real source."""
import subprocess
import sys
from pathlib import Path

from tests.support.processes import free_port

EDN = [sys.executable, "-m", "edn.cli"]
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "edn"


def run(*args):
    result = subprocess.run([*EDN, *args], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def test_sink_subscribe_publish_from_the_command_line(source_server):
    at = ["--at", source_server.base_url]
    token = ["--admin-token", source_server.admin_token]
    run("topic", "create", "stocks", *at, *token)
    port = free_port()
    sink = subprocess.Popen([*EDN, "sink", "--port", str(port), "--count", "1"],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert sink.stdout.readline().startswith("listening at")  # ready before subscribing
        out = run("subscribe", *at, "stocks", "--notify-to", f"http://127.0.0.1:{port}/me",
                  "--filter", "//q:quote[q:price > 30]", "--prefix", "q=urn:example:quotes",
                  "--version", "2004")
        assert "subscribed: manager" in out
        run("publish", *at, "stocks", str(EXAMPLES / "event.xml"))
        printed, _ = sink.communicate(timeout=30)
        assert printed.startswith("/me: <q:quote") and "31.25" in printed
    finally:
        sink.kill()


def test_bad_local_file_is_an_error_not_a_traceback(source_server, tmp_path):
    bad = tmp_path / "bad.xml"
    bad.write_text("<a>")
    result = subprocess.run([*EDN, "publish", "--at", source_server.base_url, "stocks", str(bad)],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 4 and "malformed XML" in result.stderr
    assert "Traceback" not in result.stderr
