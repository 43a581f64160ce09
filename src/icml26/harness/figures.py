"""Figure layout before a reproduction's figures are saved: no overlapping tick labels, no legend over data."""

from __future__ import annotations

import logging
import warnings
from typing import Any, Sequence

log = logging.getLogger(__name__)


def tidy_figure(fig: Any) -> None:
    """Lay a figure out before it is saved: ``tight_layout`` (unless it uses constrained layout); a legend that hides
    plotted data moves to the best free spot, or beside the axes when there is none; x tick labels that overlap
    are turned vertical; where tick labels still overlap only every k-th is shown."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            engine = fig.get_layout_engine()
            constrained = engine is not None and "Constrained" in type(engine).__name__
            relayout = (lambda: None) if constrained else fig.tight_layout
            relayout()
            renderer = fig.canvas.get_renderer()
            fig.draw_without_rendering()
            moved = False
            for ax in fig.axes:
                leg = ax.get_legend()
                if leg is None or not hasattr(leg, "set_loc") or not _legend_covers_data(ax, leg, renderer):
                    continue
                leg.set_loc("best")
                fig.draw_without_rendering()
                if _legend_covers_data(ax, leg, renderer):  # no free corner: put it beside the axes
                    leg.set_loc("upper left")
                    leg.set_bbox_to_anchor((1.02, 1.0), transform=ax.transAxes)
                moved = True
            if moved:
                relayout()
                fig.draw_without_rendering()
            rotated = False
            for ax in fig.axes:
                if _overlapping(ax.get_xticklabels(), renderer, "x"):
                    for t in ax.get_xticklabels():
                        t.set_rotation(90)
                        t.set_horizontalalignment("center")
                    rotated = True
            if rotated:
                relayout()
                fig.draw_without_rendering()
            for ax in fig.axes:
                for labels, axis in ((ax.get_xticklabels(), "x"), (ax.get_yticklabels(), "y")):
                    step = 2
                    while _overlapping(labels, renderer, axis) and step <= len(labels):
                        for i, t in enumerate(labels):
                            t.set_visible(i % step == 0)
                        step += 1
    except Exception as e:  # noqa: BLE001 - layout is cosmetic; never lose a figure over it
        log.debug("could not tidy figure: %s", e)


def _legend_covers_data(ax: Any, leg: Any, renderer: Any) -> bool:
    """Whether a legend inside the axes hides any plotted line or marker (vertices and points along segments)."""
    import numpy as np

    box = leg.get_window_extent(renderer)
    for line in ax.get_lines():
        xy = np.asarray(line.get_xydata(), dtype=float)
        if not line.get_visible() or len(xy) == 0:
            continue
        pts = line.get_transform().transform(xy)
        pts = pts[np.isfinite(pts).all(axis=1)]
        if len(pts) > 1:  # points along each segment, so a line that crosses the legend counts
            t = np.linspace(0.0, 1.0, 16)[:, None, None]
            pts = (pts[:-1][None] * (1 - t) + pts[1:][None] * t).reshape(-1, 2)
        inside = (pts[:, 0] > box.x0) & (pts[:, 0] < box.x1) & (pts[:, 1] > box.y0) & (pts[:, 1] < box.y1)
        if inside.any():
            return True
    for coll in ax.collections:
        try:
            offs = coll.get_offset_transform().transform(np.asarray(coll.get_offsets(), dtype=float))
        except Exception:  # noqa: BLE001
            continue
        if len(offs) and ((offs[:, 0] > box.x0) & (offs[:, 0] < box.x1) & (offs[:, 1] > box.y0) & (offs[:, 1] < box.y1)).any():
            return True
    return False


def _overlapping(labels: Sequence[Any], renderer: Any, axis: str) -> bool:
    """Whether any two visible, non-empty tick labels overlap along ``axis``."""
    boxes = [t.get_window_extent(renderer) for t in labels if t.get_visible() and t.get_text().strip()]
    if axis == "x":
        spans = sorted((b.x0, b.x1) for b in boxes)
    else:
        spans = sorted((b.y0, b.y1) for b in boxes)
    return any(a[1] > b[0] + 0.5 for a, b in zip(spans, spans[1:]))


__all__ = ["tidy_figure"]
