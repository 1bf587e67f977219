"""Security headers on every answer, no cookies from the agent API, and ``X-Forwarded-*``
believed only from the proxies the deployment says are in front of the app.

Every response carries ``X-Content-Type-Options: nosniff``, ``Referrer-Policy: same-origin``
and ``X-Frame-Options: DENY``, and, when the request came over TLS (``request.is_secure``,
which behind a trusted proxy follows its ``X-Forwarded-Proto``),
``Strict-Transport-Security: max-age=31536000; includeSubDomains``.

HTML responses carry a ``Content-Security-Policy``. The dashboard's (sign-in, invitation and
error pages too) allows scripts, styles, fonts, images and requests from this site only, no
plugins, no ``<base>`` elsewhere, forms posting here only and no framing, with these exact
exceptions for what the templates and the vendored libraries do inline (each allowed by its
SHA-256, so an injected script or style is still refused):

- the two inline event handlers (``'unsafe-hashes'``): the sub-account switcher's
  ``onchange="this.form.submit()"`` (``base.html``) and the show-once box's
  ``onfocus="this.select()"`` (``show_once.html``);
- the show-once box's copy-button script, hashed as the ``secret_box`` macro renders it for
  each id the templates give it (``SECRET_BOX_IDS``);
- FullCalendar's ``<style data-fullcalendar>``, which it inserts empty and fills through the
  CSSOM (the hash of the empty string), and the indicator rules htmx 2 inserts
  (``HTMX_INDICATOR_STYLE``);
- fonts from ``data:`` (FullCalendar's icon font is embedded in its styles).

Moving those scripts into ``app/static`` and turning htmx's indicator styles off would let the
policy drop every hash.

The Swagger UI page (``/v1/api/docs``) has a policy of its own: its one inline script (from
flask-smorest's template, built from the configuration only, never from the request) is allowed
by its hash, taken from the page as served; its stylesheet's icons are ``data:`` images.

Responses to a signed-in user's session are ``Cache-Control: no-store``. "Signed in" is read
from the session: the server-side session's token the dashboard's sign-in stores there
(``app.dashboard.auth.SESSION_TOKEN``, beside Flask-Login's own keys, and cleared with them at
sign-out), not through ``current_user``, so the hook never queries the database (a page
answered during a database outage keeps its own status), and not through Flask-Login's private
session key either.

The agent API never reads or writes the session cookie (``ApiWithoutSession``), so no response
under ``/v1/api`` sets a cookie, not even the refresh of a browser's dashboard session; any
other ``Set-Cookie`` there is removed.

``TRUSTED_PROXY_COUNT`` (default 0) is the number of reverse proxies in front of the app. With
0 the ``X-Forwarded-*`` headers are ignored: ``request.remote_addr``, the address the rate
limits and the sign-in throttle count per, is the connection's peer, whatever a client forges.
With N > 0, werkzeug's ``ProxyFix`` takes the address, scheme, host and port the N-th proxy
from the app saw (the N-th ``X-Forwarded-For`` entry from the right).
"""

from __future__ import annotations

import re
from base64 import b64encode
from collections.abc import Iterable
from hashlib import sha256
from typing import Any

from flask import Flask, Request, Response, g, request, session
from flask.sessions import SecureCookieSession, SecureCookieSessionInterface
from werkzeug.middleware.proxy_fix import ProxyFix

from app.config import API_PREFIX, settings_of
from app.dashboard.auth import SESSION_TOKEN

SWAGGER_UI_ENDPOINT = "api-docs.openapi_swagger_ui"

INLINE_HANDLERS = ("this.form.submit()", "this.select()")
SECRET_BOX_IDS = ("new-key", "new-secret", "invitation-link")
HTMX_INDICATOR_STYLE = (
    ".htmx-indicator{opacity:0;visibility: hidden} "
    ".htmx-request .htmx-indicator, .htmx-request.htmx-indicator"
    "{opacity:1;visibility: visible;transition: opacity 200ms ease-in}"
)
FULLCALENDAR_STYLE = ""

HSTS = "max-age=31536000; includeSubDomains"
_COMMON_DIRECTIVES = "object-src 'none'; base-uri 'self'; frame-ancestors 'none'"
_INLINE_SCRIPT = re.compile(r"<script>(.*?)</script>", re.DOTALL)


