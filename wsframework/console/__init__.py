"""The web console at ``{base}/console``: a page served by this package (vanilla JS and CSS
files, no framework, no CDN, no build step) guarded by the admin credential, and a small JSON
API the roles plug their panels into::

    from wsframework.console import ConsoleError, console_of
    console = console_of(service)                  # created and routed on first use
    console.add_api("topics", lambda call: {...})  # GET  {base}/console/api/topics
    console.add_api("purge", purge, action=True)   # POST {base}/console/api/purge

The page shows a panel when the session's ``features`` name its API (``figures``,
``network``, ``topics``, ``summary``, ``dead-letters`` + the actions ``redeliver`` and
``purge``); a role registers only those it has (``route_manager.dispatcher.console``,
``subscription_manager.console``).

Security
    * Login: the form posts the admin token (JSON) to ``api/login``; a right one sets the
      session cookie the application names (``service.names.console_cookie``: random id,
      HttpOnly, SameSite=Strict, Path=/console, Secure when the base URL is https); failed logins are throttled per remote address
      (:class:`~.auth.LoginThrottle`: 429 with Retry-After).
    * Sessions live in the role's SQLite store (:mod:`.auth` says why: several workers,
      revocable logout), with an idle and an absolute expiry.
    * Every POST (login, logout, actions) must come from this origin (Origin, else Referer)
      and be ``application/json``; logout and actions also need the session's CSRF token in
      the ``X-CSRF-Token`` header (the page gets it from ``api/session``).
    * Every answer carries a strict Content-Security-Policy (``script-src 'self'``, no inline
      script, ``frame-ancestors 'none'``), X-Content-Type-Options and X-Frame-Options; API
      answers are ``Cache-Control: no-store``.

DOM contract (the browser tests, ``tests/integration/test_console_browser.py``, rely on these
ids and attributes; add more freely, change none):

* ``#login-form`` with ``input[name=token]`` and a submit button; after login ``#console``
  is visible (and the form is not);
* ``#events-per-second``, ``#precision``, ``#hit-ratio``, ``#cpu``, ``#utilization``: their
  text is the latest number (updated every second);
* ``#servers`` table: one ``tr[data-server]`` per server (or child dispatcher);
* ``#topics`` table: ``tr[data-topic]`` rows, each with a ``.subscriptions`` cell;
* ``#dead-letters`` table: ``tr[data-id]`` rows, each with a ``button.redeliver``; the
  ``#purge-dead-letters`` button;
* ``#logout`` button; ``#status`` shows the last action's result.
"""
from __future__ import annotations

from .app import PREFIX, ApiCall, Console, ConsoleError

__all__ = ["Console", "ConsoleError", "ApiCall", "console_of", "PREFIX"]


def console_of(service) -> Console:
    """The service's console, created and routed at ``{base}/console`` on first use (every
    role's panels then share it)."""
    console = getattr(service, "console", None)
    if console is None:
        console = Console(service)
        service.http_routes.add(PREFIX, console, methods=("GET", "POST"))
        service.console = console
    return console
