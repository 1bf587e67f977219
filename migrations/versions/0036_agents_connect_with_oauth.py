"""Agents connect with OAuth 2.1: clients, authorization codes, tokens

Revision ID: 0036
Revises: 0035

- ``oauth_clients``: clients that registered themselves (RFC 7591); public, with exact
  redirect URIs.
- ``oauth_codes``: authorization codes (digests), each bound to its client, redirect URI, PKCE
  challenge and the grant the owner's consent made.
- ``oauth_tokens``: access and refresh tokens (digests) of a grant; refreshing spends the
  refresh token.
- ``api_keys.oauth_client_id``: a key made by an owner's consent to a client (a grant); its
  tokens act as the key. Every key so far is a plain API key (NULL).
"""

from alembic import op
import sqlalchemy as sa

revision = "0036"
down_revision = "0035"
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        "oauth_clients",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("client_id", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("redirect_uris", sa.JSON(), nullable=False),
        sa.Column("client_uri", sa.Text(), nullable=True),
        sa.Column("scope", sa.String(length=255), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_oauth_clients")),
        sa.UniqueConstraint("client_id", name=op.f("uq_oauth_clients_client_id")),
    )
    op.add_column("api_keys", sa.Column("oauth_client_id", sa.Integer(), nullable=True))
    op.create_foreign_key(
        op.f("fk_api_keys_oauth_client_id_oauth_clients"),
        "api_keys",
        "oauth_clients",
        ["oauth_client_id"],
        ["id"],
        ondelete="CASCADE",
    )
    op.create_index(op.f("ix_api_keys_oauth_client_id"), "api_keys", ["oauth_client_id"])
    op.create_table(
        "oauth_codes",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("digest", sa.String(length=64), nullable=False),
        sa.Column("client_id", sa.Integer(), nullable=False),
        sa.Column("grant_id", sa.Integer(), nullable=False),
        sa.Column("redirect_uri", sa.Text(), nullable=True),
        sa.Column("scope", sa.String(length=255), nullable=False),
        sa.Column("code_challenge", sa.String(length=128), nullable=False),
        sa.Column("code_challenge_method", sa.String(length=8), nullable=False),
        sa.Column("resource", sa.Text(), nullable=True),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("used_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["client_id"],
            ["oauth_clients.id"],
            name=op.f("fk_oauth_codes_client_id_oauth_clients"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["grant_id"],
            ["api_keys.id"],
            name=op.f("fk_oauth_codes_grant_id_api_keys"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_oauth_codes")),
        sa.UniqueConstraint("digest", name=op.f("uq_oauth_codes_digest")),
    )
    op.create_index(op.f("ix_oauth_codes_grant_id"), "oauth_codes", ["grant_id"])
    op.create_table(
        "oauth_tokens",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("client_id", sa.Integer(), nullable=False),
        sa.Column("grant_id", sa.Integer(), nullable=False),
        sa.Column("access_digest", sa.String(length=64), nullable=False),
        sa.Column("refresh_digest", sa.String(length=64), nullable=True),
        sa.Column("scope", sa.String(length=255), nullable=False),
        sa.Column("resource", sa.Text(), nullable=True),
        sa.Column("access_expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("refresh_expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("refreshed_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["client_id"],
            ["oauth_clients.id"],
            name=op.f("fk_oauth_tokens_client_id_oauth_clients"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["grant_id"],
            ["api_keys.id"],
            name=op.f("fk_oauth_tokens_grant_id_api_keys"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_oauth_tokens")),
        sa.UniqueConstraint("access_digest", name=op.f("uq_oauth_tokens_access_digest")),
        sa.UniqueConstraint("refresh_digest", name=op.f("uq_oauth_tokens_refresh_digest")),
    )
    op.create_index(op.f("ix_oauth_tokens_grant_id"), "oauth_tokens", ["grant_id"])


def downgrade():
    op.drop_index(op.f("ix_oauth_tokens_grant_id"), table_name="oauth_tokens")
    op.drop_table("oauth_tokens")
    op.drop_index(op.f("ix_oauth_codes_grant_id"), table_name="oauth_codes")
    op.drop_table("oauth_codes")
    op.drop_index(op.f("ix_api_keys_oauth_client_id"), table_name="api_keys")
    op.drop_constraint(
        op.f("fk_api_keys_oauth_client_id_oauth_clients"), "api_keys", type_="foreignkey"
    )
    op.drop_column("api_keys", "oauth_client_id")
    op.drop_table("oauth_clients")
