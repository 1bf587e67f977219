"""The services' dependency rules are written once: the import contract in ``pyproject.toml``
is what docs/architecture.md says, word for word, so neither can change alone."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CONTRACT = "Services by what they serve: each area calls only the areas below it"


def said(layers: list[str]) -> str:
    """The layers as the architecture page says them."""
    parts = []
    for layer in layers:
        names = [f"`{name.strip()}`" for name in layer.split("|")]
        if len(names) == 1:
            parts.append(names[0])
        else:
            joined = ", ".join(names[:-1]) + f" and {names[-1]}"
            parts.append(f"{joined} (independent of one another)")
    return " over ".join(parts[:2]) + "".join(f", over {part}" for part in parts[2:])


def test_the_architecture_page_says_the_services_import_contract():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    (contract,) = [c for c in config["tool"]["importlinter"]["contracts"] if c["name"] == CONTRACT]
    page = " ".join((ROOT / "docs" / "architecture.md").read_text().split())
    assert said(contract["layers"]) in page


def test_the_layers_are_said_in_order():
    assert said(["a | b", "c", "d"]) == (
        "`a` and `b` (independent of one another) over `c`, over `d`"
    )
