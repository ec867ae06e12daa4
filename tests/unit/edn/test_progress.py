"""wsframework.progress: a bar on a terminal (a pseudo-terminal here), nothing in piped or
captured output, nothing under --json (quiet) or after silence()."""
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.support.terminal import run_on_terminal
from wsframework import progress as progress_module
from wsframework.progress import progress, shown, waiting

ROOT = Path(__file__).resolve().parents[3]

# Three steps of a bar, then a spinner around a wait long enough for one redraw; the lines the
# command prints itself go through write().
WORK = textwrap.dedent("""
    import sys, threading
    from wsframework.progress import progress, waiting, silence, REDRAW_SECONDS
    if "--json" in sys.argv:
        silence()
    with progress("sweeping levels", total=3, unit="level") as p:
        for level in range(3):
            p.describe(f"level {level}")
            p.advance()
        p.write("a line of the command")
    with waiting("repartitioning at the dispatcher"):
        threading.Event().wait(REDRAW_SECONDS * 3)
    print("result 42")
""")


def _run_on_pty(*args: str, command=None) -> str:
    """The output of WORK (or ``command``) with stdout and stderr on one pseudo-terminal."""
    return run_on_terminal(command or [sys.executable, "-c", WORK, *args], cwd=ROOT)


def test_a_terminal_shows_the_bar_the_step_and_the_spinner():
    out = _run_on_pty()
    assert "sweeping levels" in out
    assert "3/3" in out  # the bar reached its total
    assert "level 2" in out  # describe() shows the current step
    assert "repartitioning at the dispatcher" in out
    assert "00:01" in out  # the spinner's elapsed time moved while waiting
    assert "a line of the command" in out and "result 42" in out


def test_json_on_a_terminal_shows_no_bar():
    out = _run_on_pty("--json")
    assert "sweeping levels" not in out and "repartitioning" not in out
    assert "a line of the command" in out and "result 42" in out


def test_piped_output_has_nothing_of_the_bar():
    result = subprocess.run([sys.executable, "-c", WORK], cwd=ROOT, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "result 42\n"
    assert result.stderr == "a line of the command\n"  # write() without a bar: a plain line
    assert "\r" not in result.stderr and "level" not in result.stderr


def test_captured_streams_are_not_terminals(capsys):
    assert not shown()
    with progress("work", total=2) as p:
        assert not p.drawn
        p.advance()
        p.describe("x")
    with waiting("wait") as w:
        assert not w.drawn
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == ""


class _Terminal:
    def isatty(self):
        return True

    def write(self, text):
        return len(text)

    def flush(self):
        pass


@pytest.mark.parametrize("quiet,silenced,expected", [
    (False, False, True), (True, False, False), (False, True, False)])
def test_shown_needs_terminals_and_no_json(monkeypatch, quiet, silenced, expected):
    monkeypatch.setattr(sys, "stdout", _Terminal())
    monkeypatch.setattr(sys, "stderr", _Terminal())
    monkeypatch.setattr(progress_module, "_silenced", silenced)
    assert shown(quiet) is expected


def test_one_stream_piped_is_enough_to_stay_quiet(monkeypatch):
    monkeypatch.setattr(sys, "stderr", _Terminal())
    monkeypatch.setattr(sys, "stdout", open(os.devnull, "w"))
    try:
        assert not shown()
    finally:
        sys.stdout.close()


# The long commands themselves, on small local runs (no Spark, no sockets): 2 precisions x 10
# chunks of events are 20 routing tasks; 2 configurations give 2 partitionings + their tasks;
# the partitioning benchmark's quick run, in this process (one job after another).
PROFILE = ["profile", "--local", "--subscriptions", "300", "--servers", "3", "--d", "4",
           "--events", "2000", "--chunk-size", "200", "--precisions", "0.5", "none",
           "--match-sample", "200"]
STUDY = ["study", "partitioning", "--local", "--servers", "3", "5", "--per-server", "100",
         "--events", "500", "--partitioners", "random"]


BENCH = ["bench", "partitioning", "--quick"]


@pytest.mark.parametrize("command,bar,total,line", [
    (PROFILE, "edn profile: routing", "/20 ", "done in"),
    (STUDY, "edn study: partitionings and hit ratios", "/4 ", "done in"),
    (BENCH, "partitioning experiments", " job", "")])
def test_long_commands_show_a_bar_on_a_terminal_only(tmp_path, command, bar, total, line):
    edn = [sys.executable, "-m", "edn.cli", *command, "--out", str(tmp_path / "out")]
    out = _run_on_pty(command=edn)
    assert bar in out
    assert total in out  # the bar knows how much work there is (the work finishes too fast
    # for tqdm to draw every step)
    quiet = _run_on_pty(command=[*edn, "--json"])
    assert bar not in quiet and "{" in quiet
    piped = subprocess.run(edn, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert piped.returncode == 0, piped.stderr
    assert bar not in piped.stdout + piped.stderr and "\r" not in piped.stderr
    assert line in piped.stderr  # the command's own progress lines stay
