"""Cross-play leaderboard: duplicate round robins between agents, stored in SQLite, rated with Bradley-Terry.

``schedule`` says which games to play, ``runner`` plays them (in worker processes if asked), ``store`` keeps
them, ``ratings`` fits strengths with bootstrap intervals, ``standings`` turns stored games into tables and
``report`` prints and writes them. Agents come in as specs only (``entrants``), never as trainer objects.
"""
