"""Public APIs only (issue 39, item 5): no code of the service uses a library's private name
(one starting with an underscore) outside the modules pinned for it, ``PINNED`` below, each
with its reason; ``tests/conventions/test_library_internals.py`` fails when the pinned library changes
what such a module relies on. docs/performance.md, "Library internals: kept and removed", has
the list and the reasons.

The check reads ``app/``, ``worker/`` and ``run_procfile.py`` with ``ast`` and finds:

* an import of a library's private module or name (``from lib._mod import x``,
  ``from lib import _x``);
* a private attribute read or written on anything but ``self`` or ``cls`` (``obj._x``,
  ``getattr(obj, "_x")``), unless the object is a module or name of the app's own;
* in a class extending a library's class, a private name the class defines, overrides or
  reads (``def _new_conn``, ``self._processes``) that the library's classes in its MRO define
  or mention (the class is imported to see its MRO); in a class whose base cannot be resolved
  (a class made in a function), every private name;
* ``super()._x`` where no library class can be seen to own ``_x`` (a mixin's ``super()`` is
  whatever it is mixed into);
* a private key of the Flask session (``session["_user_id"]``, ``"_user_id" in session``,
  ``session.get("_fresh")``): Flask's and its extensions' own entries.

A library's documented extension points that happen to start with an underscore are allowed
everywhere (``DOCUMENTED``). A private name of the app's own (``self._lock``) is no finding.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
import types
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from tests.conventions.test_library_internals import VERIFIED

ROOT = Path(__file__).resolve().parents[2]
OWN = {"app", "worker", "run_procfile", "tests"}

# The modules allowed to use a library's private names: path -> {name: (library, reason)}. The
# library is the distribution pinned in requirements.txt and verified in
# tests/conventions/test_library_internals.py.
PINNED: dict[str, dict[str, tuple[str, str]]] = {
    "app/database.py": {
        "_timeout": (
            "SQLAlchemy",
            "DeadlinePool overrides QueuePool._timeout, the wait _do_get makes for a free"
            " connection: bounded by the request's time left (no public hook per checkout)",
        ),
        "_WaitTimeout": (
            "psycopg",
            "DeadlineConnection catches psycopg's errors._WaitTimeout, raised by"
            " Connection.wait past its timeout (no public client-side deadline for an answer)",
        ),
        "_autocommit_variant": (
            "SQLAlchemy",
            "not SQLAlchemy's: an attribute of the app's own kept on SQLAlchemy's Engine (the"
            " reads-only sessions' autocommit engine), so that it lives and goes with it",
        ),
    },
    "app/services/integrations/outbound/transport.py": {
        "_new_conn": (
            "urllib3",
            "the connections of webhooks and calendar feeds show their TCP socket to the"
            " exchange's deadline as urllib3's HTTPConnection._new_conn makes it, before the"
            " TLS handshake (no public hook between the socket and the handshake)",
        ),
    },
    "run_procfile.py": {
        "_procmgr": (
            "honcho",
            "make run stops each program with one SIGTERM to it alone, not to its whole group"
            " (honcho's Manager takes no process manager of its own)",
        ),
        "_processes": (
            "honcho",
            "make run's exit status says whether every process ended with status 0 (honcho's"
            " Manager keeps the statuses only there)",
        ),
    },
}

# Documented extension points whose names start with an underscore: (library, name) -> where.
DOCUMENTED: dict[tuple[str, str], str] = {
    ("marshmallow", "_serialize"): "marshmallow, 'Custom fields': override Field._serialize",
    ("marshmallow", "_deserialize"): "marshmallow, 'Custom fields': override Field._deserialize",
    ("flask", "_get_current_object"): (
        "Flask, 'Notes On Proxies': a proxy's object is current_app._get_current_object()"
    ),
}

SESSION_METHODS = {"get", "pop", "setdefault"}
NAME_FUNCTIONS = {"getattr", "setattr", "hasattr", "delattr"}


@dataclass(frozen=True)
class Finding:
    path: str
    line: int
    name: str
    library: str | None  # the library's top-level package, when known
    what: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.what} {self.name} ({self.library or 'a library'})"


def is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def library_of(origin: str) -> str | None:
    top = origin.split(".")[0]
    return None if top in OWN else top


@cache
def source_of(klass: type) -> str:
    try:
        return inspect.getsource(klass)
    except (OSError, TypeError):
        return ""


def is_own_mixin(klass: type) -> bool:
    """A class of the app's own extending no library's class (its methods' ``super()`` is
    whatever it is mixed into)."""
    return all(k is object or not library_of(k.__module__) for k in klass.__mro__)


def library_owner(mro: tuple[type, ...], name: str) -> str | None:
    """The library whose class in ``mro`` defines or mentions ``name``, if one does."""
    libraries = [k for k in mro if library_of(k.__module__) and k.__module__ != "builtins"]
    for klass in libraries:
        if name in vars(klass):
            return library_of(klass.__module__)
    for klass in libraries:
        if re.search(rf"\b{re.escape(name)}\b", source_of(klass)):
            return library_of(klass.__module__)
    return None


class Scan:
    """The findings of one module (``namespace``: the module itself, to see its classes)."""

    def __init__(self, path: str, tree: ast.Module, namespace: dict[str, Any] | None) -> None:
        self.path = path
        self.tree = tree
        self.namespace = namespace
        self.origins: dict[str, str] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    bound = alias.asname or alias.name.split(".")[0]
                    self.origins[bound] = alias.name if alias.asname else bound
            elif isinstance(node, ast.ImportFrom):
                module = "app" if node.level else (node.module or "")
                for alias in node.names:
                    self.origins[alias.asname or alias.name] = f"{module}.{alias.name}"
        self.findings: list[Finding] = []

    def add(self, node: ast.AST, name: str, library: str | None, what: str) -> None:
        self.findings.append(Finding(self.path, getattr(node, "lineno", 0), name, library, what))

    def run(self) -> list[Finding]:
        self.visit(self.tree, None)
        return self.findings

    def receiver_library(self, value: ast.expr) -> tuple[bool, str | None]:
        """(whether ``value`` is the app's own module or name, its library if imported)."""
        if isinstance(value, ast.Name) and value.id in self.origins:
            library = library_of(self.origins[value.id])
            return library is None, library
        return False, None

    def visit(self, node: ast.AST, cls: tuple[ast.ClassDef, tuple[type, ...] | None] | None):
        if isinstance(node, ast.ClassDef):
            cls = (node, self.mro(node))
            self.check_class(node, cls[1])
        self.check_node(node, cls)
        for child in ast.iter_child_nodes(node):
            self.visit(child, cls)

    def mro(self, node: ast.ClassDef) -> tuple[type, ...] | None:
        """The class's MRO when it can be seen (a top-level class of the module); ``()`` for a
        class with no base; ``None`` when its bases cannot be resolved."""
        if not node.bases:
            return ()
        klass = (self.namespace or {}).get(node.name)
        if isinstance(klass, type) and node in self.tree.body:
            return klass.__mro__[1:]
        return None

    def check_class(self, node: ast.ClassDef, mro: tuple[type, ...] | None) -> None:
        if mro == ():
            return
        names: dict[str, ast.AST] = {}
        for statement in node.body:
            if isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef):
                names.setdefault(statement.name, statement)
            targets = (
                statement.targets
                if isinstance(statement, ast.Assign)
                else [statement.target]
                if isinstance(statement, ast.AnnAssign)
                else []
            )
            for target in targets:
                if isinstance(target, ast.Name):
                    names.setdefault(target.id, target)
        for inner in own_nodes(node):
            if (
                isinstance(inner, ast.Attribute)
                and isinstance(inner.value, ast.Name)
                and inner.value.id in ("self", "cls")
            ):
                names.setdefault(inner.attr, inner)
        if mro is not None:  # and the methods of its mixins of the app's own (``_new_conn``)
            for mixin in mro:
                if is_own_mixin(mixin):
                    for name, value in vars(mixin).items():
                        if inspect.isfunction(value):
                            names.setdefault(name, node)
        for name, where in names.items():
            if not is_private(name) or name.startswith("__"):
                continue
            if mro is None:
                self.add(where, name, None, "a class with an unknown base uses")
            elif owner := library_owner(mro, name):
                self.add(where, name, owner, "a subclass of a library's class uses")

    def check_node(
        self, node: ast.AST, cls: tuple[ast.ClassDef, tuple[type, ...] | None] | None
    ) -> None:
        if isinstance(node, ast.Import):
            for alias in node.names:
                library = library_of(alias.name)
                for part in alias.name.split("."):
                    if library and is_private(part):
                        self.add(node, part, library, "imports the private module")
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            library = library_of(node.module)
            if library:
                for part in node.module.split("."):
                    if is_private(part):
                        self.add(node, part, library, "imports from the private module")
                for alias in node.names:
                    if is_private(alias.name):
                        self.add(node, alias.name, library, "imports the private name")
        elif isinstance(node, ast.Attribute) and is_private(node.attr):
            self.check_attribute(node, node.value, node.attr, cls)
        elif isinstance(node, ast.Call):
            function = node.func
            if (
                isinstance(function, ast.Name)
                and function.id in NAME_FUNCTIONS
                and len(node.args) >= 2
                and isinstance(node.args[1], ast.Constant)
                and isinstance(node.args[1].value, str)
                and is_private(node.args[1].value)
            ):
                self.check_attribute(node, node.args[0], node.args[1].value, cls)
            if (
                isinstance(function, ast.Attribute)
                and function.attr in SESSION_METHODS
                and self.is_session(function.value)
                and node.args
            ):
                self.check_session_key(node, node.args[0])
        elif isinstance(node, ast.Subscript) and self.is_session(node.value):
            self.check_session_key(node, node.slice)
        elif (
            isinstance(node, ast.Compare)
            and any(isinstance(op, ast.In | ast.NotIn) for op in node.ops)
            and any(self.is_session(c) for c in node.comparators)
        ):
            self.check_session_key(node, node.left)

    def check_attribute(
        self,
        node: ast.AST,
        value: ast.expr,
        name: str,
        cls: tuple[ast.ClassDef, tuple[type, ...] | None] | None,
    ) -> None:
        if isinstance(value, ast.Name) and value.id in ("self", "cls"):
            return  # the class's own names: check_class
        if (
            isinstance(value, ast.Call)
            and isinstance(value.func, ast.Name)
            and value.func.id == "super"
        ):
            mro = cls[1] if cls else None
            owner = library_owner(mro, name) if mro else None
            if owner or not mro:  # a mixin's or an unknown class's super(): whose it is unknown
                self.add(node, name, owner, "super() reaches")
            return
        own, library = self.receiver_library(value)
        if not own and (library, name) not in DOCUMENTED:
            self.add(node, name, library, "reaches the private attribute")

    def is_session(self, value: ast.expr) -> bool:
        return isinstance(value, ast.Name) and (
            value.id == "session" or self.origins.get(value.id) == "flask.session"
        )

    def check_session_key(self, node: ast.AST, key: ast.expr) -> None:
        if isinstance(key, ast.Constant) and isinstance(key.value, str) and is_private(key.value):
            self.add(node, key.value, "flask", "uses the private session key")


