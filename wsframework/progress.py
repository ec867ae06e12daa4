"""Progress on long work: a bar, or a spinner with the elapsed time, on a terminal; nothing
anywhere else.

Long commands (``edn profile``, ``edn study``, ``edn partition``) and the long benchmarks
report progress so that someone watching a terminal sees the work move. Their output is also
read by programs (``--json``, pipes, tests capturing output, CI logs), where a redrawn bar is
noise in what gets parsed. So a bar is drawn only when stdout and stderr are both terminals
and the command was not asked for JSON (``quiet=True``, or :func:`silence` for a whole
process). It is drawn on stderr with tqdm (one small package without dependencies) and erased
when the work ends, leaving only the lines the command prints itself.

A refresher thread redraws every half second, so the elapsed time moves while one step (a
Spark stage, a dispatcher's Repartition) takes minutes.
"""
from __future__ import annotations

import contextlib
import sys
import threading
from typing import Iterator

__all__ = ["Progress", "progress", "waiting", "shown", "silence", "write"]

REDRAW_SECONDS = 0.5
SPINNER = "|/-\\"

_silenced = False
_drawing = 0  # bars on the terminal now: lines then go above them (tqdm.write)


def silence(flag: bool = True) -> None:
    """No bar anywhere in this process (``edn bench --json``: the benchmark's own steps
    cannot see the flag)."""
    global _silenced
    _silenced = flag


def _is_terminal(stream) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # replaced by an object without it, or closed
        return False


def shown(quiet: bool = False) -> bool:
    """Whether a bar would be drawn now."""
    return not (quiet or _silenced) and _is_terminal(sys.stdout) and _is_terminal(sys.stderr)


def write(line: str) -> None:
    """A line on stderr, above the bars being drawn (which are then redrawn): the log lines
    of long work, which would otherwise land in the middle of a bar."""
    if _drawing:
        from tqdm import tqdm
        tqdm.write(line, file=sys.stderr)
    else:
        print(line, file=sys.stderr, flush=True)


class Progress:
    """Handle on one piece of long work; every method is a no-op but :meth:`write` when no
    bar is drawn, so callers never test whether one is."""

    def __init__(self, bar=None):
        self._bar = bar

    @property
    def drawn(self) -> bool:
        return self._bar is not None

    def advance(self, steps: int = 1) -> None:
        if self._bar is not None:
            self._bar.update(steps)

    def expect(self, total: int) -> None:
        """The number of steps, once the work knows it."""
        if self._bar is not None:
            self._bar.total = total
            self._bar.refresh()

    def describe(self, text: str) -> None:
        """What is being done now, shown after the bar."""
        if self._bar is not None:
            self._bar.set_postfix_str(text, refresh=True)

    def write(self, line: str) -> None:
        """A line on stderr (above the bar when there is one, which is then redrawn)."""
        write(line)


@contextlib.contextmanager
def _drawn(bar, spin: str | None) -> Iterator[Progress]:
    """Redraw ``bar`` from a thread until the block ends (a spinner frame in front of the
    elapsed time when ``spin`` names the work), then erase it."""
    global _drawing
    stop = threading.Event()

    def redraw():
        frame = 0
        while not stop.wait(REDRAW_SECONDS):
            frame += 1
            if spin is not None:
                bar.set_description_str(f"{spin} {SPINNER[frame % len(SPINNER)]}", refresh=False)
            bar.refresh()

    thread = threading.Thread(target=redraw, name="progress-redraw", daemon=True)
    thread.start()
    _drawing += 1
    try:
        yield Progress(bar)
    finally:
        _drawing -= 1
        stop.set()
        thread.join()
        bar.close()


def progress(description: str, total: int | None = None, *, unit: str = "step",
             quiet: bool = False):
    """``with progress("sweep", total=10, unit="level") as p: ... p.advance()``: a bar
    (a counter when ``total`` is None) on a terminal, nothing otherwise."""
    if not shown(quiet):
        return contextlib.nullcontext(Progress())
    from tqdm import tqdm
    bar = tqdm(total=total, desc=description, unit=f" {unit}", file=sys.stderr, leave=False,
               dynamic_ncols=True)
    return _drawn(bar, None)


def waiting(description: str, *, quiet: bool = False):
    """``with waiting("repartitioning at the dispatcher"):`` around one long blocking call:
    a spinner and the elapsed time on a terminal, nothing otherwise."""
    if not shown(quiet):
        return contextlib.nullcontext(Progress())
    from tqdm import tqdm
    bar = tqdm(total=None, desc=f"{description} {SPINNER[0]}", file=sys.stderr, leave=False,
               bar_format="{desc} {elapsed}{postfix}", dynamic_ncols=True)
    return _drawn(bar, description)
