"""``python -m benchmarks.performance.renew_clients BASE CLIENTS``: renew every subscription
whose identifier is a line of standard input at the server ``BASE`` (WS-Eventing 2011 Renew,
``PT20H``) from ``CLIENTS`` threads, then exit (status 1 if any Renew failed). The renewal
storm of ``edn bench control`` runs here, in a process of its own, as the clients of a real
storm would be: not sharing an interpreter with the publisher whose round trips it times."""
from __future__ import annotations

import sys
from concurrent.futures import ThreadPoolExecutor


def main(argv: list[str]) -> int:
    from subscription_manager import messages as msg
    from subscription_manager.client import EventingClient
    from subscription_manager.manager import MANAGER_PATH
    from subscription_manager.versions import V2011
    base, clients = argv[0], int(argv[1])
    ids = [line.strip() for line in sys.stdin if line.strip()]

    def renew(subscription_id: str) -> None:
        epr = msg.manager_epr(V2011, base + MANAGER_PATH, subscription_id)
        EventingClient("2011").renew(epr, expires="PT20H")

    with ThreadPoolExecutor(clients) as pool:
        list(pool.map(renew, ids))  # the first failure raises: status 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