def own_nodes(node: ast.AST) -> Iterator[ast.AST]:
    """The nodes under a class, not those of the classes nested in it."""
    for child in ast.iter_child_nodes(node):
        if not isinstance(child, ast.ClassDef):
            yield child
            yield from own_nodes(child)


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def scanned() -> list[Path]:
    files = sorted(p for d in ("app", "worker") for p in (ROOT / d).rglob("*.py"))
    return [*files, ROOT / "run_procfile.py"]


def scan(path: Path) -> list[Finding]:
    tree = ast.parse(path.read_text(), filename=str(path))
    has_subclasses = any(isinstance(n, ast.ClassDef) and n.bases for n in tree.body)
    namespace = vars(importlib.import_module(module_name(path))) if has_subclasses else None
    return Scan(path.relative_to(ROOT).as_posix(), tree, namespace).run()


@cache
def all_findings() -> tuple[Finding, ...]:
    return tuple(finding for path in scanned() for finding in scan(path))


def allowed(finding: Finding) -> bool:
    return (
        finding.name in PINNED.get(finding.path, {})
        or (finding.library, finding.name) in DOCUMENTED
    )


def test_no_library_private_name_is_used_outside_the_pinned_modules():
    found = [str(f) for f in all_findings() if not allowed(f)]
    assert not found, (
        "a library's private name, outside the modules pinned for it: use its public API, or"
        " move the use into the library's one pinned module (PINNED here, its pin in"
        " tests/conventions/test_library_internals.py, its reason in docs/performance.md):\n"
        + "\n".join(found)
    )


