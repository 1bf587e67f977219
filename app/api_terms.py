"""The API's published terms that both its server and its clients state: the permissions an API
key may have and their labels, how many bookings a list answers, how long a slot hold lasts.

The services and the API's schemas enforce them; the dashboard shows them; the MCP server, a
client of the API over HTTP, describes them to a model. Each is named once, here, in a module
that imports nothing, so the MCP server reads a number without loading the app (no Flask, no
SQLAlchemy, no services: ``tests/conventions/test_imports.py`` and the import contracts in
``pyproject.toml`` hold that true).
"""

# An API key's permissions (``app.models.Permission``'s values, which
# ``tests/unit/test_api_terms.py`` holds equal to these) with the spec's dashboard labels, in the
# spec's order.
PERMISSION_LABELS = {
    "canCheckAvailability": "Check availability",
    "canGetBookings": "Get bookings",
    "canBook": "Book appointments",
    "canCancel": "Cancel bookings",
}

# How many bookings a list answers: by default, and at most (the API's ``limit``).
LIST_LIMIT_DEFAULT = 50
LIST_LIMIT_MAX = 100

# How long a slot hold lasts, in seconds: by default, and at most (the API's ``ttlSeconds``).
DEFAULT_TTL_SECONDS = 120
MAX_TTL_SECONDS = 600

# Where the OAuth 2.1 protected resource metadata is (RFC 9728), under a resource's origin: the
# API's (``app.oauth``) and the MCP server's (``app.mcp.oauth_gate``, then its path).
RESOURCE_METADATA_PATH = "/.well-known/oauth-protected-resource"
