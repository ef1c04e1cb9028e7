"""The paradigms a lab grid, the demo and the advisor compare: one :class:`Arm` per name.

An arm's name is also the directory of its runs (``runs/<arm>/trial<k>``), so the
emulated-cluster lab (:mod:`mxnet_ssp.lab.reproduce`), the demo and
``mxnet-ssp-advise --check-lab`` read the same names with the same parser
(:func:`parse_arm`), and :func:`sim_policy` gives the simulator's policy of an arm
(:func:`mxnet_ssp.lab.cluster_model.simulate.simulate`).

Plain data: nothing here reads a file or starts a process.
"""
import dataclasses
import re
from dataclasses import dataclass

from ...core.names import BOUNDED, DSSP_MODES, DSSP_STALENESS

__all__ = ['ARM_FORMS', 'SSP_RE', 'DSSP_RE', 'Arm', 'parse_arm', 'sim_policy']

ARM_FORMS = ('bsp, asp, asp-lrtau (ASP with lr / staleness), ssp<S> (e.g. ssp3), '
             'dssp[<SL>-<SU>][-paper|-threshold] (e.g. dssp = [%d, %d] bounded, dssp-paper, '
             'dssp-threshold, dssp2-10), any of them + -balance (batch balancing, e.g. '
             'bsp-balance), or ssp for every SSP threshold of the preset' % DSSP_STALENESS)
SSP_RE = re.compile(r'^ssp(\d+)$')
DSSP_RE = re.compile(r'^dssp(?:(\d+)-(\d+))?(?:-(%s))?$' % '|'.join(DSSP_MODES))
@dataclass(frozen=True)
class Arm:
    """One paradigm with its settings: a row of the report.

    Attributes
    ----------
    name : str
        Canonical name, also the run directory: ``bsp``, ``asp``, ``ssp3``,
        ``dssp`` ([3, 15] bounded), ``dssp-paper``, ``dssp-threshold``, ``dssp2-10``, ...
    family : str
        ``bsp``, ``asp``, ``ssp`` or ``dssp``.
    kvstore : str
        train_cifar.py's ``--kvstore``.
    staleness : tuple of int
        ``(s,)`` for SSP, ``(sL, sU)`` for DSSP, ``()`` otherwise.
    mode : str or None
        DSSP mode, ``bounded``, ``paper`` or ``threshold``.
    rule : str or None
        ``lrtau``: the servers divide the learning rate by each gradient's
        staleness (``--optimizer sasgd``); None: plain SGD.
    balance : bool
        Batch balancing (``--balance``, docs/balance.md): names end in ``-balance``.
    """
    name: str
    family: str
    kvstore: str
    staleness: tuple = ()
    mode: str = None
    rule: str = None
    balance: bool = False

    @property
    def label(self):
        """The name in tables and legends: ``SSP s=3``, ``DSSP [3,15] paper``, ..."""
        if self.balance:
            return dataclasses.replace(self, balance=False).label + ' + balance'
        if self.family == 'ssp':
            return 'SSP s=%d' % self.staleness[0]
        if self.family == 'dssp':
            suffix = '' if self.mode == BOUNDED else ' ' + self.mode
            return 'DSSP [%d,%d]%s' % (self.staleness + (suffix,))
        return self.family.upper() + (' lr/tau' if self.rule == 'lrtau' else '')

    def train_flags(self, bsp_average=True):
        """train_cifar.py flags that select this arm's store and settings.

        BSP applies the mean of the workers' gradients (``--sync-average``),
        as MXNet's Module did in the paper's runs, unless `bsp_average` is
        False (gluon.Trainer's sum, as the demo runs it).
        """
        flags = ['--kvstore', self.kvstore]
        if self.family == 'bsp' and bsp_average:
            flags.append('--sync-average')
        elif self.family == 'ssp':
            flags += ['--staleness', str(self.staleness[0])]
        elif self.family == 'dssp':
            flags += ['--staleness', '%d,%d' % self.staleness, '--dssp-mode', self.mode]
        if self.rule == 'lrtau':
            flags += ['--optimizer', 'sasgd', '--staleness-lr', 'inverse']
        if self.balance:
            flags.append('--balance')
        return flags


def parse_arm(name):
    """The :class:`Arm` called `name` (see :data:`ARM_FORMS`).

    Raises
    ------
    ValueError
        `name` is not one of the accepted forms, or its thresholds are inconsistent.
    """
    return _parse(name.strip().lower(), name)


def _parse(text, name):
    """parse_arm of `text` (stripped, lower case); the messages name `name`, as given."""
    if text.endswith('-balance'):
        arm = _parse(text[:-len('-balance')], name)
        if arm.balance:
            raise ValueError('%r names -balance twice' % name)
        return dataclasses.replace(arm, name=arm.name + '-balance', balance=True)
    if text in ('bsp', 'asp'):
        return Arm(text, text, 'dist_sync' if text == 'bsp' else 'dist_async')
    if text == 'asp-lrtau':
        return Arm(text, 'asp', 'dist_async', rule='lrtau')
    match = SSP_RE.match(text)
    if match:
        return Arm('ssp%d' % int(match.group(1)), 'ssp', 'dist_ssp', (int(match.group(1)),))
    match = DSSP_RE.match(text)
    if match:
        low, high = DSSP_STALENESS if match.group(1) is None else (int(match.group(1)),
                                                                   int(match.group(2)))
        if low > high:
            raise ValueError('%r has sL %d > sU %d' % (name, low, high))
        mode = match.group(3) or BOUNDED
        canonical = 'dssp' + ('' if (low, high) == DSSP_STALENESS else '%d-%d' % (low, high))
        canonical += '' if mode == BOUNDED else '-' + mode
        return Arm(canonical, 'dssp', 'dist_dssp', (low, high), mode)
    raise ValueError('%r is not a paradigm' % name)


def sim_policy(arm):
    """The :func:`mxnet_ssp.lab.cluster_model.simulate.simulate` policy of `arm` (BSP is SSP with
    s = 0).  The update rule (``asp-lrtau``) and batch balancing are not part of it."""
    if arm.family == 'bsp':
        return 'ssp:0'
    if arm.family == 'asp':
        return 'asp'
    if arm.family == 'ssp':
        return 'ssp:%d' % arm.staleness[0]
    return 'dssp:%d:%d:%s' % (arm.staleness + (arm.mode,))
