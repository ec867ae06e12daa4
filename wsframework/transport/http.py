from __future__ import annotations

import threading

import requests
import urllib3
from requests.adapters import HTTPAdapter

from ..urlpolicy import ApprovedUrl
from .base import TransportError, TransportResponse, soap_http_headers
from ..tls import process_client_context
from .tcp import client_socket_options
from ..admission import waiting_on_peer


def _no_url_credentials(request):
    # An auth handler that adds nothing: without one, requests turns a URL's userinfo into
    # an Authorization header.
    return request


def _not_connected(exc: requests.RequestException) -> bool:
    """The request never left: the connection timed out or was refused (requests wraps
    urllib3's NewConnectionError, with retries off, in a MaxRetryError)."""
    if isinstance(exc, requests.exceptions.ConnectTimeout):
        return True
    cause = exc.args[0] if exc.args else None
    return isinstance(getattr(cause, "reason", None), urllib3.exceptions.NewConnectionError)


class _PinnedAdapter(HTTPAdapter):
    """Connects a request marked with ``pinned_name`` to the address in its URL while TLS
    (SNI and the certificate check) uses the marked name. Its connections carry the
    process's TCP options (:mod:`.tcp`) besides urllib3's own (TCP_NODELAY), and its TLS
    identity (:func:`~wsframework.tls.process_client_context`)."""

    def init_poolmanager(self, *args, **pool_kwargs):
        pool_kwargs.setdefault("socket_options", [*urllib3.connection.HTTPConnection.default_socket_options,
                                                  *client_socket_options()])
        # https: the process's CA and certificate (wsframework.tls), TLS 1.2 and newer
        pool_kwargs.setdefault("ssl_context", process_client_context())
        super().init_poolmanager(*args, **pool_kwargs)

    def build_connection_pool_key_attributes(self, request, verify, cert=None):
        host_params, pool_kwargs = super().build_connection_pool_key_attributes(request, verify, cert)
        name = getattr(request, "pinned_name", None)
        if name is not None and host_params.get("scheme") == "https":
            pool_kwargs["server_hostname"] = name
            pool_kwargs["assert_hostname"] = name
        return host_params, pool_kwargs


_process_authorization: str | None = None


def set_process_authorization(value: str | None) -> None:
    """The ``Authorization`` header every HttpTransport of this process sends that was not
    given its own (the CLI's ``--token``; a role never sets it: its peers know it by its
    certificate and the network credential)."""
    global _process_authorization
    if value is not None and any(c in value for c in "\r\n\0"):
        raise ValueError("an Authorization header value has no CR, LF or NUL")
    _process_authorization = value


class HttpTransport:
    """SOAP over HTTP with pooled keep-alive connections.

    ``timeout`` is (connect, read) seconds. A request takes a session no other request is
    using from the transport's free list and gives it back when its answer is read, so a
    pool of delivery threads never contends on one connection pool lock, and the requests
    of a gevent worker's greenlets (each its own "thread" there) reuse the keep-alive
    connections of those before them instead of each opening, and keeping, its own. At most
    ``pool_size`` idle sessions are kept; one given back beyond that is closed.

    A URL approved by a :class:`~wsframework.urlpolicy.UrlPolicy` (an
    :class:`~wsframework.urlpolicy.ApprovedUrl`) is connected to at the address the policy
    approved, never resolved again: the Host header and the TLS server name stay the URL's.
    Credentials in a URL are never sent.
    """

    def __init__(self, *, timeout: tuple[float, float] = (3.0, 10.0), pool_size: int = 16,
                 max_response_bytes: int = 16 * 1024 * 1024, authorization: str | None = None):
        """``authorization``: an ``Authorization`` header value sent with every request
        (``Bearer TOKEN``; default the process's, :func:`set_process_authorization`)."""
        if authorization is not None and any(c in authorization for c in "\r\n\0"):
            raise ValueError("an Authorization header value has no CR, LF or NUL")
        self.authorization = authorization
        self.timeout = timeout
        self.pool_size = pool_size
        self.max_response_bytes = max_response_bytes
        self._idle: list[requests.Session] = []  # sessions no request is using
        self._lock = threading.Lock()

    def _take_session(self) -> requests.Session:
        with self._lock:
            if self._idle:
                return self._idle.pop()
        session = requests.Session()
        session.trust_env = False  # never route SOAP traffic through a proxy from the env
        adapter = _PinnedAdapter(pool_connections=self.pool_size,
                                 pool_maxsize=self.pool_size, max_retries=0)
        session.mount("http://", adapter)
        session.mount("https://", adapter)
        return session

    def _give_back(self, session: requests.Session) -> None:
        with self._lock:
            if len(self._idle) < self.pool_size:
                self._idle.append(session)
                return
        session.close()

    def post(self, url: str, payload: bytes, content_type: str,
             soap_action: str | None = None) -> TransportResponse:
        with waiting_on_peer():  # no control slot is held while a peer answers
            return self._post_now(url, payload, content_type, soap_action)

    def _post_now(self, url: str, payload: bytes, content_type: str,
                  soap_action: str | None = None) -> TransportResponse:
        headers = soap_http_headers(content_type, soap_action)
        authorization = self.authorization or _process_authorization
        if authorization:
            headers["Authorization"] = authorization
        target = url
        if isinstance(url, ApprovedUrl):
            target = url.pinned_url
            headers["Host"] = url.parsed.host_header
        session = self._take_session()
        try:
            body, response = self._exchange(session, url, target, payload, headers)
        finally:
            self._give_back(session)
        if len(body) > self.max_response_bytes:
            raise TransportError(f"response from {url} exceeds {self.max_response_bytes} bytes")
        return TransportResponse(response.status_code, response.headers.get("Content-Type"), body)

    def _exchange(self, session: requests.Session, url, target: str, payload: bytes,
                  headers: dict) -> tuple[bytes, requests.Response]:
        """POST over ``session``; the answer's body (at most one byte over the limit) and
        the closed response."""
        try:
            request = session.prepare_request(requests.Request(
                "POST", target, data=payload, headers=headers, auth=_no_url_credentials))
            if isinstance(url, ApprovedUrl) and url.parsed.ip is None:
                request.pinned_name = url.parsed.host
            response = session.send(request, timeout=self.timeout, allow_redirects=False,
                                    stream=True)
        except requests.RequestException as exc:
            raise TransportError(f"POST {url} failed: {exc}", unsent=_not_connected(exc)) from exc
        try:
            # Reading the streamed body raises urllib3's errors, not requests' (a read timeout
            # or a peer that breaks off after the headers).
            body = response.raw.read(self.max_response_bytes + 1, decode_content=True)
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise TransportError(f"POST {url} failed reading the answer: {exc}") from exc
        finally:
            response.close()
        return body, response

    def close(self) -> None:
        """Close the idle sessions and their connections (the transport stays usable: a
        later request opens a new one)."""
        with self._lock:
            idle, self._idle = self._idle, []
        for session in idle:
            session.close()
