"""Build the network ``--model`` names (imports MXNet; GluonCV for its models).

The names are checked in :mod:`mxnet_ssp.lab.training_flags.models`, without MXNet.
"""
import math

from ...core.names import BUILTIN_MODELS
from ..training_flags.models import (MODELS, RESNET_SHORT, check_model, describe_model,
                                      gluoncv_available, resolve_model)

__all__ = ['get_model', 'MODELS', 'BUILTIN_MODELS', 'RESNET_SHORT', 'check_model',
           'describe_model', 'resolve_model']


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