def source_hash(text: str) -> str:
    """A CSP hash source for an inline script, style or event handler."""
    return f"'sha256-{b64encode(sha256(text.encode()).digest()).decode()}'"


def inline_scripts(html: str) -> list[str]:
    """The contents of the attribute-less ``<script>`` elements of ``html``."""
    return _INLINE_SCRIPT.findall(html)


def dashboard_policy(app: Flask, form_targets: Iterable[str] = ()) -> str:
    """The dashboard pages' policy; forms may lead to the site itself and to
    ``form_targets`` (origins a form's answer redirects to, such as a consent page)."""
    template = app.jinja_env.get_template("dashboard/show_once.html")
    # The template's macros are attributes its module gets at run time.
    secret_box = template.module.secret_box  # type: ignore[attr-defined]
    scripts = [s for i in SECRET_BOX_IDS for s in inline_scripts(str(secret_box("", "", i)))]
    script_hashes = " ".join(source_hash(s) for s in (*INLINE_HANDLERS, *scripts))
    style_hashes = " ".join(source_hash(s) for s in (FULLCALENDAR_STYLE, HTMX_INDICATOR_STYLE))
    form_sources = " ".join(("'self'", *form_targets))
    return (
        f"default-src 'self'; script-src 'self' 'unsafe-hashes' {script_hashes}; "
        f"style-src 'self' {style_hashes}; font-src 'self' data:; "
        f"form-action {form_sources}; {_COMMON_DIRECTIVES}"
    )


def swagger_ui_policy(scripts: Iterable[str]) -> str:
    script_hashes = " ".join(source_hash(s) for s in scripts)
    return (
        f"default-src 'self'; script-src 'self' {script_hashes}; style-src 'self'; "
        f"img-src 'self' data:; form-action 'self'; {_COMMON_DIRECTIVES}"
    )


def is_api(path: str) -> bool:
    return path == API_PREFIX or path.startswith(API_PREFIX + "/")


class ApiWithoutSession(SecureCookieSessionInterface):
    """Flask's signed-cookie session, except under the API: there the cookie is not read (an
    empty session stands in) and nothing is saved, so no ``Set-Cookie`` and no
    ``Vary: Cookie``."""

    def open_session(self, app: Flask, request: Request) -> SecureCookieSession | None:
        if is_api(request.path):
            return self.session_class()
        return super().open_session(app, request)

    def save_session(self, app: Flask, session: Any, response: Response) -> None:
        if is_api(request.path):
            return
        super().save_session(app, session, response)


def trust_proxies(app: Flask) -> None:
    count = settings_of(app).trusted_proxy_count
    if count:
        app.wsgi_app = ProxyFix(  # type: ignore[method-assign]
            app.wsgi_app, x_for=count, x_proto=count, x_host=count, x_port=count
        )


def register_security_headers(app: Flask, form_targets: Iterable[str] = ()) -> None:
    trust_proxies(app)
    app.session_interface = ApiWithoutSession()
    form_targets = tuple(form_targets)
    policy = dashboard_policy(app, form_targets)

    @app.after_request
    def _security_headers(response: Response) -> Response:
        headers = response.headers
        headers["X-Content-Type-Options"] = "nosniff"
        headers["Referrer-Policy"] = "same-origin"
        headers["X-Frame-Options"] = "DENY"
        if request.is_secure:
            headers["Strict-Transport-Security"] = HSTS
        if response.mimetype == "text/html":
            # A page whose form's answer redirects to an origin of the request's own (an
            # agent's redirect URI, on its consent page) names it in ``g.form_targets``.
            own_targets = g.get("form_targets")
            headers["Content-Security-Policy"] = (
                swagger_ui_policy(inline_scripts(response.get_data(as_text=True)))
                if request.endpoint == SWAGGER_UI_ENDPOINT
                else dashboard_policy(app, [*form_targets, *own_targets])
                if own_targets
                else policy
            )
        if is_api(request.path):
            headers.remove("Set-Cookie")
        elif request.endpoint != "static" and SESSION_TOKEN in session:
            headers["Cache-Control"] = "no-store"
        return response
