"""The peer brokers ``edn bench peers`` compares with, from Debian's packages: installed with
apt-get when missing and this process may (root, apt-get present), else skipped with why."""
from __future__ import annotations

import os
import shutil
import subprocess

from . import activemq, mosquitto, rabbitmq

# peer -> (its Debian packages, the check that says why it cannot run: None when it can)
PEERS = {"activemq": (("activemq",), activemq.missing),
         "rabbitmq": (("rabbitmq-server",), rabbitmq.missing),
         "mosquitto": (("mosquitto",), mosquitto.missing)}


def ensure_peers() -> dict[str, str]:
    """Install the peers that are missing where possible; peer -> why it is skipped."""
    wanted = [pkg for _, (packages, why) in PEERS.items() if why() for pkg in packages]
    if wanted:
        if os.geteuid() == 0 and shutil.which("apt-get"):
            env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
            result = subprocess.run(["apt-get", "install", "-y", "-q", "--no-install-recommends",
                                     *wanted], capture_output=True, text=True, env=env, timeout=1200)
            if result.returncode != 0:  # the package lists may be stale: once more after them
                subprocess.run(["apt-get", "update", "-q"], capture_output=True, env=env, timeout=600)
                subprocess.run(["apt-get", "install", "-y", "-q", "--no-install-recommends",
                                *wanted], capture_output=True, env=env, timeout=1200)
        else:
            return {peer: f"{why()}; not root with apt-get, so not installed here"
                    for peer, (_, why) in PEERS.items() if why()}
    return {peer: why() for peer, (_, why) in PEERS.items() if why()}
