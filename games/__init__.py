"""The rules: OpenSpiel games and our own Python games (imported here so that they register)."""

from games import holdem  # noqa: F401  registers simplified_holdem
