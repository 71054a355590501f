"""Example strategies, each a framework.Strategy subclass."""
