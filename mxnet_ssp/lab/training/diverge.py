"""The divergence guard: a run whose loss becomes NaN or infinite, or grows past
:data:`GROWTH` times its first value, stops with one message saying so, naming the learning
rate and the store and what to try (a lower ``--lr``).

A run resumed from a checkpoint starts from a trained model, whose first loss can be tiny
(0.0035 on digits): one harder batch at 0.4 would be "over 100x" it.  Such a run's reference
is therefore at least the loss of chance guessing, ln(number of classes), the loss a fresh
run starts from (``floor``).

Pure decisions: no MXNet.  :class:`~.loop.Training` feeds it each iteration's mean loss.
"""
import math

#: the loss may grow to this many times its first value before the run counts as diverged
GROWTH = 100.0

#: the exit status of a worker whose run diverged
EXIT_DIVERGED = 3


#: what every message of :func:`divergence_message` says (a runner finds it in a job's log)
DIVERGED_AT = ' diverged at iteration '


def reports_divergence(text):
    """Whether `text` (a job's log or a failure's reason) holds this module's message that a
    run diverged."""
    return DIVERGED_AT in text


class Diverged(Exception):
    """The run diverged; ``str()`` is the message for the user."""


class DivergenceGuard:
    """Watches one worker's losses, iteration by iteration (:meth:`check`).

    The first finite loss is the reference, or `floor` where that is larger (a resumed
    run: :func:`chance_loss`); a later loss that is NaN, infinite, or more than `growth`
    times the reference (when the reference is > 0) is divergence.  A first loss that is
    not finite is divergence too.
    """

    def __init__(self, growth=GROWTH, floor=None):
        if not (math.isfinite(growth) and growth > 1):
            raise ValueError('growth %r is not valid: expected a number > 1' % (growth,))
        if floor is not None and not (math.isfinite(floor) and floor > 0):
            raise ValueError('floor %r is not valid: expected None or a number > 0'
                             % (floor,))
        self.growth = growth
        self.floor = floor
        self.first = None

    def check(self, loss):
        """None while `loss` is fine, else why the run diverged (a phrase)."""
        loss = float(loss)
        if not math.isfinite(loss):
            return 'the loss is %s' % ('nan' if math.isnan(loss) else
                                       'inf' if loss > 0 else '-inf')
        if self.first is None:
            self.first = loss
            return None
        if self.floor is not None and self.first < self.floor:
            if loss > self.growth * self.floor:
                return ('the loss grew to %.4g, over %gx the loss of chance guessing %.4g '
                        '(its first value %.4g came from a resumed model)'
                        % (loss, self.growth, self.floor, self.first))
            return None
        if self.first > 0 and loss > self.growth * self.first:
            return ('the loss grew to %.4g, over %gx its first value %.4g'
                    % (loss, self.growth, self.first))
        return None


def chance_loss(num_classes):
    """The cross-entropy loss of guessing uniformly among `num_classes` (> 1) classes."""
    if not (isinstance(num_classes, int) and num_classes > 1):
        raise ValueError('num_classes %r is not valid: expected an integer > 1'
                         % (num_classes,))
    return math.log(num_classes)


def lower_lr(lr):
    """A learning rate to try instead of `lr`: ten times lower, rounded to 2 digits."""
    return float('%.2g' % (lr / 10.0))


def divergence_message(reason, lr, kvstore, iteration, epoch, rank=0, num_workers=1,
                       first=None):
    """The one message of a diverged run: what happened, the learning rate, the store, what
    to try."""
    where = 'worker %d' % rank if num_workers > 1 else 'training'
    start = '' if first is None or 'first value' in reason else ' (first loss %.4g)' % first
    return (('%s' + DIVERGED_AT + '%d (epoch %d): %s%s, with --lr %g and --kvstore %s '
             '(%d worker%s); try a lower --lr, e.g. --lr %g')
            % (where, iteration, epoch, reason, start, lr, kvstore, num_workers,
               '' if num_workers == 1 else 's', lower_lr(lr)))
