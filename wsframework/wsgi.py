"""The WSGI edge: HTTP in, :meth:`Service.handle_request` out. Nothing else knows about HTTP.

Every response to a POST is a SOAP envelope (or an empty 202), never an HTML error page:
oversized bodies are refused with a Sender fault before they are read into memory (the
excess is drained in small chunks so the client can read the fault), a body the HTTP server
cannot read as framed (a bad chunk size, a body cut short) is a Sender fault with HTTP 400
(whatever the SOAP version: the message never reached SOAP processing) and a closed
connection, and any unexpected error becomes a Receiver fault.
"""
from __future__ import annotations

import errno
import json
import logging
from urllib.parse import parse_qs

from .exceptions import SoapFault, WsFrameworkError, receiver_fault, sender_fault
from .faults import fault_for, forget_tracebacks, translate
from .http_routes import MAX_ROUTE_BODY, HttpRequest
from .memory import settle_after_large_request
from .soap import SoapVersion, fault_envelope
from .store import STORAGE_FULL_REASON, make_changes_durable, release_connections
from .tls import PEER_PRINCIPAL_ENVIRON

log = logging.getLogger(__name__)

NOT_DURABLE_REASON = ("the service's disk failed to store the change (its sync failed): it "
                      "was not acknowledged and may or may not be kept")

_DRAIN_CHUNK = 64 * 1024
# Beyond this much excess the connection is simply closed: draining it would let a client
# keep a worker busy for as long as it likes.
_MAX_DRAIN = 256 * 1024 * 1024
# The size of the body a POST handed to SOAP processing, in its WSGI environ.
_BODY_BYTES = "wsframework.body_bytes"


class MalformedRequestBody(WsFrameworkError):
    """The request body could not be read as its HTTP framing declares (the server's own
    error, e.g. gunicorn's InvalidChunkSize, is the cause)."""


@translate(MalformedRequestBody)
def _malformed_body(exc: MalformedRequestBody) -> SoapFault:
    return sender_fault(f"malformed request body: {exc}")


