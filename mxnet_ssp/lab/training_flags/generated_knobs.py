"""The generated datasets' names, defaults and knobs (:mod:`mxnet_ssp.lab.generated` makes the data).

Standard library only: the training script's flags (this folder, which the launcher
imports before it starts any process) and the reproduce runner read them without NumPy.
"""

__all__ = ['GENERATED', 'TEACHER_DEFAULTS', 'TEACHER_KNOBS', 'load_options']

#: the datasets made here (no file to look for before a run)
GENERATED = ('teacher',)

#: the defaults of :func:`teacher_arrays` (and of ``--dataset teacher``)
TEACHER_DEFAULTS = dict(train_size=20000, test_size=10000, seed=0, dim=64, hidden=64,
                        classes=10, noise=0.0, scale=2.0)

#: the knobs of ``teacher`` that the training script and the reproduce runner take as flags:
#: (keyword of :func:`teacher_arrays`, flag); the flags' defaults are :data:`TEACHER_DEFAULTS`'
TEACHER_KNOBS = (('scale', '--teacher-scale'), ('noise', '--teacher-noise'))


def load_options(dataset, values):
    """The keyword arguments :func:`mxnet_ssp.lab.data.load` takes for `dataset`, from
    `values` ({knob: value or None}, e.g. ``{'scale': args.teacher_scale, ...}``): for
    ``teacher`` every knob of :data:`TEACHER_KNOBS`, a missing or None one at its default (what
    a run used, in full); {} for every other dataset, which has no knobs."""
    if dataset != 'teacher':
        return {}
    return {knob: float(TEACHER_DEFAULTS[knob] if values.get(knob) is None else values[knob])
            for knob, _ in TEACHER_KNOBS}
