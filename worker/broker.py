"""The Redis transport of the processes ``celery -A worker`` starts: kombu's own, except that
an acknowledgement Redis did not answer never costs the worker a place in its prefetch window,
and a lost connection never stops the worker.

Why: kombu's Redis QoS forgets a delivered message (frees its place in the window) only once
Redis has removed it from the unacknowledged index. When that removal fails (Redis frozen past
the socket timeout, or dropped), kombu logs ``Couldn't ack … TimeoutError`` and keeps the
message in the window for good. Late acks with a prefetch multiplier of 1 make the window the
pool's size, so a worker whose acks all fell inside one outage never took another task, while
its heartbeat went on (issue 48: 3 of 3 freezes under load).

Here a failed acknowledgement is *owed* instead: the message leaves the window at once (the
task has run; the worker may take the next one), and its removal from Redis's index is made
again after the next acknowledgement Redis answers, or at kombu's periodic look at that index
(``restore_visible``, every 10 s), whichever comes first. Should the worker stop before it
pays, the message stays in the index and Redis hands it out again after the visibility timeout,
as for a worker that crashed: tasks are safe to run twice (acks late, handlers keyed on what
they did).

A connection lost (Redis restarted, say) is put away by Celery, which collects it, closes it
and connects anew. With tasks in the window, kombu's close then tried to requeue them through
the collected transport and raised AttributeError, which Celery takes for "Unrecoverable
error": the worker exited (seen under load with Redis restarted), and a task that ran across
the reconnect hit the same acknowledging on the old channel. Here both leave those messages to
Redis's unacknowledged index instead, which hands them out again after the visibility timeout.

Only kombu's public QoS methods and attributes are overridden or used; the tests in
``tests/worker/test_broker_acks.py`` fail with kombu's own transport.
"""

from __future__ import annotations

import logging
from typing import Any

from kombu.transport import redis, virtual

log = logging.getLogger(__name__)

# What Redis not answering raises (kombu's Redis transport's own list: a timeout, a refused or
# dropped connection).
UNANSWERED = redis.Transport.connection_errors


class OwedAcks(redis.QoS):
    """kombu's Redis QoS, with the acknowledgements and rejections Redis did not answer owed
    instead of holding their places in the window."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # delivery tag -> whether to requeue it (a rejection) rather than remove it (an ack)
        self.owed: dict[str, bool] = {}

    def transport_gone(self) -> bool:
        """Whether this channel's transport was put away (collected, or the channel closed):
        kombu then reaches Redis no more through it, and tries to with an AttributeError (it
        builds a connection pool from the transport's ``client``, which is then None)."""
        transport = self.channel.connection
        return transport is None or transport.client is None

    def connection_gone(self) -> bool:
        """Whether this channel was closed, its connection lost (the worker consumes on a new
        one), or is closing."""
        return self.channel.closed or self.transport_gone()

    def left_to_redis(self, delivery_tag: str, what: str) -> None:
        log.warning(
            "broker connection lost: the %s of task message %s is left to Redis, which hands"
            " the message out again after its visibility timeout",
            what,
            delivery_tag,
        )

    def ack(self, delivery_tag: str) -> None:
        if self.connection_gone():  # a task that ran while the worker reconnected
            self.left_to_redis(delivery_tag, "acknowledgement")
            return
        try:
            super().ack(delivery_tag)
        except UNANSWERED as error:
            self.owe(delivery_tag, False, error)
        else:
            self.pay_owed()

    def reject(self, delivery_tag: str, requeue: bool = False) -> None:
        if self.connection_gone():
            self.left_to_redis(delivery_tag, "rejection")
            return
        try:
            super().reject(delivery_tag, requeue=requeue)
        except UNANSWERED as error:
            self.owe(delivery_tag, requeue, error)
        else:
            self.pay_owed()

    def restore_visible(self, *args: Any, **kwargs: Any) -> Any:
        self.pay_owed()
        return super().restore_visible(*args, **kwargs)

    def restore_unacked(self, client: Any = None) -> Any:
        """Requeue the messages still in the window as the channel closes, unless its connection
        is gone: after losing Redis, Celery collects the connection and then closes it, and
        kombu's requeue through it raised AttributeError, which stopped the worker for good
        ("Unrecoverable error", seen under load with Redis restarted). Those messages stay in
        Redis's unacknowledged index, which hands them out again after the visibility timeout
        (if Redis kept them; the sweeps hand their work over again if not)."""
        if client is None and self.transport_gone():
            log.warning(
                "broker connection lost: the task messages in the worker's window are left to"
                " Redis, which hands them out again after their visibility timeout"
            )
            return None
        return super().restore_unacked(client)

    def owe(self, delivery_tag: str, requeue: bool, error: BaseException) -> None:
        virtual.QoS.ack(self, delivery_tag)  # out of the window: the worker takes the next task
        self.owed[delivery_tag] = requeue
        log.warning(
            "broker unavailable (%s): the %s of task message %s is owed (%d owed)",
            type(error).__name__,
            "rejection" if requeue else "acknowledgement",
            delivery_tag,
            len(self.owed),
        )

    def pay_owed(self) -> None:
        """Make the owed removals (and requeues) in Redis, as kombu's QoS makes them; stop at
        the first Redis does not answer (the rest wait for the next try)."""
        while self.owed and not self.connection_gone():
            delivery_tag, requeue = next(iter(self.owed.items()))
            try:
                if requeue:
                    self.restore_by_tag(delivery_tag, leftmost=True)
                else:
                    with self.pipe_or_acquire() as pipe:
                        pipe.zrem(self.unacked_index_key, delivery_tag)
                        pipe.hdel(self.unacked_key, delivery_tag)
                        pipe.execute()
            except UNANSWERED:
                return
            del self.owed[delivery_tag]
            if not self.owed:
                log.info("broker answering again: every owed acknowledgement made")


class Channel(redis.Channel):
    QoS = OwedAcks


class Transport(redis.Transport):
    """``broker_transport`` of the worker and beat on Redis (``celery_app.consumer_settings``)."""

    Channel = Channel
