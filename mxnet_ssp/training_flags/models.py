"""The networks ``--model`` names: names are checked without importing MXNet or GluonCV
(:func:`resolve_model`, :func:`check_model`); :func:`get_model` builds one (imports MXNet).
"""
import ast
import difflib
import importlib
import importlib.util
import math
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


def get_model(name, num_classes, image_shape, drop_rate=0.0):
    """Build the network `name` for images of `image_shape` ``(C, H, W)``.

    ``alexnet-small`` is the downsized AlexNet of the SSP/DSSP experiments:
    three 'conv-relu-pool' blocks (32, 32, 64 channels; max pooling after
    the first, average pooling after the others) and two fully connected
    layers (128 hidden units).  It follows the input size: for CIFAR's 32x32,
    5x5 convolutions and three overlapping 3x3/2 poolings (cuda-convnet's
    layout); for smaller images, 3x3 convolutions and as many 2x2/2 poolings
    as keep the feature map at least 2x2 (two for the 8x8 digits; overlapping
    padded poolings of such small maps train badly).

    ``resnet<D>`` / ``cifar_resnet<D>_v<k>`` are GluonCV's CIFAR ResNets
    (``gluoncv.model_zoo.cifarresnet``) of depth D = 6n + 2; any other name
    goes to ``gluoncv.model_zoo.get_model(name, classes=num_classes)``.
    """
    from mxnet.gluon import nn
    kind = resolve_model(name)
    if kind == ('builtin', 'mlp'):
        net = nn.HybridSequential(prefix='mlp_')
        with net.name_scope():
            net.add(nn.Flatten(), nn.Dense(256, activation='relu'),
                    nn.Dense(128, activation='relu'), nn.Dense(num_classes))
        return net
    if kind == ('builtin', 'alexnet-small'):
        size = min(image_shape[1:])
        large = size >= 24
        kernel = 5 if large else 3
        pools = 3 if large else max(0, min(3, int(math.log2(size)) - 1))
        net = nn.HybridSequential(prefix='alexnet_small_')
        with net.name_scope():
            for i, channels in enumerate((32, 32, 64)):
                net.add(nn.Conv2D(channels, kernel, padding=kernel // 2, activation='relu'))
                if i < pools:
                    pool = nn.MaxPool2D if i == 0 else nn.AvgPool2D
                    net.add(pool(pool_size=3, strides=2, padding=1) if large
                            else pool(pool_size=2, strides=2))
            net.add(nn.Flatten(), nn.Dense(128, activation='relu'), nn.Dense(num_classes))
        return net
    if not gluoncv_available():
        raise ValueError("model %s needs GluonCV: python -m pip install '.[gluoncv]'" % name)
    if kind[0] == 'cifar_resnet':
        from gluoncv.model_zoo.cifarresnet import get_cifar_resnet
        return get_cifar_resnet(kind[1], kind[2], classes=num_classes)
    from gluoncv.model_zoo import get_model as gluoncv_get_model
    kwargs = {'classes': num_classes}
    if kind[1].startswith('cifar_wideresnet'):
        kwargs['drop_rate'] = drop_rate
    return gluoncv_get_model(kind[1], **kwargs)
