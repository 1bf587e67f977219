"""Extension singletons, bound to an app in ``create_app``."""

from typing import TYPE_CHECKING

from flask_migrate import Migrate
from flask_sqlalchemy import SQLAlchemy
from flask_sqlalchemy.model import Model as FlaskModel
from sqlalchemy import MetaData
from sqlalchemy.orm import DeclarativeBase

from app.database import Session

# Stable constraint names, so Alembic migrations can name what they alter or drop.
NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


# Objects keep their loaded values after commit: views commit and then serialize what they
# just wrote, and every value a write sets is set in Python, so re-reading it is wasted work
# (about a quarter of a booking create). The session class lets read-only requests run in
# autocommit (``app.database.reads_only``).
db = SQLAlchemy(model_class=Base, session_options={"class_": Session, "expire_on_commit": False})
migrate = Migrate()

# The base class of the models: ``db.Model``. It is made at run time, so the type checker cannot
# take ``db.Model`` as a base class; here it is told what the class is (``Base``'s declarative
# mapping with Flask-SQLAlchemy's model mixin).
if TYPE_CHECKING:

    class Model(Base, FlaskModel):
        pass

else:
    Model = db.Model
