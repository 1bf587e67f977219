"""Webhooks: subscriptions (``subscriptions``), where they may point (``targets``), delivering
events with retries (``deliveries``) and the POST itself (``http``)."""
