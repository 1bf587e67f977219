"""The fenced code blocks of the project's Markdown documents, as the tests of the documented
examples read them (docs/testing.md: a block marked ``sh`` is an example that runs; any other
language is shown, not run)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from tests.servers import ROOT

RUN = "sh"  # the fence language of the examples the tests run
FENCE = re.compile(r"^(?P<indent> *)(?P<fence>`{3,}|~{3,})(?P<info>[^`]*)$")
EXPECT = re.compile(r"<!--\s*expect:\s*(?P<status>\d{3})\s+(?P<code>[a-z_]+)\s*-->")


@dataclass(frozen=True)
class Block:
    document: str
    line: int
    language: str
    code: str
    expect: tuple[int, str] | None

    @property
    def where(self) -> str:
        return f"{self.document}:{self.line}"


def fenced_blocks(text: str, document: str) -> list[Block]:
    """Every fenced code block of a Markdown text, with the expectation written before it."""
    lines = text.splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        indent, fence = len(opening["indent"]), opening["fence"]
        closing = re.compile(rf"^ *{re.escape(fence[0])}{{{len(fence)},}}\s*$")
        body: list[str] = []
        j = i + 1
        while j < len(lines) and not closing.match(lines[j]):
            body.append(lines[j][indent:] if lines[j][:indent].strip() == "" else lines[j])
            j += 1
        before = next((line.strip() for line in reversed(lines[:i]) if line.strip()), "")
        expect = EXPECT.fullmatch(before)
        info = opening["info"].split()
        blocks.append(
            Block(
                document=document,
                line=i + 1,
                language=info[0] if info else "",
                code="\n".join(body) + "\n",
                expect=(int(expect["status"]), expect["code"]) if expect else None,
            )
        )
        i = j + 1
    return blocks


def examples(document: str) -> list[Block]:
    text = (ROOT / document).read_text(encoding="utf-8")
    return [block for block in fenced_blocks(text, document) if block.language == RUN]


def logical_lines(code: str) -> list[str]:
    """Shell lines with backslash-newline continuations joined."""
    return re.sub(r"\\\n\s*", " ", code).splitlines()


def normalized(code: str) -> str:
    """Shell code with continuations joined and runs of whitespace made one space."""
    return " ".join(" ".join(logical_lines(code)).split())
