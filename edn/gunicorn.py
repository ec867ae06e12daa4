"""Hosting a role under gunicorn.

The application is built *in each worker after the fork* (no preload): SQLite connections,
thread pools and R-tree indexes must never cross a fork. Workers share state only through
the durable store (see :mod:`wsframework.store`).

Worker models (``--worker-class``); both hold off idle and slow clients:

``gevent`` (the default for the source and the server when gevent is installed) keeps each
connection in a greenlet, so idle and slow clients cost memory, not a worker thread.
gunicorn's gevent worker monkey-patches the worker process after the fork, before the
application is built: the roles' own threads (delivery, sweeper, tickers, the dispatcher's
per-server senders) become greenlets there, and their sockets, locks and sleeps cooperative;
a long CPU-bound step holds the others until it ends, as the GIL did. What the roles' modules
bound *at import* stays blocking (they are imported in the arbiter, before the patch): no
module may keep ``time.sleep``, a lock or a socket function from import time. The
dispatcher's link cap did, and every wait for the link stopped the whole worker.

``gthread`` (the dispatcher's default) is gunicorn's thread pool with
:class:`RequestsBufferedBeforeThreads`: the worker's main loop reads every request whole,
without blocking, before a thread takes it, and closes a connection that has not sent one
within ``keepalive`` seconds. The dispatcher keeps threads because its work is CPU-bound
routing in one process: on a busy machine the operating system gives a process with several
runnable threads more CPU than one whose greenlets share a single thread (measured: at full
precision the gevent dispatcher's one thread was runnable all the time and waited in the run
queue 75% of it; it routed less than half as many events/s as gthread, at the same CPU per
event). ``edn bench slowclients`` measures every role under 2,000 idle, slowloris and
slow-body connections.

Both worker classes answer malformed HTTP that gunicorn itself refuses (a bad request line,
an oversized or duplicate header, a bad chunk size) with a SOAP Sender fault instead of
gunicorn's HTML error page: :class:`SoapErrorPages` replaces the worker's ``handle_error``.
"""
from __future__ import annotations

import collections
import errno
import gc
import importlib.util
import logging
import os
import selectors
import shutil
import socket
import ssl
import tempfile
import time
from functools import partial
from pathlib import Path
from typing import Callable

from gunicorn import http as gunicorn_http
from gunicorn import util as gunicorn_util
from gunicorn.app.base import BaseApplication
from gunicorn.http import errors as http_errors
from gunicorn.sock import ssl_context
from gunicorn.workers.gthread import TConn

from edn.addresses import bind_address
from edn.gunicorn_tls import (FailedHandshake, PeerCertificates, answer_plain_http,
                              handshake_log, handshake_timeout, tls_options)
from route_manager.protocol import SERVICE_NAMES
from wsframework.exceptions import receiver_fault, sender_fault
from wsframework.memory import HeapKeeper, limit_heap_arenas
from wsframework.soap import SoapVersion, fault_envelope
from wsframework.tls import ServerTls
from wsframework.transport.tcp import cap_retransmit_backoff
from wsframework.metrics import (MULTIPROC_ENV, access_mode, mark_worker_dead,
                                 prepare_multiproc_dir)
from wsframework.wsgi import WsgiApplication

log = logging.getLogger(__name__)

_services: list = []

WORKER_CLASSES = ("gevent", "gthread")
DEFAULT_WORKER_CLASS = "gevent" if importlib.util.find_spec("gevent") else "gthread"
# The dispatcher defaults to gthread (its requests buffered whole before a thread takes them,
# see the module docstring): under gevent, with its link cap fixed, it matched gthread where
# the link is the bottleneck and spent the same CPU per event, but got less CPU, so less
# throughput, where routing is the bottleneck and the machine is busy (`edn bench
# throughput`'s own publishers and servers already make it so on 2 cores).
_ROLE_DEFAULTS = {"dispatcher": "gthread"}


