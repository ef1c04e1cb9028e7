"""The plots: test accuracy against wall time, in the style of the paper's Figures 3 and 4.

matplotlib is imported only when a plot is drawn.
"""
import dataclasses
import math
import os
import sys

from ...core.names import BOUNDED, PAPER
from .grid import UsageError
from .stats import curve_band


MATPLOTLIB_HINT = ("pip install 'matplotlib<3.9' 'numpy<1.24' (numpy 1.24 breaks MXNet 1.9.1), "
                   "or pass --no-plots")


def have_matplotlib():
    """Whether matplotlib can be imported (found without importing it)."""
    if 'matplotlib' in sys.modules:
        return sys.modules['matplotlib'] is not None
    import importlib.util
    return importlib.util.find_spec('matplotlib') is not None


def _pyplot():
    try:
        import matplotlib
    except ImportError:
        raise UsageError('the plots need matplotlib, which is not installed: '
                         + MATPLOTLIB_HINT) from None
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    return plt


def _style(arm, ssp_values):
    if arm.balance:
        return dict(_style(dataclasses.replace(arm, balance=False), ssp_values),
                    linestyle=':', linewidth=2.0)
    if arm.family == 'bsp':
        return {'color': 'black'}
    if arm.family == 'asp':
        return {'color': 'tab:orange' if arm.rule else 'tab:red'}
    if arm.family == 'dssp':
        color = {BOUNDED: 'tab:blue', PAPER: 'tab:purple'}.get(arm.mode, 'tab:cyan')
        return {'color': color, 'linewidth': 2.2,
                'linestyle': {BOUNDED: '-', PAPER: '--'}.get(arm.mode, '-.')}
    import matplotlib
    rank = ssp_values.index(arm.staleness[0])
    return {'color': matplotlib.colormaps['viridis'](rank / max(1, len(ssp_values) - 1) * 0.85),
            'linewidth': 1.0}


def _plot(path, title, series, targets):
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    for label, curve, style in series:
        if curve:
            ax.plot([t for t, _ in curve], [a for _, a in curve], label=label, **style)
    for target in targets:
        ax.axhline(target, color='grey', linewidth=0.6, linestyle=':')
    ax.set_xlabel('wall time (s)')
    ax.set_ylabel('test accuracy')
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    if any(curve for _, curve, _ in series):
        ax.legend(fontsize=8, loc='lower right')
    else:
        ax.text(0.5, 0.5, 'no finished run', ha='center', va='center', transform=ax.transAxes)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def make_plots(grid, out, rows, average):
    """Figures 3/4 in style: paradigms, each SSP vs DSSP, average SSP vs DSSP, all trials."""
    folder = os.path.join(out, 'plots')
    os.makedirs(folder, exist_ok=True)
    chosen = [r for r in rows if r['median']]
    ssp_values = sorted(r['arm'].staleness[0] for r in chosen if r['arm'].family == 'ssp')
    note = '%s, %d workers%s; median of %d trial(s)' % (
        grid.preset, grid.workers, ', slowdown ' + grid.slowdown if grid.slowdown else '',
        grid.trials)

    def series(filter_fn):
        return [(r['arm'].label, r['median']['curve'], _style(r['arm'], ssp_values))
                for r in chosen if filter_fn(r['arm'])]

    plots = []
    main = series(lambda a: a.family in ('bsp', 'asp', 'dssp')
                  or (a.family == 'ssp' and len(ssp_values) <= 3))
    if average and len(ssp_values) > 3:
        main.append((average[0], average[1], {'color': 'tab:green', 'linewidth': 1.8}))
    plots.append(('Paradigms', _plot(os.path.join(folder, 'paradigms.png'),
                                     'BSP, ASP, SSP and DSSP (%s)' % note, main, grid.targets)))
    if ssp_values:
        plots.append(('Each SSP threshold vs DSSP', _plot(
            os.path.join(folder, 'ssp_vs_dssp.png'), 'SSP thresholds vs DSSP (%s)' % note,
            series(lambda a: a.family in ('ssp', 'dssp')), grid.targets)))
    if average:
        plots.append(('Average SSP vs DSSP', _plot(
            os.path.join(folder, 'average_ssp_vs_dssp.png'),
            '%s vs DSSP (%s)' % (average[0], note),
            [(average[0], average[1], {'color': 'tab:green', 'linewidth': 1.8})]
            + series(lambda a: a.family == 'dssp'), grid.targets)))
    if grid.trials > 1:
        plots.append(('Trial bands', _plot_bands(os.path.join(folder, 'bands.png'), rows,
                                                 ssp_values, note, grid.targets)))
    plots.append(('All trials', _plot_trials(os.path.join(folder, 'trials.png'), rows, note,
                                             grid.targets)))
    return plots


def _panels(path, rows, cols, size, title, targets, draw):
    """One panel per row (its arm's label as title), drawn by ``draw(ax, row)``, with the
    targets as dotted lines; saved to `path`."""
    plt = _pyplot()
    cols = min(cols, max(1, len(rows)))
    nrows = max(1, int(math.ceil(len(rows) / float(cols))))
    fig, axes = plt.subplots(nrows, cols, figsize=(size[0] * cols, size[1] * nrows),
                             squeeze=False, sharex=True, sharey=True)
    for ax, row in zip(axes.flat, rows):
        draw(ax, row)
        for target in targets:
            ax.axhline(target, color='grey', linewidth=0.5, linestyle=':')
        ax.set_title(row['arm'].label, fontsize=9)
        ax.set_xlabel('wall time (s)', fontsize=8)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=6, loc='lower right')
    for ax in list(axes.flat)[len(rows):]:
        ax.axis('off')
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def _plot_trials(path, rows, note, targets):
    def draw(ax, row):
        for t in row['trials']:
            if t['status'] != 'ok':
                continue
            median = t is row['median']
            ax.plot([x for x, _ in t['curve']], [a for _, a in t['curve']],
                    color='tab:blue' if median else 'grey', linewidth=1.6 if median else 0.8,
                    label='trial %d%s' % (t['trial'], ' (median)' if median else ''))
    return _panels(path, [r for r in rows if r['ok']], 4, (3.2, 2.6),
                   'Every trial: test accuracy vs wall time (%s)' % note, targets, draw)


def _plot_bands(path, rows, ssp_values, note, targets):
    """Per paradigm, the median of its trials' curves with the band from the lowest to the
    highest trial (on a common time grid), one panel per paradigm beside BSP and ASP."""
    rows = [r for r in rows if r['ok']]
    reference = [r for r in rows if r['arm'].name in ('bsp', 'asp')]

    def draw(ax, row):
        for other in [r for r in reference if r is not row] + [row]:
            curves = [t['curve'] for t in other['trials'] if t['status'] == 'ok']
            times, median, low, high = curve_band(curves)
            style = _style(other['arm'], ssp_values)
            faint = other is not row
            ax.plot(times, median, color=style['color'], linewidth=0.8 if faint else 1.6,
                    alpha=0.5 if faint else 1.0, label=other['arm'].label)
            if not faint:
                ax.fill_between(times, low, high, color=style['color'], alpha=0.25)
    return _panels(path, rows, 3, (3.6, 2.7),
                   'Median of the trials and the band of all trials (%s)' % note, targets, draw)