class WsgiApplication:
    def __init__(self, service):
        self.service = service

    def __call__(self, environ, start_response):
        try:
            method = environ.get("REQUEST_METHOD", "GET")
            path = environ.get("PATH_INFO") or "/"
            # a service without plain HTTP routes (a bare endpoint, a test's echo) is SOAP only
            routes = getattr(self.service, "http_routes", None)
            route = routes.find(path) if routes is not None else None
            if route is not None:
                status, headers, body = self._route(environ, method, path, *route)
            elif method == "POST":
                status, headers, body = self._post(environ, path)
            elif method in ("GET", "HEAD"):
                status, headers, body = self._get(environ, path)
            else:
                status, headers, body = 405, [("Allow", "GET, POST")], b"method not allowed\n"
                headers.append(("Content-Type", "text/plain"))
        except MalformedRequestBody as exc:
            version = SoapVersion.from_content_type(environ.get("CONTENT_TYPE")) or SoapVersion.SOAP11
            log.info("refused: %s", exc)
            status, headers, body = (400, [("Content-Type", version.content_type),
                                           ("Connection", "close")],
                                     fault_envelope(version, fault_for(exc)))
        except Exception as exc:
            version = SoapVersion.from_content_type(environ.get("CONTENT_TYPE")) or SoapVersion.SOAP11
            fault = fault_for(exc, where=environ.get("PATH_INFO") or "/")
            forget_tracebacks(exc)
            status, headers, body = (version.fault_status(fault),
                                     [("Content-Type", version.content_type)],
                                     fault_envelope(version, fault))
        # The store connections go back first: waiting for the sync needs none, and a
        # worker's requests wait for syncs together (a renewal storm's dozens), so holding
        # them meant opening as many again, and reading the schema, for the next requests.
        release_connections()
        try:
            make_changes_durable()  # nothing is answered before what it changed is on disk
        except OSError as exc:
            log.error("a request's changes could not be synced to disk: %s", exc)
            version = SoapVersion.from_content_type(environ.get("CONTENT_TYPE")) or SoapVersion.SOAP11
            fault = receiver_fault(STORAGE_FULL_REASON if exc.errno == errno.ENOSPC
                                   else NOT_DURABLE_REASON)
            status, headers, body = (version.fault_status(fault),
                                     [("Content-Type", version.content_type)],
                                     fault_envelope(version, fault))
        finally:
            settle_after_large_request(environ.get(_BODY_BYTES, 0))
        headers.append(("Content-Length", str(len(body))))
        start_response(_status_line(status), headers)
        return [body if method != "HEAD" else b""]

    def _route(self, environ, method, path, methods, handler):
        """A plain HTTP route (:mod:`.http_routes`): bounded body, its own answer."""
        if method not in methods:
            return (405, [("Allow", ", ".join(sorted(methods))),
                          ("Content-Type", "text/plain")], b"method not allowed\n")
        body = b""
        if method == "POST":
            try:
                declared = int(environ.get("CONTENT_LENGTH") or 0)
            except ValueError:
                declared = -1
            if not 0 <= declared <= MAX_ROUTE_BODY:
                # unread: the connection closes rather than a worker draining it
                return (413, [("Content-Type", "text/plain"), ("Connection", "close")],
                        b"request body too large or without a valid Content-Length\n")
            body = _read(environ["wsgi.input"], declared)
        headers = {key[5:].lower().replace("_", "-"): value for key, value in environ.items()
                   if key.startswith("HTTP_")}
        if environ.get("CONTENT_TYPE"):
            headers["content-type"] = environ["CONTENT_TYPE"]
        request = HttpRequest(method, path, environ.get("QUERY_STRING", ""), headers, body,
                              environ.get("REMOTE_ADDR"))
        try:
            response = handler(request)
        except Exception:
            log.exception("the route for %s failed", path)
            return 500, [("Content-Type", "text/plain")], b"internal error\n"
        return response.status, list(response.headers), response.body

    def _post(self, environ, path):
        content_type = environ.get("CONTENT_TYPE")
        limit = self.service.config.limits.max_bytes
        stream = environ["wsgi.input"]
        length = environ.get("CONTENT_LENGTH")
        try:
            declared = int(length) if length else None
        except ValueError:
            declared = None
        if declared is not None and declared < 0:
            declared = None  # read(-1) would read everything, however large
        if declared is not None and declared > limit:
            _drain(stream, declared)
            return self._refuse(content_type, f"message of {declared} bytes exceeds the limit of {limit}")
        data = _read(stream, declared if declared is not None else limit + 1)
        if len(data) > limit:
            _drain(stream, _MAX_DRAIN)
            return self._refuse(content_type, f"message exceeds the limit of {limit} bytes")
        environ[_BODY_BYTES] = len(data)
        outcome = self.service.handle_request(
            data, path=path, content_type=content_type,
            soap_action=environ.get("HTTP_SOAPACTION"), remote_addr=environ.get("REMOTE_ADDR"),
            peer_principal=environ.get(PEER_PRINCIPAL_ENVIRON),
            authorization=environ.get("HTTP_AUTHORIZATION"))
        headers = [("Content-Type", outcome.content_type)] if outcome.content_type else []
        return outcome.status, headers, outcome.body

    def _refuse(self, content_type, reason):
        version = SoapVersion.from_content_type(content_type) or SoapVersion.SOAP11
        log.info("refused: %s", reason)
        fault = sender_fault(reason)
        return (version.fault_status(fault), [("Content-Type", version.content_type),
                                              ("Connection", "close")],
                fault_envelope(version, fault))

    def _get(self, environ, path):
        query = environ.get("QUERY_STRING", "")
        if query.lower() in ("wsdl", "wsdl=") or query.lower().startswith("wsdl&"):
            # ``?wsdl&version=2004``: the other parameters go to query-aware providers.
            document = (self.service.wsdl_for(path) if "&" not in query else
                        self.service.wsdl_for(path, query=parse_qs(query, keep_blank_values=True)))
            if document is not None:
                return 200, [("Content-Type", "text/xml; charset=utf-8")], document
            return 404, [("Content-Type", "text/plain")], b"no WSDL at this address\n"
        if path == "/health":
            body = json.dumps({"status": "ok", "role": self.service.config.role}).encode()
            return 200, [("Content-Type", "application/json")], body
        return 404, [("Content-Type", "text/plain")], b"POST SOAP messages here; GET ?wsdl for WSDL\n"


def _read(stream, size: int) -> bytes:
    try:
        return stream.read(size)
    except Exception as exc:  # the server's framing error, whatever its class
        reason = str(exc)[:200] or type(exc).__name__
        raise MalformedRequestBody(f"{type(exc).__name__}: {reason}") from exc


def _drain(stream, declared: int) -> None:
    remaining = min(declared, _MAX_DRAIN)
    while remaining > 0:
        chunk = _read(stream, min(_DRAIN_CHUNK, remaining))
        if not chunk:
            break
        remaining -= len(chunk)


def _status_line(status: int) -> str:
    reasons = {200: "OK", 202: "Accepted", 204: "No Content", 303: "See Other",
               400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found",
               405: "Method Not Allowed", 413: "Content Too Large", 429: "Too Many Requests",
               500: "Internal Server Error"}
    return f"{status} {reasons.get(status, 'Unknown')}"