def default_worker_class(role: str) -> str:
    """The worker class ``edn serve ROLE`` runs when ``--worker-class`` is not given."""
    if DEFAULT_WORKER_CLASS != "gevent":
        return DEFAULT_WORKER_CLASS
    return _ROLE_DEFAULTS.get(role, DEFAULT_WORKER_CLASS)


DEFAULT_MAX_CONNECTIONS = 4000

# gunicorn's own statuses for the errors it raises before the application sees a request;
# anything else it refuses is a plain 400. What a peer broke is never answered with a 5xx.
_CLIENT_STATUS = {
    http_errors.LimitRequestLine: (414, "URI Too Long"),
    http_errors.LimitRequestHeaders: (431, "Request Header Fields Too Large"),
    http_errors.ExpectationFailed: (417, "Expectation Failed"),
    http_errors.UnsupportedTransferCoding: (501, "Not Implemented"),
    http_errors.ForbiddenProxyRequest: (403, "Forbidden"),
}


def _worker_exit(server, worker):
    # Runs in the worker on graceful shutdown: let components end subscriptions, flush
    # queues and close stores.
    while _services:
        service = _services.pop()
        try:
            service.close()
        except Exception:
            log.exception("service close failed")


def _child_exit(server, worker):
    # In the arbiter: a dead worker's live gauges leave the sums (its counters stay).
    mark_worker_dead(worker.pid)


def error_response(exc: BaseException, content_type: str | None = None) -> tuple[int, bytes]:
    """The status and bytes (head and SOAP fault) for an error gunicorn raised itself.

    A peer's malformed HTTP (every ``gunicorn.http.errors.ParseException``, an ``OSError``
    from the socket) is a Sender fault; anything else is ours, a Receiver fault with 500.
    """
    version = SoapVersion.from_content_type(content_type) or SoapVersion.SOAP11
    if isinstance(exc, (http_errors.InvalidResponseHeader, http_errors.InvalidResponseHeaderName)):
        status, reason, fault = 500, "Internal Server Error", receiver_fault("internal error")
    elif isinstance(exc, (http_errors.ParseException, http_errors.NoMoreData, OSError)):
        status, reason = next((pair for kind, pair in _CLIENT_STATUS.items()
                               if isinstance(exc, kind)), (400, "Bad Request"))
        fault = sender_fault(f"malformed HTTP request: {type(exc).__name__}: {str(exc)[:200]}")
    else:
        status, reason, fault = 500, "Internal Server Error", receiver_fault("internal error")
    body = fault_envelope(version, fault)
    head = (f"HTTP/1.1 {status} {reason}\r\nConnection: close\r\n"
            f"Content-Type: {version.content_type}\r\nContent-Length: {len(body)}\r\n\r\n")
    return status, head.encode("latin-1") + body


class SoapErrorPages:
    """Mixed into a gunicorn worker class: ``handle_error`` writes a SOAP fault, never the
    HTML page of ``gunicorn.util.write_error``."""

    def handle_error(self, req, client, addr, exc):
        addr = addr or ("", -1)
        content_type = None
        if req is not None:
            content_type = next((value for name, value in getattr(req, "headers", ())
                                 if name == "CONTENT-TYPE"), None)
        status, data = error_response(exc, content_type)
        if status >= 500:
            self.log.exception("Error handling request from ip=%s", addr[0])
        else:
            self.log.warning("Invalid request from ip=%s: %s", addr[0], str(exc)[:200])
        try:
            gunicorn_util.write_nonblock(client, data)
        except Exception:
            self.log.debug("Failed to send error message.")


