"""``python -m servemetrics``."""

from servemetrics.cli import main

main()
