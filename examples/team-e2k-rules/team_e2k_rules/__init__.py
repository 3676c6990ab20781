"""e2k rules for the team_ml helpers. Each rule lives in its own module of this package."""
