"""``tag RUN +T -T2``, ``note RUN SEQ TEXT`` and ``notes RUN``: the analyst's annotations.

Tags label runs (``runs --tag T`` lists those carrying all the tags given); a note is the
analyst's remark on one step, shown under the step by ``show`` and in exports, found by
``search``. Neither is sent to the agent: ``steer`` is the message to the agent.

``show`` also prints under a model call the sources its answer cites (file, page or
character range, passage, the step that read it), resolved as the report resolves them.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from desktop_agent.cli.output import EXIT_OK, echo, open_client

if TYPE_CHECKING:
    from desktop_agent.cli.output import Out
    from desktop_agent.client.report import Reference
    from desktop_agent.domain import Step
    from desktop_agent.domain.tags import StepNote

AddParser = Callable[[str, str], argparse.ArgumentParser]
PASSAGE_CHARS = 160
"""Characters of a cited passage printed under its step (``--json`` has all of it)."""


def _signed_operands(parser: argparse.ArgumentParser, dest: str) -> None:
    """Let ``parser`` take operands that begin with ``-`` (``-draft``) into ``dest``.

    argparse reads ``-draft`` as an unknown option; they are what ``tag`` removes, so the
    parser's unknown arguments are appended to ``dest`` instead of refused.
    """
    parse = parser.parse_known_args

    def parse_known_args(
        args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        found, extra = parse(args, namespace)
        setattr(found, dest, [*getattr(found, dest, []), *extra])
        return found, []

    setattr(parser, "parse_known_args", parse_known_args)  # noqa: B010 (an instance's own)


def add_parsers(add: AddParser) -> None:
    """Add ``tag``, ``note`` and ``notes`` to the main parser (``add(name, help)``)."""
    p = add("tag", "add (+TAG or TAG) and remove (-TAG) a run's tags; none given: list them")
    p.add_argument("run")
    p.add_argument("changes", nargs="*", metavar="+TAG|-TAG")
    _signed_operands(p, "changes")
    p = add("note", "write your note on a step of a run (yours alone: never sent to the agent)")
    p.add_argument("run")
    p.add_argument("seq", type=int, metavar="SEQ", help="the step's number (see `show RUN`)")
    p.add_argument("text")
    p = add("notes", "your notes on a run's steps")
    p.add_argument("run")


def note_line(note: StepNote) -> str:
    """A note as ``show`` prints it under its step."""
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(note.created_at))
    text = " ".join(note.text.split())
    return f"        ✎ {when}  {text}"


def citation_line(ref: Reference) -> str:
    """A source a step's answer cites, as ``show`` prints it under the step."""
    name = ref.path or ref.title or "a document"
    where = f", {ref.where}" if ref.where else ""
    passage = " ".join(ref.passage.split())
    if len(passage) > PASSAGE_CHARS:
        passage = passage[: PASSAGE_CHARS - 1].rstrip() + "…"
    quoted = f": “{passage}”" if passage else ""
    read = f" (read at step {ref.source_seq})" if ref.source_seq is not None else ""
    return f"        ↳ [{ref.number}] {name}{where}{quoted}{read}"


def print_steps(steps: Sequence[Step], notes: Sequence[StepNote], *, full: bool) -> None:
    """``show``'s journal: a line per step; under it its sources, notes (``full``: JSON)."""
    from desktop_agent.cli.output import json_line, step_line
    from desktop_agent.client.annotations import notes_by_step
    from desktop_agent.client.report import step_references
    from desktop_agent.client.shapes import step_json
    from desktop_agent.domain import StepKind

    noted = notes_by_step(notes)
    for step in steps:
        echo(step_line(step))
        if step.kind == StepKind.MODEL_CALL:
            for ref in step_references(step.output, step.seq):
                echo(citation_line(ref))
        for note in noted.get(step.seq, ()):
            echo(note_line(note))
        if full:
            echo(json_line(step_json(step), indent=2))


def cmd_tag(args: argparse.Namespace, out: Out) -> int:
    """Change a run's tags, or list them."""
    from desktop_agent.client.annotations import change_tags, parse_changes

    client = open_client(args)
    add, remove = parse_changes(args.changes)
    done = change_tags(client, args.run, add, remove)
    data: dict[str, Any] = {
        "run": done.run_id,
        "tags": list(done.tags),
        "added": list(done.added),
        "removed": list(done.removed),
    }
    now = ", ".join(done.tags) if done.tags else "no tags"
    if not args.changes:
        out.emit(f"run {done.run_id}: {now}", data)
        return EXIT_OK
    moved = [*(f"+{t}" for t in done.added), *(f"-{t}" for t in done.removed)]
    said = " ".join(moved) if moved else "nothing changed"
    out.emit(f"run {done.run_id}: {said}; now {now}", data)
    return EXIT_OK


def cmd_note(args: argparse.Namespace, out: Out) -> int:
    """Write a note on a step."""
    from desktop_agent.client.annotations import add_note, note_json

    client = open_client(args)
    note = add_note(client, args.run, args.seq, args.text)
    out.emit(
        f"note {note.id} written on step {note.seq} of run {note.run_id} "
        "(yours: the agent never reads it)",
        note_json(note),
    )
    return EXIT_OK


def cmd_notes(args: argparse.Namespace, out: Out) -> int:
    """List the notes on a run's steps."""
    from desktop_agent.client.annotations import note_json, step_notes

    client = open_client(args)
    run = client.run(args.run)
    notes = step_notes(client, run.id)
    if out.as_json:
        out.emit("", [note_json(n) for n in notes])
        return EXIT_OK
    if not notes:
        echo(f"no notes on run {run.id}: `desktop-agent note {run.id} SEQ TEXT` writes one")
        return EXIT_OK
    for note in notes:
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(note.created_at))
        echo(f"[{note.seq:4}] {when}  {note.text}")
    return EXIT_OK


COMMANDS: dict[str, Callable[[argparse.Namespace, Out], int]] = {
    "tag": cmd_tag,
    "note": cmd_note,
    "notes": cmd_notes,
}
