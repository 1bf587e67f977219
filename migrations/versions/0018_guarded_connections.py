"""Guarded connections: operators' connections known as such, OAuth consents kept by the server

Revision ID: 0018
Revises: 0017

``calendar_connections.added_by_operator``: the connection was added by an operator (``flask
connections add``, provisioning), whose CalDAV servers may be on private addresses; every other
connection's requests are checked at each connection, redirects and changed DNS answers
included. Connections made before this revision count as a dashboard user's (checked), the
safe default: an operator whose CalDAV server is private adds it again from the command line,
or sets ``CALDAV_ALLOW_PRIVATE=1`` for a private deployment.

``oauth_consents``: a Google or Microsoft consent begun and not yet finished, by the digest of
its ``state``: the PKCE verifier (encrypted) and when the callback used it, so a callback is
finished once, and the verifier is never in the person's cookie.
"""

from alembic import op
import sqlalchemy as sa

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table("calendar_connections") as batch_op:
        batch_op.add_column(
            sa.Column("added_by_operator", sa.Boolean(), nullable=False, server_default=sa.false())
        )
    op.create_table(
        "oauth_consents",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("state_digest", sa.String(64), nullable=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column(
            "sub_account_id",
            sa.Integer(),
            sa.ForeignKey(
                "sub_accounts.id",
                name="fk_oauth_consents_sub_account_id_sub_accounts",
                ondelete="CASCADE",
            ),
            nullable=False,
        ),
        sa.Column(
            "user_id",
            sa.Integer(),
            sa.ForeignKey("users.id", name="fk_oauth_consents_user_id_users", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("encrypted_verifier", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("used_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_oauth_consents"),
        sa.UniqueConstraint("state_digest", name="uq_oauth_consents_state_digest"),
    )
    op.create_index("ix_oauth_consents_sub_account_id", "oauth_consents", ["sub_account_id"])
    op.create_index("ix_oauth_consents_user_id", "oauth_consents", ["user_id"])
    op.create_index("ix_oauth_consents_expires_at", "oauth_consents", ["expires_at"])


def downgrade():
    op.drop_table("oauth_consents")
    with op.batch_alter_table("calendar_connections") as batch_op:
        batch_op.drop_column("added_by_operator")
