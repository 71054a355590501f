#!/usr/bin/env python3
"""Command line of the framework, the same as the ``perpframe`` command (framework/cli.py)."""

from __future__ import annotations

import sys

from framework.cli import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:], prog="python run.py"))
