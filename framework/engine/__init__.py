"""Logic shared by live trading and backtests; imports no I/O library."""
