"""What the calendar tells others: the mail it sent or kept (with no SMTP server, the embedded
default, kept mail is only readable here and through ``flask outbox``), and the sub account's
webhook subscriptions with each one's delivery log. Adding, removing, enabling and re-sending
are the services the ``flask webhooks`` commands call, under the same rules (a webhook URL must
be safe to POST to: ``app.services.integrations.outbound.addresses``)."""

from __future__ import annotations

from flask import redirect, render_template, request, url_for
from flask_login import current_user
from flask_wtf import FlaskForm
from werkzeug.wrappers import Response
from wtforms import HiddenField, StringField, URLField
from wtforms.fields.choices import SelectChoice

from app.dashboard.changes import Page, press_button
from app.dashboard.forms import MultiCheckboxField, page_count, page_field
from app.dashboard.show_once import issue_ticket, save_secret_form, show_secret
from app.dashboard.views import dashboard
from app.models import SubAccount, WebhookSubscription
from app.models.limits import NAME_MAX, WEBHOOK_URL_MAX
from app.models.types import utcnow
from app.services.accounts.users import open_sub_account
from app.services.integrations.notifications.mail_log import get_mail, list_mail
from app.services.integrations.webhooks.deliveries import (
    delivery_log,
    enqueue_attempt,
    get_subscription_delivery,
    resend,
)
from app.services.integrations.webhooks.subscriptions import (
    EVENT_NAMES,
    add_subscription,
    enable_subscription,
    get_sub_account_subscription,
    list_subscriptions,
    remove_subscription,
)

PAGE_SIZE = 25
# A subscription's page shows its latest deliveries, this many at most (the page says so).
DELIVERIES_SHOWN = 50


class MailPageForm(FlaskForm):
    """The outbox's page number: a GET form, so no CSRF token (it changes nothing)."""

    class Meta:
        csrf = False

    page = page_field()


class NewWebhookForm(FlaskForm):
    # The subscription service checks every field (and the URL's safety); the form carries
    # what was typed.
    ticket = HiddenField()
    name = StringField("Name", render_kw={"maxlength": NAME_MAX, "autocomplete": "off"})
    url = URLField("URL", render_kw={"maxlength": WEBHOOK_URL_MAX, "placeholder": "https://"})
    events = MultiCheckboxField(
        "Events",
        choices=[SelectChoice("*", "All events"), *(SelectChoice(name) for name in EVENT_NAMES)],
        validate_choice=False,
    )


class WebhookActionForm(FlaskForm):
    """A button that changes a subscription or a delivery: only the CSRF token."""


@dashboard.route("/s/<int:sub_account_id>/notifications")
def notifications(sub_account_id: int) -> str:
    sub_account = open_sub_account(current_user, sub_account_id)
    form = NewWebhookForm()
    form.ticket.data = issue_ticket()
    return _page(sub_account, form)


def _page(sub_account: SubAccount, form: NewWebhookForm) -> str:
    """The outbox (``?page=N``; a page number that is no number shows the first) and the
    webhooks with the form for a new one."""
    paging = MailPageForm(request.args)
    page = (paging.page.data or 1) if paging.validate() else 1
    messages, total = list_mail(sub_account, limit=PAGE_SIZE, offset=(page - 1) * PAGE_SIZE)
    return render_template(
        "dashboard/notifications.html",
        sub_account=sub_account,
        messages=messages,
        total=total,
        page=page,
        pages=page_count(total, PAGE_SIZE),
        subscriptions=list_subscriptions(sub_account.id),
        form=form,
    )


@dashboard.route("/s/<int:sub_account_id>/notifications/mail/<int:message_id>")
def mail_message(sub_account_id: int, message_id: int) -> str:
    sub_account = open_sub_account(current_user, sub_account_id)
    message = get_mail(sub_account, message_id)
    return render_template("dashboard/mail_message.html", sub_account=sub_account, message=message)


