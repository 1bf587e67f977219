"""JSON over HTTPS for the providers with a REST API (Google Calendar, Microsoft Graph): one
client per read or write, a bearer token that is asked for when needed, a timeout on every
request and a deadline on the whole, and the answers a sync cannot use translated into
``CalendarSyncError``s that say what to do."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from app.services.common.tls import shared_tls_context
from app.services.integrations.calendars.errors import (
    AuthenticationFailed,
    CalendarNotFound,
    ServerError,
    ServerTimeout,
    ServerUnreachable,
)


@dataclass(frozen=True)
class ApiAccess:
    """How to reach one account at a provider's API."""

    api_url: str
    label: str  # the provider, as people know it ("Google")
    timeout: float  # each request
    deadline_seconds: float  # a whole read
    # A valid access token, refreshed when near its expiry, or at once with ``renew=True``.
    token: Callable[..., str] = field(repr=False)
    write_calendar: str | None = None


class Gone(Exception):
    """410: the provider no longer knows a sync token or delta link (a full read follows)."""


class ApiSession:
    """Requests to one provider's API for one read or write."""

    def __init__(self, access: ApiAccess, headers: dict[str, str] | None = None) -> None:
        self.access = access
        self.started = time.monotonic()
        self.client = httpx.Client(
            timeout=access.timeout, headers=headers or {}, verify=shared_tls_context()
        )

    def __enter__(self) -> ApiSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.client.close()

    def _send(
        self,
        method: str,
        url: str,
        params: dict[str, Any] | None,
        body: dict[str, Any] | None,
        headers: dict[str, str] | None,
        token: str,
    ) -> httpx.Response:
        sent = {**(headers or {}), "Authorization": f"Bearer {token}"}
        try:
            return self.client.request(method, url, params=params, json=body, headers=sent)
        except httpx.TimeoutException:
            raise ServerTimeout(
                f"{self.access.label} did not answer within {self.access.timeout:g} s"
            ) from None
        except httpx.HTTPError as err:
            raise ServerUnreachable(
                f"cannot reach {self.access.label}: {type(err).__name__}"
            ) from None

    def request(
        self,
        method: str,
        url: str,
        *,
        params: dict[str, Any] | None = None,
        json: dict[str, Any] | None = None,
        accept: tuple[int, ...] = (),
        what: str = "the calendar",
        headers: dict[str, str] | None = None,
    ) -> tuple[int, dict[str, Any]]:
        """(status, JSON body) of one request; ``url`` absolute or below the API's base.
        A status in ``accept`` is returned as it is; otherwise a 410 raises ``Gone`` and what a
        sync cannot use raises a ``CalendarSyncError``."""
        label = self.access.label
        if time.monotonic() - self.started > self.access.deadline_seconds:
            raise ServerTimeout(
                f"{label} did not answer everything within {self.access.deadline_seconds:g} s"
            )
        if not url.startswith(("http://", "https://")):
            url = f"{self.access.api_url}/{url.lstrip('/')}"
        response = self._send(method, url, params, json, headers, self.access.token())
        if response.status_code == 401:  # ended before its time (revoked, clocks apart)
            renewed = self.access.token(renew=True)
            response = self._send(method, url, params, json, headers, renewed)
        status = response.status_code
        if status in accept:
            return status, _json(response) or {}
        if status == 410:
            raise Gone()
        if status == 401:
            raise AuthenticationFailed(
                f"{label} no longer accepts this connection's access (HTTP 401): reconnect it"
            )
        if status == 404:
            raise CalendarNotFound(
                f"{label} has no {what} (HTTP 404): it was deleted or is no longer shared;"
                " choose another calendar"
            )
        if status == 403:
            reason = _reason(response)
            if "rate" in reason.lower() or "quota" in reason.lower():
                raise ServerError(f"{label} is limiting requests ({reason})")
            raise AuthenticationFailed(
                f"{label} refused access to {what} (HTTP 403: {reason}): reconnect it and"
                " allow calendar access"
            )
        if status == 429 or status >= 500:
            raise ServerError(f"{label} answered HTTP {status}")
        if status >= 400:
            raise ServerError(f"{label} answered HTTP {status}: {_reason(response)}")
        body = _json(response)
        if body is None:
            raise ServerError(f"{label} sent an answer that is not JSON")
        return status, body


def _json(response: httpx.Response) -> dict[str, Any] | None:
    """The answer's JSON object ({} for none); None when it is something else."""
    if response.status_code == 204 or not response.content:
        return {}
    try:
        body = response.json()
    except ValueError:
        return None
    return body if isinstance(body, dict) else None


def _reason(response: httpx.Response) -> str:
    try:
        error = response.json().get("error")
    except ValueError:
        return response.reason_phrase
    if isinstance(error, dict):
        reasons = [e.get("reason") for e in error.get("errors") or [] if isinstance(e, dict)]
        return str(error.get("code") if isinstance(error.get("code"), str) else "") or str(
            (reasons or [None])[0] or error.get("message") or response.reason_phrase
        )
    return str(error or response.reason_phrase)
