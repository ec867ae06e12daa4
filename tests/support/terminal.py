"""Run a command on a pseudo-terminal (stdout and stderr both on it) and return everything it
wrote: what a person at a terminal sees, progress bars included."""
from __future__ import annotations

import fcntl
import os
import pty
import struct
import subprocess
import termios


def run_on_terminal(command: list[str], *, cwd=None, timeout: float = 120,
                    columns: int = 120) -> str:
    """The output of ``command``; AssertionError (with that output) when it exits non-zero."""
    leader, follower = pty.openpty()
    # a new pseudo-terminal is 0 columns wide, where tqdm draws an empty line
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    try:
        proc = subprocess.Popen(command, cwd=cwd, stdout=follower, stderr=follower,
                                stdin=subprocess.DEVNULL)
        os.close(follower)
        chunks = []
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # EIO: the command closed its end
                break
            if not chunk:
                break
            chunks.append(chunk)
        code = proc.wait(timeout)
    finally:
        os.close(leader)
    output = b"".join(chunks).decode("utf-8", errors="replace")
    assert code == 0, f"{command} exited with {code}:\n{output}"
    return output
