"""The MCP server over the Calendar Booking API (``python -m app.mcp``): ``server`` builds it
on ``app.client``; ``__main__`` runs it over stdio or streamable HTTP."""