class IdleConnectionsEndAtExit:
    """Mixed into the gevent worker: a graceful stop does not wait for idle keep-alive
    connections. gunicorn's gevent worker waits until every connection's handler ends, and
    one idle keep-alive connection waits ``keepalive`` seconds for its next request: longer
    than ``graceful_timeout``, after which the arbiter kills the worker before ``worker_exit``
    could end subscriptions. A second after the stop signal, the read side of every open
    connection is shut: an idle one ends at once, an answer in progress is still written."""

    def handle(self, listener, client, addr):
        if isinstance(client, FailedHandshake):  # closed and logged already
            return None
        connections = self.__dict__.setdefault("_edn_connections", set())
        connections.add(client)
        try:
            return super().handle(listener, client, addr)
        finally:
            connections.discard(client)

    def handle_exit(self, sig, frame):
        super().handle_exit(sig, frame)
        import gevent
        gevent.spawn_later(1.0, self._end_idle_connections)

    def _end_idle_connections(self):
        import socket
        for client in list(self.__dict__.get("_edn_connections", ())):
            try:
                client.shutdown(socket.SHUT_RD)
            except OSError:
                pass


#: How long a stopping buffered worker still reads its waiting connections (gunicorn's own
#: linger for kept-alive connections is 2 s).
STOP_LINGER_S = 2.0

#: A request larger than this is handed to a thread with what has arrived (gthread's own
#: behaviour for the rest of it); smaller ones are buffered whole first.
BUFFER_LIMIT = 1024 * 1024


def request_buffered(data: bytes | bytearray, limit: int = BUFFER_LIMIT) -> bool:
    """Whether ``data`` (what a connection sent so far) holds a whole request, or enough
    that a thread should take it now: the head and the body its ``Content-Length`` declares
    (or the last chunk of a chunked body), a head that asks ``Expect: 100-continue``, or more
    than ``limit`` bytes (gunicorn refuses an oversized head itself). Anything a reading
    could get wrong errs towards handing the request over early."""
    end = data.find(b"\r\n\r\n")
    if end < 0:
        return len(data) > limit
    head = bytes(data[:end]).lower()
    body = len(data) - end - 4
    if body >= limit or b"\nexpect:" in head:
        return True
    start = head.find(b"\ncontent-length:")
    if b"\ntransfer-encoding:" in head:
        if start >= 0 or not _ends_chunked(head):
            # framing gunicorn refuses (RFC 9112 6.1, 6.3): with a 400 at once, not after
            # waiting for a last chunk that may never come
            return True
        tail = bytes(data[end + 4:])
        return tail.endswith(b"\r\n\r\n") and (tail.startswith(b"0") or b"\r\n0" in tail)
    if start < 0:
        return True
    value = head[start + 16:].split(b"\r\n", 1)[0].strip()
    try:
        return body >= int(value)
    except ValueError:
        return True


def _ends_chunked(head: bytes) -> bool:
    """Whether the last transfer coding ``head`` (lower case) names is ``chunked``."""
    codings = [coding.strip() for line in head.split(b"\r\n")
               if line.startswith(b"transfer-encoding:")
               for coding in line[18:].split(b",")]
    return bool(codings) and codings[-1] == b"chunked"


