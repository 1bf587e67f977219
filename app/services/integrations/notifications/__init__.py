"""Email: booking mail, who hears of what (``booking_mail``), the messages (``messages``) and
sending them (``mailer``); a connection that needs someone (``connection_mail``); a
password-reset link (``password_reset_mail``); the mail log (``mail_log``)."""
