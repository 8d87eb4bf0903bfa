"""``spiral-arena web``: a local page to play any game against any agent, watch two agents play, and
follow the leaderboard as games are stored (``app``: the server and its API; ``matches``: a game in the
browser, played and stored as the leaderboard plays and stores its own; ``static/``: the page)."""

from leaderboard.web.app import create_app, web

__all__ = ["create_app", "web"]
