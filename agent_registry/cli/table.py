"""The plain text tables click commands print (``status``, ``lock list``, their
``--repos`` forms, ``repos list``): apart from cli/main.py so a feature module loaded
lazily by it can print one without importing it back (a circle: tests/test_layers.py).
Click-free: the fast path's `status` prints one (the colours are click.style's codes)."""
from __future__ import annotations

import sys


def render_table(headers: list[str], rows: list[list], max_width: int = 40,
                 color=None) -> str:
    """A plain text table; *color(column, cell)* names a colour for a cell (or None), used
    on a terminal only (console.color_on), the header then bold."""
    from .console import ANSI, color_on
    cells = [[str(c if c is not None else "")[:max_width] for c in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    paint = color if color is not None and color_on(sys.stdout) else None

    def line(r, style=None, plain=False):
        out = []
        for i, (c, w) in enumerate(zip(r, widths)):
            text = c.ljust(w) if i < len(r) - 1 else c
            name = None if plain else style or (paint(i, c) if paint else None)
            out.append(f"\033[{ANSI[name]}m{text}\033[0m" if name else text)
        return "  ".join(out).rstrip()
    return "\n".join([line(headers, "bold" if paint else None),
                      line(["-" * w for w in widths], plain=True)] + [line(r) for r in cells])


def status_color(column: int, cell: str) -> str | None:
    """A sessions table on a terminal (the status in column 4): a live session green, a
    zombie, a stopped or killed one red."""
    if column != 4:
        return None
    return {"OnWorking": "green", "zombie": "red", "Stop": "red", "Killed": "red"}.get(cell,
                                                                                    "yellow")
