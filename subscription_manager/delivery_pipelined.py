"""Delivery with HTTP/1.1 pipelining, opt-in (``delivery_pipeline`` > 1).

:class:`PipeliningDeliverer` sends a worker's batch for one host as pipelined POSTs, up to
``pipeline`` of them written on one keep-alive connection before the first answer is read
(:meth:`~wsframework.transport.LeanHttpTransport.post_pipelined`): one round trip carries
that many notifications, so a far host gets ``workers x pipeline`` of them per round trip.

Why opt-in: RFC 9112 (section 9.3.2) advises against pipelining non-idempotent requests
such as POST, because when a connection breaks the client cannot tell which of the
unanswered requests the server acted on. Here every unanswered request is retried like any
failed attempt, with the same ``wsa:MessageID``: at-least-once holds, and a sink that drops
duplicates by MessageID sees each notification once; a sink that does not may see a few
twice after a broken connection. A suspect host, a transport without pipelining, or a batch
of one is sent one POST at a time as by :class:`~.delivery.Deliverer`.
"""
from __future__ import annotations

import logging

from .delivery import Deliverer
from .delivery_hosts import HostQueue
from .delivery_job import Delivery

log = logging.getLogger(__name__)

__all__ = ["PipeliningDeliverer"]


class PipeliningDeliverer(Deliverer):
    """A :class:`~.delivery.Deliverer` that pipelines each worker's batch (see the module
    docstring); ``policy.pipeline`` requests at most per round trip."""

    def _deliver_batch(self, host: HostQueue, batch: list[Delivery], readings: list
                       ) -> tuple[list[tuple[str, Delivery]], list[Delivery]]:
        depth = self.policy.pipeline
        if host.suspect or len(batch) < 2 or not hasattr(self.transport, "post_pipelined"):
            return super()._deliver_batch(host, batch, readings)
        approved: dict[str, str] = {}
        finished: list[tuple[str, Delivery]] = []
        for start in range(0, len(batch), depth):
            targets = []
            for job in batch[start:start + depth]:
                try:
                    url, outcome = self._target(job, approved)
                except Exception:  # a bug here must not kill the worker
                    log.exception("delivery of a %s to %s failed unexpectedly", job.kind, job.url)
                    url, outcome = None, "failed"
                if url is not None:
                    targets.append((job, url))
                elif outcome is not None:
                    finished.append((outcome, job))
            started = self._clock()
            for (job, _), answer in zip(targets, self._post_all(targets)):
                outcome = self._settle(job, answer, self._clock() - started, host, readings)
                if outcome is not None:
                    finished.append((outcome, job))
            if host.suspect:  # others may have the workers meanwhile
                return finished, batch[start + depth:]
        return finished, []

    def _post_all(self, targets: list[tuple[Delivery, str]]) -> list:
        """Each target's answer (or the exception in its place), pipelined when they share
        a connection, else one after another."""
        requests = [(url, job.body(), job.content_type, job.action) for job, url in targets]
        try:
            return self.transport.post_pipelined(requests)
        except ValueError:  # approved addresses differ (several A records): one by one
            answers = []
            for request in requests:
                try:
                    answers.append(self.transport.post(*request))
                except Exception as exc:
                    answers.append(exc)
            return answers
        except Exception as exc:  # the connection could not be made
            return [exc] * len(requests)
