"""Agencies and their people: dashboard users, their sign-in and sessions (``users``),
passwords (``passwords``) and forgotten ones (``password_resets``, a one-time link by mail),
the owner's team and invitations (``team``), API keys (``api_keys``), and provisioning a whole
agency from one document (``provisioning``) or the demo workspace (``demo``). Calls
``common``; provisioning also creates what ``integrations`` owns (calendar connections,
webhook subscriptions) through their own functions; ``password_resets`` mails through
``integrations.notifications``."""
