"""The edges for dry-run backtests: replay, paper venue, report."""
