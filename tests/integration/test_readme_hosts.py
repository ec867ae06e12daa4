"""The README's "Running across hosts" and "Securing a network" examples, each run as written
on four lab hosts at the addresses it names (10.0.0.1 to 10.0.0.4): each command in the host
its comment names, the data directories moved under a temporary one, every command run from
it. The subscriber's sink prints the event published. Needs root (network namespaces)."""
import re
import shlex
import sys
import time
from pathlib import Path

import pytest

from benchmarks.lab import Lab, why_not_available

reason = why_not_available()
pytestmark = pytest.mark.skipif(bool(reason), reason=f"no lab of hosts here: {reason}")

README = Path(__file__).resolve().parents[2] / "README.md"


def readme_example(title: str = "Running across hosts") -> list[tuple[str | None, str]]:
    """(address of the host its comment names, command) for each line of the section's
    shell block; the ``export`` line has no host."""
    section = README.read_text().split(f"## {title}", 1)[1]
    block = section.split("```sh\n", 1)[1].split("```", 1)[0]
    lines, host = [], None
    for line in block.replace("\\\n", " ").splitlines():
        comment = re.match(r"#\s*([\d.]+)(?: and ([\d.]+))?:", line)
        if comment:
            host = [a for a in comment.groups() if a]
            continue
        command = line.split("  #")[0].strip()
        if command:
            lines.append((host, command))
    return lines


@pytest.mark.parametrize("title", ["Running across hosts", "Securing a network"])
def test_the_readme_example_runs_across_four_hosts(tmp_path, title):
    steps = readme_example(title)
    assert steps[0][1].startswith("export ")
    env = dict(pair.split("=", 1) for pair in shlex.split(steps[0][1])[1:])
    servers_left = 2  # "10.0.0.2 and 10.0.0.3": the first server line runs in the first
    with Lab(["h1", "h2", "h3", "h4"], subnet="10.0.0.0/24") as lab:
        by_address = {lab[n].address: n for n in lab.hosts}
        sink = None
        for hosts, command in steps[1:]:
            if command.startswith("export "):  # the commands after it run with these
                env.update(pair.split("=", 1) for pair in shlex.split(command)[1:])
                continue
            argv = shlex.split(command.replace("/var/lib/edn", str(tmp_path))
                               .replace(" examples/", f" {README.parent}/examples/"))
            assert argv[0] == "edn", command
            background = argv[-1] == "&"
            argv = [sys.executable, "-m", "edn.cli", *argv[1:len(argv) - background]]
            if len(hosts) > 1:  # one server line per host, in order
                host = by_address[hosts[2 - servers_left]]
                servers_left -= 1
            else:
                host = by_address[hosts[0]]
            if argv[3] == "serve" or background:
                process = lab.start_process(host, argv, env=env, cwd=str(tmp_path))
                if background:
                    sink = process
                else:
                    _wait_healthy(lab, host, argv, process, tmp_path)
            else:
                result = lab[host].run(_run, argv, env, tmp_path)
                assert result.returncode == 0, (command, result.stdout, result.stderr)
        if title == "Running across hosts":  # edn latency measure wrote its file
            assert (tmp_path / "latency.json").exists()
        deadline = time.monotonic() + 30
        while "31.25" not in sink.log_text():
            assert time.monotonic() < deadline, f"the sink printed no event:\n{sink.log_text()}"
            time.sleep(0.1)


def _run(argv, env, cwd):
    """One command, from ``cwd`` (what it writes stays out of the checkout)."""
    import os
    import subprocess
    return subprocess.run(argv, env={**os.environ, **env}, capture_output=True, text=True,
                          timeout=60, cwd=cwd)


def _wait_healthy(lab, host, argv, process, cwd):
    import requests
    scheme = "https" if "--tls-cert" in argv else "http"
    base = argv[argv.index("--base-url") + 1] if "--base-url" in argv else (
        f"{scheme}://{argv[argv.index('--host') + 1]}:{argv[argv.index('--port') + 1]}")
    verify = str(Path(cwd) / argv[argv.index("--tls-ca") + 1]) if "--tls-ca" in argv else True
    deadline = time.monotonic() + 30

    def healthy():
        try:
            return requests.get(base + "/health", timeout=1, verify=verify).status_code == 200
        except requests.RequestException:
            return False
    while not lab[host].run(healthy):
        assert process.alive(), process.log_text()
        assert time.monotonic() < deadline, process.log_text()
        time.sleep(0.1)
