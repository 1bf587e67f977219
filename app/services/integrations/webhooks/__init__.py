"""Webhooks: subscriptions (``subscriptions``) and delivering events with retries
(``deliveries``). Where they may point and the POST itself are the outbound rules every
integration shares (``app.services.integrations.outbound``)."""
