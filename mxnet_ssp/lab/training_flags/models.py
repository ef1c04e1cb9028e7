"""The networks ``--model`` names, checked without importing MXNet or GluonCV
(:func:`resolve_model`, :func:`check_model`); ``mxnet_ssp.lab.training.models.get_model``
builds one (imports MXNet).
"""
import ast
import difflib
import importlib
import importlib.util
import os
import re

from ...core.names import BUILTIN_MODELS

#: Short names of GluonCV's CIFAR ResNets (v1, basic blocks): resnet<D>, D = 6n + 2.
RESNET_SHORT = ('resnet20', 'resnet50', 'resnet56', 'resnet110')
#: What --model accepts (GluonCV model zoo names are accepted as well).
MODELS = BUILTIN_MODELS + RESNET_SHORT


_RESNET_SHORT_RE = re.compile(r'^resnet(\d+)$')
_CIFAR_RESNET_RE = re.compile(r'^cifar_resnet(\d+)_v([12])$')


def gluoncv_available():
    """Whether gluoncv can be imported (found on the path; not imported)."""
    return importlib.util.find_spec('gluoncv') is not None


def gluoncv_model_names():
    """Names in GluonCV's model zoo, read from its source without importing it.

    Returns an empty set when gluoncv is not installed or the file cannot be
    read (the caller then imports gluoncv to ask it).
    """
    spec = importlib.util.find_spec('gluoncv')
    if spec is None or not spec.submodule_search_locations:
        return set()
    path = os.path.join(list(spec.submodule_search_locations)[0], 'model_zoo', 'model_zoo.py')
    try:
        with open(path) as f:
            tree = ast.parse(f.read(), path)
    except (OSError, SyntaxError, ValueError):
        return set()
    for node in tree.body:
        if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict)
                and any(isinstance(t, ast.Name) and t.id == '_models' for t in node.targets)):
            return {k.value for k in node.value.keys
                    if isinstance(k, ast.Constant) and isinstance(k.value, str)}
    return set()


def resolve_model(name):
    """What `name` builds: ``('builtin', name)``, ``('cifar_resnet', version, depth)``
    or ``('gluoncv', name)`` for any other GluonCV model zoo name.

    ``resnet<D>`` is GluonCV's CIFAR ResNet v1 of depth D (``cifar_resnet<D>_v1``);
    ``cifar_resnet<D>_v<1|2>`` is accepted for every depth D = 6n + 2, including
    those GluonCV does not register (e.g. ``resnet50`` = ``cifar_resnet50_v1``,
    n = 8).  Raises ValueError with the reason; the name is not checked against
    the GluonCV model zoo here (see :func:`check_model`).
    """
    key = str(name).strip().lower()
    if key in BUILTIN_MODELS:
        return ('builtin', key)
    match = _RESNET_SHORT_RE.match(key)
    version = 1
    if match is None:
        match = _CIFAR_RESNET_RE.match(key)
        if match is not None:
            version = int(match.group(2))
    if match is not None:
        depth = int(match.group(1))
        if depth < 8 or (depth - 2) % 6:
            raise ValueError('%s names a CIFAR ResNet of depth %d, but CIFAR ResNets have '
                             'depth 6n + 2 with n >= 1 (20, 32, 44, 50, 56, 110, ...)'
                             % (name, depth))
        return ('cifar_resnet', version, depth)
    return ('gluoncv', key)


def describe_model(name):
    """One line saying what --model `name` builds (for logs and summary.json)."""
    kind = resolve_model(name)
    if kind[0] == 'builtin':
        return kind[1]
    if kind[0] == 'cifar_resnet':
        version, depth = kind[1], kind[2]
        return ('GluonCV CIFARResNetV%d (basic blocks, %d per stage, depth %d = '
                'cifar_resnet%d_v%d)' % (version, (depth - 2) // 6, depth, depth, version))
    return 'GluonCV model zoo %s' % kind[1]


def check_model(name):
    """Check --model `name`; return its :func:`resolve_model` tuple or raise ValueError.

    Imports nothing heavy unless `name` is neither one of ours nor in the
    model zoo's source (then gluoncv is imported to ask it).
    """
    accepted = ('%s, resnet<D> / cifar_resnet<D>_v1|v2 with D = 6n + 2 (e.g. %s), or a '
                'GluonCV model zoo name' % (', '.join(BUILTIN_MODELS), ', '.join(RESNET_SHORT)))
    try:
        kind = resolve_model(name)
    except ValueError as err:
        raise ValueError('%s; expected %s' % (err, accepted)) from None
    if kind[0] == 'builtin':
        return kind
    if not gluoncv_available():
        raise ValueError("%s needs GluonCV, which is not installed (pip install "
                         "'mxnet-ssp[gluoncv]' from the checkout: python -m pip install "
                         "'.[gluoncv]'); without it: %s" % (name, ', '.join(BUILTIN_MODELS)))
    if kind[0] == 'cifar_resnet':
        return kind
    names = gluoncv_model_names()
    if kind[1] in names:
        return kind
    try:   # not in the parsed source: ask gluoncv itself (imports mxnet)
        from gluoncv.model_zoo import get_model_list
        names = set(get_model_list())
    except Exception:
        pass
    if kind[1] in names:
        return kind
    close = difflib.get_close_matches(kind[1], sorted(names) + list(MODELS), n=3)
    raise ValueError('%s is not a known model: expected %s%s' % (
        name, accepted, ' (close: %s)' % ', '.join(close) if close else ''))
