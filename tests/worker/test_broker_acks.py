"""The worker's Redis transport (``worker.broker``): an acknowledgement Redis does not answer
frees the message's place in the consumer's prefetch window at once, and is made again once
Redis answers, so nothing is handed out a second time.

kombu's own transport kept such a message in the window for good: with late acks and a window
of the pool's size, a worker whose acks fell inside a Redis freeze never took another task
(issue 48). Here kombu talks to a Redis of the test's own, frozen with SIGSTOP while the
consumer acknowledges, with a socket timeout short enough to give the ack up inside the freeze.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

import pytest
from kombu import Connection, Consumer, Exchange, Message, Queue

from tests.redis_servers import OwnRedis, own_redis_server
from worker.broker import Transport

pytestmark = pytest.mark.slow

log = logging.getLogger(__name__)

SHORT_TIMEOUT_S = 0.5  # the consumer gives a command up inside the freeze


@pytest.fixture
def own_redis(tmp_path) -> Iterator[OwnRedis]:
    with own_redis_server(tmp_path) as server:
        yield server


def test_an_ack_redis_does_not_answer_frees_its_place_and_is_made_once_redis_answers(own_redis):
    options = {"socket_timeout": SHORT_TIMEOUT_S, "socket_connect_timeout": SHORT_TIMEOUT_S}
    queue = Queue("owed-acks")
    with Connection(own_redis.url, transport=Transport, transport_options=options) as connection:
        with connection.Producer() as producer:
            for n in (1, 2):
                producer.publish({"n": n}, routing_key=queue.name, declare=[queue])
        channel = connection.channel()
        channel.basic_qos(0, 1, False)  # a window of one, as a worker of one process has
        received: list[Message] = []
        with Consumer(channel, [queue], on_message=received.append, accept=["json"]):
            connection.drain_events(timeout=5)
            (first,) = received
            assert not channel.qos.can_consume()  # the window is full until it is acked

            own_redis.freeze()
            try:
                # As the worker acknowledges (logging what the ack raises, as "Couldn't ack"),
                # given up after the socket timeout, inside the freeze.
                first.ack_log_error(log, connection.connection_errors)
            finally:
                own_redis.thaw()
            assert channel.qos.can_consume()  # its place is free all the same

            connection.drain_events(timeout=5)  # the next message is taken
            second = received[-1]
            assert second.payload == {"n": 2}
            second.ack()
            unacked = channel.qos.unacked_key
        # Both acknowledgements made: Redis will hand neither out again.
        assert own_redis.client.hlen(unacked) == 0


def test_a_connection_lost_with_tasks_in_the_window_is_put_away_and_late_acks_left_to_redis(
    own_redis,
):
    """After losing Redis, Celery collects the connection, closes it and connects anew. With a
    task in the window of a channel that also consumes a broadcast queue of its own (removed as
    the channel closes, which fails while Redis is away), kombu's second close raised
    AttributeError and the worker stopped for good ("Unrecoverable error", seen with Redis
    restarted under load); so did the ack of a task that ran across the reconnect."""
    options = {"socket_timeout": SHORT_TIMEOUT_S, "socket_connect_timeout": SHORT_TIMEOUT_S}
    queue = Queue("lost-connection")
    broadcast = Queue(
        "lost-connection.node", Exchange("broadcast", type="fanout"), auto_delete=True
    )
    with Connection(own_redis.url, transport=Transport, transport_options=options) as connection:
        errors = connection.connection_errors
        with connection.Producer() as producer:
            producer.publish({"n": 1}, routing_key=queue.name, declare=[queue])
        channel = connection.default_channel
        channel.basic_qos(0, 2, False)
        received: list[Message] = []
        Consumer(channel, [queue, broadcast], on_message=received.append, accept=["json"]).consume()
        connection.drain_events(timeout=5)
        (running,) = received
        with contextlib.suppress(TimeoutError):  # waiting for the next task (BRPOP sent)
            connection.drain_events(timeout=0.2)

        own_redis.stop()
        connection.collect()  # as Celery's consumer puts a lost connection away
        connection.close()
        running.ack_log_error(log, errors)  # the task ends while the worker reconnects
    assert channel.closed
