"""Figures are laid out before saving (no overlapping tick labels) and records carry their provenance."""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from icml26.harness.figures import _overlapping, tidy_figure  # noqa: E402
from icml26.harness.provenance import run_env as _env  # noqa: E402


def test_crowded_tick_labels_no_longer_overlap():
    fig, axes = plt.subplots(1, 2, figsize=(4, 2))
    names = [f"configuration-{i}" for i in range(30)]
    axes[0].bar(names, range(30))
    axes[1].plot(range(30), range(30))
    axes[1].set_yticks(range(0, 30, 1))
    r = fig.canvas.get_renderer()
    assert _overlapping(axes[0].get_xticklabels(), r, "x")  # the test would not mean anything otherwise
    tidy_figure(fig)
    r = fig.canvas.get_renderer()
    for ax in axes:
        assert not _overlapping(ax.get_xticklabels(), r, "x")
        assert not _overlapping(ax.get_yticklabels(), r, "y")
    plt.close(fig)


def test_readable_figure_is_left_alone():
    fig, ax = plt.subplots(figsize=(6, 3))
    ax.plot([0, 1, 2], [1, 0, 1])
    tidy_figure(fig)
    assert all(t.get_rotation() == 0 and t.get_visible() for t in ax.get_xticklabels())
    plt.close(fig)


def test_env_has_provenance():
    env = _env()
    for key in ("icml26", "python", "torch", "numpy", "machine", "cpus", "os", "device", "git", "command", "versions"):
        assert key in env
    assert env["device"] == "cpu" or env["device"].startswith("cuda")
    assert env["command"] is None or "/" not in env["command"].split()[0]  # program name, not its folder


def test_legend_over_data_is_moved_off_it():
    import numpy as np

    from icml26.harness.figures import _legend_covers_data

    fig, ax = plt.subplots(figsize=(4, 3))
    x = np.linspace(0, 1, 50)
    for k in range(4):  # lines everywhere: no free corner inside the axes
        ax.plot(x, np.full_like(x, k / 3), label=f"level {k}")
        ax.plot(np.full_like(x, k / 3), x)
    ax.legend(loc="center")
    r = fig.canvas.get_renderer()
    fig.draw_without_rendering()
    assert _legend_covers_data(ax, ax.get_legend(), r)
    tidy_figure(fig)
    fig.draw_without_rendering()
    assert not _legend_covers_data(ax, ax.get_legend(), fig.canvas.get_renderer())
    plt.close(fig)
