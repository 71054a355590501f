"""The shadow: live trading with a paper venue beside it, compared order by order."""