class RequestsBufferedBeforeThreads:
    """Mixed into gunicorn's gthread worker: a connection gets a thread only once a whole
    request has arrived. Until then the worker's main loop reads it without blocking (its
    selector holds every waiting connection), so idle connections, slowloris heads and slow
    bodies hold no thread. A connection that has not sent a whole request within
    ``keepalive`` seconds (30 by default) of being accepted, or of its last answer, is
    closed; a stopping worker gives each waiting one :data:`STOP_LINGER_S` more at most.
    Kept-alive connections come back here for their next request."""

    def init_process(self):
        self._edn_waiting = collections.deque()  # connections buffering, by deadline
        self._edn_handshakes = collections.deque()  # TLS handshakes under way, by deadline
        self._edn_tls = ssl_context(self.cfg).context if self.cfg.is_ssl else None
        super().init_process()

    def accept(self, listener):
        try:
            client, addr = listener.accept()
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.ECONNABORTED, errno.EWOULDBLOCK):
                raise
            return
        self.nr_conns += 1
        self._edn_wait(TConn(self.cfg, client, addr, listener.getsockname()))  # non-blocking

    def on_client_socket_readable(self, conn, client):
        self.poller.unregister(client)
        self.keepalived_conns.remove(conn)
        conn.sock.setblocking(False)
        self._edn_wait(conn)

    def _edn_wait(self, conn):
        conn.edn_data = bytearray()
        conn.edn_waiting = True
        if self._edn_tls is not None and not isinstance(conn.sock, ssl.SSLSocket):
            # a new TLS connection: its handshake first, here, non-blocking
            conn.sock = self._edn_tls.wrap_socket(conn.sock, server_side=True,
                                                  do_handshake_on_connect=False,
                                                  suppress_ragged_eofs=True)
            conn.edn_handshaking = True
            conn.edn_deadline = time.monotonic() + handshake_timeout()
            self._edn_handshakes.append(conn)
        else:
            conn.edn_handshaking = False
            conn.edn_deadline = time.monotonic() + (self.cfg.keepalive or 30)
            self._edn_waiting.append(conn)
        self.poller.register(conn.sock, selectors.EVENT_READ, partial(self._edn_readable, conn))

    def _edn_readable(self, conn, client):
        if conn.edn_handshaking and not self._edn_handshake(conn):
            return
        data = bytearray()
        try:
            chunk = conn.sock.recv(65536)
            data += chunk
            # TLS: records already decrypted wait in the socket's buffer, unseen by select
            while chunk and isinstance(conn.sock, ssl.SSLSocket) and conn.sock.pending():
                chunk = conn.sock.recv(65536)
                data += chunk
        except (BlockingIOError, InterruptedError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
            if not data:
                return
        except OSError:
            pass
        if not data:  # the peer stopped sending before its request was whole
            if conn.edn_data:  # a truncated request: the parser answers it (a SOAP 400)
                self._edn_hand_over(conn)
            else:
                self._edn_close(conn)
            return
        conn.edn_data += data
        if request_buffered(conn.edn_data):
            self._edn_hand_over(conn)

    def _edn_handshake(self, conn) -> bool:
        """One step of a TLS handshake; whether it is done (then the request is read)."""
        try:
            conn.sock.do_handshake()
        except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
            return False
        except (ssl.SSLError, OSError) as exc:
            handshake_log.failed(exc, conn.client)
            answer_plain_http(conn.sock, exc)
            self._edn_close(conn)
            return False
        conn.edn_handshaking = False
        conn.edn_deadline = time.monotonic() + (self.cfg.keepalive or 30)
        self._edn_waiting.append(conn)
        return True

    def _edn_hand_over(self, conn):
        self.poller.unregister(conn.sock)
        conn.edn_waiting = False
        conn.data_ready = True
        self.enqueue_req(conn)

    def _edn_close(self, conn):
        try:
            self.poller.unregister(conn.sock)
        except (KeyError, ValueError, OSError):
            pass
        conn.edn_waiting = False
        self.nr_conns -= 1
        conn.close()

    def murder_pending(self):
        super().murder_pending()
        now = time.monotonic()
        if not self.alive:
            self._edn_linger(now)
        waiting = self._edn_waiting
        while waiting and (not waiting[0].edn_waiting or waiting[0].edn_deadline <= now):
            conn = waiting.popleft()
            if conn.edn_waiting:
                self._edn_close(conn)
        handshakes = self._edn_handshakes
        while handshakes and (not handshakes[0].edn_handshaking
                              or handshakes[0].edn_deadline <= now):
            conn = handshakes.popleft()
            if conn.edn_handshaking and conn.edn_waiting:
                handshake_log.failed(TimeoutError(f"no handshake within {handshake_timeout():g} s"),
                                     conn.client)
                conn.edn_handshaking = False
                self._edn_close(conn)

    def _edn_linger(self, now: float) -> None:
        """A stopping worker (SIGTERM, a SIGHUP reload) still reads what its waiting
        connections send for :data:`STOP_LINGER_S`: a request (or a handshake) under way
        is answered, with ``Connection: close``, instead of being reset; gunicorn's stop
        loop runs until every connection is closed or ``graceful_timeout``. Deadlines only
        come nearer, all by the same cap, so each deque stays sorted."""
        if getattr(self, "_edn_lingering", False):
            return
        self._edn_lingering = True
        cap = now + STOP_LINGER_S
        for queue in (self._edn_waiting, self._edn_handshakes):
            for conn in queue:
                conn.edn_deadline = min(conn.edn_deadline, cap)

    def handle(self, conn):
        # In the thread: what the main loop buffered goes in front of the parser's input.
        data = getattr(conn, "edn_data", None)
        if data:
            conn.edn_data = bytearray()
            conn.sock.setblocking(True)
            if conn.parser is None and isinstance(conn.sock, ssl.SSLSocket):
                # its handshake is done: no second wrap by TConn.init
                conn.parser = gunicorn_http.get_parser(self.cfg, conn.sock, conn.client)
            conn.init()
            conn.parser.unreader.unread(bytes(data))
        return super().handle(conn)


def worker_class(name: str) -> type:
    """The gunicorn worker class for ``name`` (one of :data:`WORKER_CLASSES`) with
    :class:`SoapErrorPages` mixed in."""
    if name == "gevent":
        from gunicorn.workers.ggevent import GeventWorker as base
    elif name == "gthread":
        from gunicorn.workers.gthread import ThreadWorker as base
    else:
        raise ValueError(f"unknown worker class {name!r}; known: {', '.join(WORKER_CLASSES)}")
    mixins = ((SoapErrorPages, PeerCertificates, IdleConnectionsEndAtExit) if name == "gevent"
              else (SoapErrorPages, PeerCertificates, RequestsBufferedBeforeThreads))
    return type(f"Edn{base.__name__}", (*mixins, base), {"__module__": __name__})


# A Unix socket's path holds at most 107 bytes (sun_path); longer ones cannot be bound.
MAX_SOCKET_PATH = 107


def control_socket_options(path: Path | None) -> dict:
    """gunicorn's control-socket settings for a role: its socket at ``path`` (the role's
    data directory), else none at all.

    gunicorn >= 25.1 opens a control socket (for ``gunicornc``) by default at
    ``$XDG_RUNTIME_DIR/gunicorn.ctl`` or ``~/.gunicorn/gunicorn.ctl``: one path shared by
    every ``edn serve`` a user runs on a machine, each new arbiter taking it over from the
    last. A path too long for a Unix socket disables it (logged) rather than failing."""
    if path is not None and len(os.fsencode(str(path))) <= MAX_SOCKET_PATH:
        return {"control_socket": str(path), "control_socket_disable": False}
    if path is not None:
        log.info("gunicorn control socket disabled: %s is longer than a Unix socket path "
                 "may be", path)
    return {"control_socket_disable": True}


_GC_THRESHOLDS = (10_000, 20, 20)  # Python's default is (700, 10, 10)


def _cap_listeners_backoff(arbiter):
    # every connection a worker accepts inherits its listener's TCP retransmission cap
    for listener in arbiter.LISTENERS:
        if getattr(listener, "FAMILY", None) in (socket.AF_INET, socket.AF_INET6):
            cap_retransmit_backoff(listener.sock)


class GunicornServer(BaseApplication):
    """``threads`` counts for gthread; ``max_connections`` is gunicorn's
    ``worker_connections`` (per worker: beyond it, connections wait in the listen backlog);
    ``timeout`` is how long a silent worker lives before the arbiter restarts it."""

    def __init__(self, factory: Callable[[], object], *, host: str, port: int, workers: int = 1,
                 threads: int = 8, timeout: int = 60, log_level: str = "info",
                 worker_class_name: str = DEFAULT_WORKER_CLASS,
                 max_connections: int = DEFAULT_MAX_CONNECTIONS, keepalive: int = 30,
                 metrics_dir: Path | None = None, control_socket: Path | None = None,
                 tls: ServerTls | None = None):
        """``metrics_dir``: where the workers' Prometheus files live (emptied when the
        arbiter starts; :mod:`wsframework.metrics`); without one, $PROMETHEUS_MULTIPROC_DIR,
        else a temporary directory removed at exit. ``control_socket``: where gunicorn's
        control socket goes (:func:`control_socket_options`). ``tls``: serve HTTPS
        (:mod:`edn.gunicorn_tls`)."""
        self._factory = factory
        try:
            # a bad EDN_METRICS_ACCESS stops the start, before any worker
            access_mode(env=SERVICE_NAMES.metrics_access_env)
        except ValueError as exc:
            raise SystemExit(f"edn serve: {exc}") from None
        self._metrics_dir = metrics_dir
        self._metrics_tmp = None
        self._options = {
            "bind": bind_address(host, port),
            "workers": workers,
            "worker_class": worker_class(worker_class_name),
            "threads": threads,
            "worker_connections": max_connections,
            "backlog": 2048,
            "timeout": timeout,
            "graceful_timeout": 15,
            "keepalive": keepalive,
            "preload_app": False,
            "accesslog": None,
            "errorlog": "-",
            "loglevel": log_level,
            "limit_request_line": 8190,
            "limit_request_fields": 100,
            "worker_exit": _worker_exit,
            "child_exit": _child_exit,
            "on_starting": self._starting,
            "when_ready": _cap_listeners_backoff,
            "on_exit": self._remove_metrics,
            "proc_name": "edn",
            **control_socket_options(control_socket),
            **tls_options(tls),  # HTTPS (edn.gunicorn_tls)
        }
        super().__init__()

    def _starting(self, arbiter):
        # In the arbiter as it starts, before any worker is forked: what they inherit.
        limit_heap_arenas()  # before any thread allocates (wsframework.memory)
        self._prepare_metrics(arbiter)

    def _prepare_metrics(self, arbiter):
        # In the arbiter as it starts (never in a process that only builds this object):
        # the directory and the environment variable every worker inherits.
        # (mkdtemp, not TemporaryDirectory: a worker's exit would run its finalizer)
        if self._metrics_dir is None and os.environ.get(MULTIPROC_ENV):  # the operator's
            self._metrics_dir = Path(os.environ[MULTIPROC_ENV])
        if self._metrics_dir is None:
            self._metrics_tmp = self._metrics_dir = Path(tempfile.mkdtemp(prefix="edn-prometheus-"))
        prepare_multiproc_dir(self._metrics_dir)

    def _remove_metrics(self, arbiter):
        if self._metrics_tmp is not None:
            shutil.rmtree(self._metrics_tmp, ignore_errors=True)

    def load_config(self):
        for key, value in self._options.items():
            if key in self.cfg.settings:  # control_socket*: gunicorn >= 25.1 only
                self.cfg.set(key, value)

    def load(self):
        service = self._factory()
        _services.append(service)
        application = WsgiApplication(service)
        # What the worker built to serve (tables, indexes, compiled filters, modules) lives
        # as long as the worker: frozen out of the collector's generations, it is no longer
        # scanned at every full collection (the collector was ~15% of a delivering source's
        # CPU, measured by benchmarks/performance/delivery.py), and young collections come less often.
        # A full collection first, unless one just ran: a large start collects after its load
        # (wsframework.memory.settle_after_load), and a second pass over a million
        # subscriptions' objects took a second. (No middle-generation collection since the
        # last full one: at most a few thousand objects were made since, and what they leave
        # in cycles is frozen with them.)
        if gc.get_count()[2] > 0:
            gc.collect()
        gc.freeze()
        gc.set_threshold(*_GC_THRESHOLDS)
        # ... and what its requests free is handed back to the system from time to time
        # (wsframework.memory.HeapKeeper): a greenlet under gevent, a thread under gthread
        HeapKeeper().start()
        return application
