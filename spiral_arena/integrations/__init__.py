"""Other trainers' entry points: verifiers (v1) / prime-rl, TRL, and a single-seat text env with an
OpenEnv-compatible server (GEM, SkyRL-gym). Each module imports its library itself, so importing
``spiral_arena`` never needs them; the extras ``integrations-verifiers``, ``integrations-trl`` and
``integrations-openenv`` install them."""
