"""Booking emails: who hears of what (``booking_mail``), the messages (``messages``) and sending
them (``mailer``)."""
