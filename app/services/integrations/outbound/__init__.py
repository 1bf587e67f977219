"""The outbound HTTP rules every integration keeps (webhooks, feeds, CalDAV, OAuth): where a
request may go (``addresses``: the address guard, private ranges, the app's policy) and how it
goes (``transport``: a connection pinned to the checked address, the exchange's deadline)."""