@dashboard.route("/s/<int:sub_account_id>/notifications/webhooks", methods=["POST"])
def webhook_add(sub_account_id: int) -> Page:
    """A new subscription; its page answers the POST itself, so the signing secret is in that
    one answer and nowhere else."""
    sub_account = open_sub_account(current_user, sub_account_id)
    form = NewWebhookForm()
    events = form.events.data or []
    document = {"name": form.name.data, "url": form.url.data, "events": events, "secret": None}
    made, answer = save_secret_form(
        form,
        lambda: add_subscription(sub_account.id, document),
        lambda: _page(sub_account, form),
        {f"events[{i}]": "events" for i in range(len(events))},
        resent=(
            url_for("dashboard.notifications", sub_account_id=sub_account.id),
            "That form was already sent: its subscription is listed below.",
        ),
    )
    if answer is not None:
        return answer
    subscription, secret = made
    return show_secret(
        form.ticket.data,
        "dashboard/webhook_created.html",
        sub_account=sub_account,
        subscription=subscription,
        secret=secret,
    )


def _open(sub_account_id: int, subscription_id: int) -> tuple[SubAccount, WebhookSubscription]:
    """The sub account the user may open, and its subscription (another one's: 404)."""
    sub_account = open_sub_account(current_user, sub_account_id)
    return sub_account, get_sub_account_subscription(sub_account.id, subscription_id)


def _webhook_url(subscription: WebhookSubscription) -> str:
    """The subscription's page, where its buttons send the person back to."""
    return url_for(
        "dashboard.webhook",
        sub_account_id=subscription.sub_account_id,
        subscription_id=subscription.id,
    )


@dashboard.route("/s/<int:sub_account_id>/notifications/webhooks/<int:subscription_id>")
def webhook(sub_account_id: int, subscription_id: int) -> str:
    """A subscription and its latest deliveries, each with its attempts."""
    sub_account, subscription = _open(sub_account_id, subscription_id)
    return render_template(
        "dashboard/webhook.html",
        sub_account=sub_account,
        subscription=subscription,
        deliveries=delivery_log(subscription.id, limit=DELIVERIES_SHOWN),
        shown=DELIVERIES_SHOWN,
        action_form=WebhookActionForm(),
    )


@dashboard.route(
    "/s/<int:sub_account_id>/notifications/webhooks/<int:subscription_id>/enable",
    methods=["POST"],
)
def webhook_enable(sub_account_id: int, subscription_id: int) -> Response:
    _, subscription = _open(sub_account_id, subscription_id)
    press_button(
        WebhookActionForm(),
        lambda: enable_subscription(subscription.id),
        "Subscription enabled: new events are sent to it again.",
    )
    return redirect(_webhook_url(subscription))


@dashboard.route(
    "/s/<int:sub_account_id>/notifications/webhooks/<int:subscription_id>/remove",
    methods=["POST"],
)
def webhook_remove(sub_account_id: int, subscription_id: int) -> Response:
    sub_account, subscription = _open(sub_account_id, subscription_id)
    removed = press_button(
        WebhookActionForm(),
        lambda: remove_subscription(subscription.id),
        f"Subscription “{subscription.name}” removed, with its delivery log.",
    )
    if not removed:
        return redirect(_webhook_url(subscription))
    return redirect(url_for("dashboard.notifications", sub_account_id=sub_account.id))


@dashboard.route(
    "/s/<int:sub_account_id>/notifications/webhooks/<int:subscription_id>"
    "/deliveries/<int:delivery_id>/resend",
    methods=["POST"],
)
def webhook_resend(sub_account_id: int, subscription_id: int, delivery_id: int) -> Response:
    """Send a delivery again, with the same webhook-id, through the worker."""
    _, subscription = _open(sub_account_id, subscription_id)
    delivery = get_subscription_delivery(subscription.id, delivery_id)
    now = utcnow()
    sent_again = press_button(
        WebhookActionForm(),
        lambda: resend(delivery.id, now),
        f"Event evt_{delivery.event_id} will be sent again (the same webhook-id).",
    )
    if sent_again:
        enqueue_attempt(delivery.id, now)  # once committed: the worker reads what was stored
    return redirect(_webhook_url(subscription))
