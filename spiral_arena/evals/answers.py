"""How answers are written, for the loaders and the graders alike: the option letters of multiple-choice
items and the contents of ``\\boxed{...}`` answers."""

from __future__ import annotations

import re

LETTERS = "ABCDEFGHIJ"
_BOX_START = re.compile(r"\\(?:boxed|fbox)\s*\{")


def boxed_contents(text: str) -> list[str]:
    """The contents of every ``\\boxed{...}`` / ``\\fbox{...}`` in order, braces matched; unclosed ones are skipped."""
    found = []
    position = 0
    while match := _BOX_START.search(text, position):
        depth, start = 1, match.end()
        index = start
        while index < len(text) and depth:
            if text[index] == "\\" and index + 1 < len(text):  # an escaped brace does not count
                index += 2
                continue
            depth += {"{": 1, "}": -1}.get(text[index], 0)
            index += 1
        if depth:
            break
        found.append(text[start : index - 1])
        position = index
    return found
