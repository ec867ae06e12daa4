from __future__ import annotations

from urllib.parse import urlsplit

from .base import TransportError, TransportResponse, soap_http_headers


class InProcessTransport:
    """Delivers to services living in this process, keyed by base URL. No sockets.

    A "service" is anything with ``handle_request(data, path=..., content_type=...,
    soap_action=..., remote_addr=...) -> Outcome`` (see :class:`wsframework.service.Service`)
    or any callable ``(url, payload, content_type, soap_action) -> TransportResponse`` such as
    a recording sink in tests.
    """

    def __init__(self):
        self._endpoints: dict[str, object] = {}
        self.sent: list[tuple[str, bytes]] = []

    def mount(self, base_url: str, endpoint) -> None:
        self._endpoints[base_url.rstrip("/")] = endpoint

    def post(self, url: str, payload: bytes, content_type: str,
             soap_action: str | None = None) -> TransportResponse:
        self.sent.append((url, payload))
        base, endpoint = self._find(url)
        if callable(endpoint) and not hasattr(endpoint, "handle_request"):
            return endpoint(url, payload, content_type, soap_action)
        headers = soap_http_headers(content_type, soap_action)
        outcome = endpoint.handle_request(payload, path=urlsplit(url).path or "/",
                                          content_type=headers["Content-Type"],
                                          soap_action=headers.get("SOAPAction"),
                                          remote_addr="in-process")
        return TransportResponse(outcome.status, outcome.content_type, outcome.body)

    def _find(self, url: str):
        for base in sorted(self._endpoints, key=len, reverse=True):
            if url == base or url.startswith(base + "/"):
                return base, self._endpoints[base]
        raise TransportError(f"no in-process endpoint for {url}")

    def close(self) -> None:
        pass
