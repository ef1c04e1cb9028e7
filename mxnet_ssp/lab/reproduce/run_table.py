"""One Markdown row per run folder, in the order the runs started: the table of a lab
archive's README (docs/lab_runs/*/README.md).

Each row: paradigm, setting (a tuning run's folder name; ``-`` for a trial), trial, status,
final accuracy, training seconds, the first and the sustained crossing of the target on the
run's evaluation curve (the servers' model where the run has it: :func:`collect.eval_curve`)
and the load average at the run's start and end.

Run: ``python -m mxnet_ssp.lab.reproduce.run_table [--target 0.92] RUN_DIR...``
(folders without ``run.json`` are named on stderr and left out); it changes nothing.
"""
import argparse
import os
import sys

from .collect import eval_curve
from .json_files import read_json
from .stats import sustained_time, time_to_target

__all__ = ['row', 'table', 'main']


def _seconds(x):
    return 'never' if x is None else '%.2f' % x


def _where(directory):
    """(paradigm, setting, trial number) from ``.../runs/ARM/tune/SETTING/trialK`` or
    ``.../runs/ARM/trialK``."""
    parts = os.path.normpath(directory).split(os.sep)
    trial = parts[-1].replace('trial', '')
    if len(parts) >= 4 and parts[-3] == 'tune':
        return parts[-4], parts[-2], trial
    return parts[-2], '-', trial


def row(directory, target):
    """(start time, the Markdown row) of the run in `directory`, or None without run.json."""
    marker = read_json(os.path.join(directory, 'run.json'))
    if not marker:
        return None
    summary = read_json(os.path.join(directory, 'summary.json')) or {}
    curve = eval_curve(directory)[0]
    acc, wall = summary.get('final_accuracy'), summary.get('wall_time_s')
    arm, setting, trial = _where(directory)
    cells = [arm, setting, trial, str(marker.get('status')),
             '-' if acc is None else '%.3f' % acc, '-' if wall is None else '%.1f' % wall,
             _seconds(time_to_target(curve, target) if curve else None),
             _seconds(sustained_time(curve, target) if curve else None),
             ' / '.join('%.1f' % v for v in marker.get('load_avg') or []) or '-']
    return marker.get('started', 0.0), '| %s |' % ' | '.join(cells)


def table(directories, target):
    """(the Markdown table, the folders left out for lack of run.json)."""
    head = ('| arm | setting | trial | status | final acc | training s | %g first (s) | '
            '%g sustained (s) | load avg start/end |' % (target, target))
    rows, missing = [], []
    for directory in directories:
        found = row(directory, target)
        if found is None:
            missing.append(directory)
        else:
            rows.append(found)
    lines = [head, '|---|---|---|---|---:|---:|---:|---:|---|']
    lines += [text for _, text in sorted(rows, key=lambda r: r[0])]
    return '\n'.join(lines), missing


def main(argv=None):
    parser = argparse.ArgumentParser(prog='python -m mxnet_ssp.lab.reproduce.run_table',
                                     description='A lab archive\'s per-run table.')
    parser.add_argument('--target', type=float, default=0.92,
                        help='the accuracy whose crossings are shown (default 0.92)')
    parser.add_argument('directories', nargs='+', metavar='RUN_DIR')
    args = parser.parse_args(argv)
    if not 0 < args.target <= 1:
        parser.error('--target %g: expected an accuracy in (0, 1]' % args.target)
    text, missing = table(args.directories, args.target)
    for directory in missing:
        print('%s: no run.json (unfinished or not a run folder), left out' % directory,
              file=sys.stderr)
    print(text)
    return 0


if __name__ == '__main__':
    sys.exit(main())
