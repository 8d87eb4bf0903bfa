"""The rules behind ratings and costs that the command line shows in its help: importable without
scipy, since the CLI's parser is built before any optional package is known to be there."""

from __future__ import annotations

ANCHOR = "random"  # the entrant spec rated 1000 in every scope it plays in (without options)
MIN_GAMES = 100  # fewer games in a scope make an agent's rating there provisional
MAX_INTERVAL = 200.0  # so does a wider interval, in Elo points (about +-100 around the rating)
WEIGHTINGS = ("games", "equal")  # the overall fit: every game once, or every game id with the same weight
DEFAULT_WEIGHTING = "games"  # keeps one game = one observation, so the intervals mean what they say

PRICE_FORM = "MODEL=IN/OUT"
PRICE_EXAMPLE = "--price gpt-4o=2.5/10"
RATING_PER_CENT = (
    "(rating - 1000) / (100 x cost per game): rating points above the table's 1000 (the random anchor, or the "
    "mean) per US cent one game costs"
)
