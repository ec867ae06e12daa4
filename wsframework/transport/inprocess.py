from __future__ import annotations

import io
from urllib.parse import unquote_to_bytes, urlsplit

from ..wsgi import WsgiApplication
from .base import TransportError, TransportResponse, soap_http_headers
from ..admission import waiting_on_peer


class InProcessTransport:
    """Delivers to services living in this process, keyed by base URL. No sockets.

    A "service" is anything with ``handle_request(data, path=..., content_type=...,
    soap_action=..., remote_addr=...) -> Outcome`` and ``config.limits`` (see
    :class:`wsframework.service.Service`); it is reached through the same WSGI edge as over
    HTTP (:class:`~wsframework.wsgi.WsgiApplication`, called in process), so it sees what it
    would see from a WSGI server (SOAPAction, a percent-decoded path, the size limit) and
    its failures come back as faults, not exceptions. Any other callable ``(url, payload,
    content_type, soap_action) -> TransportResponse`` (a recording sink in tests) is called
    as it is.
    """

    def __init__(self):
        self._endpoints: dict[str, object] = {}
        self.sent: list[tuple[str, bytes]] = []

    def mount(self, base_url: str, endpoint) -> None:
        if hasattr(endpoint, "handle_request"):
            endpoint = WsgiApplication(endpoint)
        self._endpoints[base_url.rstrip("/")] = endpoint

    def post(self, url: str, payload: bytes, content_type: str,
             soap_action: str | None = None) -> TransportResponse:
        with waiting_on_peer():  # no control slot is held while a peer answers
            return self._post_now(url, payload, content_type, soap_action)

    def _post_now(self, url: str, payload: bytes, content_type: str,
                  soap_action: str | None = None) -> TransportResponse:
        self.sent.append((url, payload))
        endpoint = self._find(url)
        if not isinstance(endpoint, WsgiApplication):
            return endpoint(url, payload, content_type, soap_action)
        return _call_wsgi(endpoint, url, payload, soap_http_headers(content_type, soap_action))

    def _find(self, url: str):
        for base in sorted(self._endpoints, key=len, reverse=True):
            if url == base or url.startswith(base + "/") or url.startswith(base + "?"):
                return self._endpoints[base]
        raise TransportError(f"no in-process endpoint for {url}", unsent=True)

    def close(self) -> None:
        pass


def _call_wsgi(app: WsgiApplication, url: str, payload: bytes,
               headers: dict[str, str]) -> TransportResponse:
    split = urlsplit(url)
    environ = {
        "REQUEST_METHOD": "POST",
        # What a WSGI server passes (PEP 3333): the percent-decoded path as latin-1 text.
        "PATH_INFO": unquote_to_bytes(split.path or "/").decode("latin-1"),
        "QUERY_STRING": split.query,
        "CONTENT_TYPE": headers["Content-Type"],
        "CONTENT_LENGTH": str(len(payload)),
        "REMOTE_ADDR": "in-process",
        "wsgi.input": io.BytesIO(payload),
    }
    if "SOAPAction" in headers:
        environ["HTTP_SOAPACTION"] = headers["SOAPAction"]
    answered: dict[str, object] = {}

    def start_response(status: str, response_headers: list, exc_info=None) -> None:
        answered["status"] = int(status.split(" ", 1)[0])
        answered["headers"] = response_headers

    body = b"".join(app(environ, start_response))
    content_type = next((value for name, value in answered["headers"]
                         if name.lower() == "content-type"), None)
    return TransportResponse(answered["status"], content_type, body)
