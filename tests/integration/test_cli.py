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


def test_subscribe_with_a_notification_condition_from_the_command_line(source_server, tmp_path):
    """--notify-when/--changed-by 3 over a price sequence: the sink gets exactly the prices
    the strict rule (first one, then each at least 3 away from the last notified) selects."""
    at = ["--at", source_server.base_url]
    run("topic", "create", "quotes", *at, "--admin-token", source_server.admin_token)
    prices = [31.25, 32.0, 34.0, 34.5, 36.5, 30.0]
    expected, last = [], None
    for price in prices:  # strict rule: deliver when |price - L| >= 3
        if last is None or abs(price - last) >= 3:
            expected.append(price)
            last = price
    port = free_port()
    sink = subprocess.Popen([*EDN, "sink", "--port", str(port), "--count", str(len(expected))],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert sink.stdout.readline().startswith("listening at")
        out = run("subscribe", *at, "quotes", "--notify-to", f"http://127.0.0.1:{port}/me",
                  "--prefix", "q=urn:example:quotes", "--notify-when", "/q:quote/q:price",
                  "--changed-by", "3")
        assert "subscribed: manager" in out
        template = (EXAMPLES / "event.xml").read_text()
        for i, price in enumerate(prices):
            event = tmp_path / f"e{i}.xml"
            event.write_text(template.replace("31.25", repr(price)))
            run("publish", *at, "quotes", str(event))
        printed, _ = sink.communicate(timeout=30)
        got = [float(line.split("<q:price>")[1].split("<")[0])
               for line in printed.splitlines() if "<q:price>" in line]
        assert got == expected
    finally:
        sink.kill()


def test_tolerance_without_a_condition_is_refused():
    result = subprocess.run([*EDN, "subscribe", "--at", "http://127.0.0.1:1", "t",
                             "--notify-to", "http://127.0.0.1:2/x", "--tolerance", "1"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and "go together" in result.stderr


def test_bulk_subscribe_from_a_file(source_server, tmp_path):
    """edn subscribe --from-file: each JSON line made or refused alone, in order, one result
    line each; the subscriptions deliver; the exit status says that some were refused."""
    import json
    at = ["--at", source_server.base_url]
    token = ["--admin-token", source_server.admin_token]
    run("topic", "create", "stocks", *at, *token)
    port = free_port()
    requests = tmp_path / "requests.jsonl"
    requests.write_text("\n".join([
        json.dumps({"notify_to": f"http://127.0.0.1:{port}/a", "filter": "//q:price > 30",
                    "prefixes": {"q": "urn:example:quotes"}}),
        "not json",
        json.dumps({"notify_to": f"http://127.0.0.1:{port}/b", "expires": "-PT1M"}),
        json.dumps({"notify_to": f"http://127.0.0.1:{port}/c", "colour": "red"}),
        "",
        json.dumps({"notify_to": f"http://127.0.0.1:{port}/d", "filter": "//q:price > 99",
                    "prefixes": {"q": "urn:example:quotes"}}),
    ]) + "\n")
    results = tmp_path / "results.jsonl"
    result = subprocess.run([*EDN, "subscribe", *at, "stocks", "--from-file", str(requests),
                             "--out", str(results), "--chunk", "2", *token],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 1, result.stderr
    assert "2 subscriptions made, 3 refused" in result.stderr
    lines = [json.loads(line) for line in results.read_text().splitlines()]
    assert [line["line"] for line in lines] == [1, 2, 3, 4, 6]
    assert [("id" in line) for line in lines] == [True, False, False, False, True]
    assert "UnsupportedExpirationValue" in lines[2]["refused"]
    without_token = subprocess.run([*EDN, "subscribe", *at, "stocks", "--from-file",
                                    str(requests)], capture_output=True, text=True, timeout=60,
                                   env={"PATH": "/usr/bin:/bin"})
    assert without_token.returncode != 0 and "admin credential" in without_token.stderr
    sink = subprocess.Popen([*EDN, "sink", "--port", str(port), "--count", "1"],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert sink.stdout.readline().startswith("listening at")
        run("publish", *at, "stocks", str(EXAMPLES / "event.xml"))  # price 31.25
        printed, _ = sink.communicate(timeout=30)
        assert printed.startswith("/a: <q:quote")
    finally:
        sink.kill()