@pytest.mark.parametrize("path", list(PINNED))
def test_every_pinned_name_is_still_used_where_it_is_pinned(path):
    used = {f.name for f in all_findings() if f.path == path}
    stale = set(PINNED[path]) - used
    assert not stale, f"{path} no longer uses {sorted(stale)}: drop them from PINNED (and docs)"


def test_every_pinned_library_is_verified():
    libraries = {library for names in PINNED.values() for library, _ in names.values()}
    assert libraries <= set(VERIFIED), libraries - set(VERIFIED)


SAMPLE = """
import urllib3.connection
from urllib3._collections import HTTPHeaderDict
from flask import session


class Connection(urllib3.connection.HTTPConnection):
    def _new_conn(self):
        self._mine = True
        return super()._new_conn()

    def _own_helper(self):
        return self._mine


class Mixin:
    def _make(self):
        return super()._make()


def peek(pool):
    return pool._pool, getattr(pool, "_lock")


def signed_in():
    return "_user_id" in session or session.get("_fresh") or session["_permanent"]


def own(value):
    return value
"""


def test_the_check_finds_each_kind_of_use():
    """Proof that the check fails when a private name appears: one of each kind, and no
    finding for the sample's own private names (``_own_helper``, ``_mine``)."""
    namespace: dict[str, Any] = {"__name__": "app.public_apis_sample"}
    exec(compile(SAMPLE, "sample.py", "exec"), namespace)
    findings = Scan("sample.py", ast.parse(SAMPLE), namespace).run()
    assert sorted((f.name, f.library, f.line) for f in findings) == [
        ("_collections", "urllib3", 3),
        ("_fresh", "flask", 26),
        ("_lock", None, 22),
        ("_make", None, 18),
        ("_new_conn", "urllib3", 8),
        ("_new_conn", "urllib3", 10),
        ("_permanent", "flask", 26),
        ("_pool", None, 22),
        ("_user_id", "flask", 26),
    ]
    assert not any(allowed(f) for f in findings)


def test_a_private_name_added_to_an_app_module_is_found():
    """The same check over a copy of a real module with one private use added."""
    original = ROOT / "app" / "representations.py"
    source = original.read_text() + "\n\ndef peek(schema):\n    return schema._declared_fields\n"
    tree = ast.parse(source)
    module = types.ModuleType("app.representations_copy")
    module.__dict__.update(vars(importlib.import_module("app.representations")))
    findings = Scan("app/representations.py", tree, vars(module)).run()
    assert [f.name for f in findings if not allowed(f)] == ["_declared_fields"]
