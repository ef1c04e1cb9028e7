"""The generated datasets' names, defaults and knobs (:mod:`mxnet_ssp.lab.generated` makes the data).

Standard library only: the training script's flags (this folder, which the launcher
imports before it starts any process) and the reproduce runner read them without NumPy.
"""

__all__ = ['GENERATED', 'TEACHER_DEFAULTS', 'TEACHER_KNOBS', 'KNOB_TYPES', 'knob_value',
           'load_options']

#: the datasets made here (no file to look for before a run)
GENERATED = ('teacher',)

#: the defaults of :func:`teacher_arrays` (and of ``--dataset teacher``)
TEACHER_DEFAULTS = dict(train_size=20000, test_size=10000, seed=0, dim=64, hidden=64,
                        classes=10, noise=0.0, scale=2.0)

#: the knobs of ``teacher`` that the training script and the reproduce runner take as flags:
#: (keyword of :func:`teacher_arrays`, flag); the flags' defaults are :data:`TEACHER_DEFAULTS`'
TEACHER_KNOBS = (('scale', '--teacher-scale'), ('noise', '--teacher-noise'),
                 ('dim', '--teacher-dim'), ('hidden', '--teacher-hidden'),
                 ('train_size', '--teacher-train-size'))

#: the type of each knob of :data:`TEACHER_KNOBS`: the sizes are integers (an array shape),
#: the others numbers
KNOB_TYPES = {'scale': float, 'noise': float, 'dim': int, 'hidden': int, 'train_size': int}


def knob_value(knob, value):
    """`value` of `knob` as its type (:data:`KNOB_TYPES`): ``float`` for a number, ``int``
    for a size (16.0 -> 16; ValueError for a size that is not a whole number, such as 16.5,
    or not a number at all)."""
    if KNOB_TYPES[knob] is float:
        return float(value)
    try:
        whole = int(value)          # a str: integer text only ('16', not '16.0')
    except (TypeError, ValueError, OverflowError):
        whole = None
    if isinstance(value, bool) or whole is None or (not isinstance(value, str)
                                                    and whole != value):
        raise ValueError('%s must be an integer, got %r' % (knob, value))
    return whole


def load_options(dataset, values):
    """The keyword arguments :func:`mxnet_ssp.lab.data.load` takes for `dataset`, from
    `values` ({knob: value or None}, e.g. ``{'scale': args.teacher_scale, ...}``): for
    ``teacher`` every knob of :data:`TEACHER_KNOBS`, a missing or None one at its default (what
    a run used, in full), each as its type (:func:`knob_value`: int for ``dim``, ``hidden``
    and ``train_size``, float for ``scale`` and ``noise``); {} for every other dataset, which
    has no knobs."""
    if dataset != 'teacher':
        return {}
    return {knob: knob_value(knob, TEACHER_DEFAULTS[knob] if values.get(knob) is None
                             else values[knob])
            for knob, _ in TEACHER_KNOBS}
