"""``perpframe incident export|replay``: the two commands of an incident, and their exits.

Exit codes: 0 exported, or the replay matched; 1 the replay diverged (the divergence is
printed); 2 a bundle refused, a bad argument or what an export cannot do (one line).
"""

from __future__ import annotations

import argparse
import sys

from framework.cli import program
from framework.venue.errors import FrameworkError

__all__ = ["incident_main"]


def incident_main(argv: list[str]) -> int:
    """``perpframe incident export ... | replay BUNDLE [--break-at N]``."""
    parser = argparse.ArgumentParser(
        prog=program("incident"),
        description="Bundle a live session's window, or replay a bundle and compare.",
    )
    sub = parser.add_subparsers(dest="what", required=True)
    export = sub.add_parser("export", help="bundle [--from, --to] of a node that recorded")
    export.add_argument("-c", "--config", required=True, metavar="FILE", help="YAML config")
    export.add_argument("--from", dest="from_", required=True, metavar="T1", help="epoch ms or ISO")
    export.add_argument("--to", required=True, metavar="T2", help="epoch ms or ISO-8601")
    export.add_argument("--out", required=True, metavar="BUNDLE", help="bundle.tar.gz")
    export.add_argument("--recording", metavar="PATH", help="default: the config's recording.path")
    export.add_argument("--journal", metavar="PATH", help="default: the config's journal.path")
    replay = sub.add_parser("replay", help="replay a bundle and compare with what live did")
    replay.add_argument("bundle", metavar="BUNDLE")
    replay.add_argument("--break-at", type=int, metavar="N", help="stop at event N in pdb")
    args = parser.parse_args(argv)
    name = program("incident")
    try:
        if args.what == "export":
            from framework.incident.export import export_bundle, parse_time

            info = export_bundle(
                args.config,
                parse_time(args.from_),
                parse_time(args.to),
                args.out,
                recording=args.recording,
                journal=args.journal,
            )
            session = info["session"]
            print(
                f"exported {args.out}: {session['lines']} recorded events from"
                f" {session['first_ms']} (warm-up) to {info['window']['to_ms']},"
                f" {info['intents']} intents, {len(info['strategies'])} strategy module(s)"
            )
            return 0
        from framework.incident.compare import render, replay_and_compare

        if args.break_at is not None and args.break_at < 1:
            parser.error("--break-at: expected an event number from 1")
        outcome, verdict = replay_and_compare(args.bundle, break_at=args.break_at)
        print(render(verdict, outcome))
        return 0 if verdict.divergence is None else 1
    except FrameworkError as exc:
        print(f"{name}: {exc}", file=sys.stderr)
        return 2
