"""Tests of mxnet_ssp.lab.loader: shards, the order of an epoch, the seeded
transforms, and the DataLoader's batches for any number of loader workers."""
import threading

import numpy as np
import pytest
from mxnet import gluon

from mxnet_ssp.lab import loader


def images_dataset(n, shape=(3, 6, 5), seed=0):
    """A normalized-looking dataset: (C, H, W) float32 images, all > 0, labels = index."""
    x = np.random.RandomState(seed).rand(n, *shape).astype(np.float32) + 1.0
    return gluon.data.ArrayDataset(x, np.arange(n, dtype=np.int32))


def batches(train_loader, epoch):
    return [(x.asnumpy(), y.asnumpy()) for x, y in train_loader.epoch(epoch)]


def same(a, b):
    return len(a) == len(b) and all(np.array_equal(xa, xb) and np.array_equal(ya, yb)
                                    for (xa, ya), (xb, yb) in zip(a, b))


# ---------------------------------------------------------------------------
# sharding
# ---------------------------------------------------------------------------
@pytest.mark.parametrize('n_items,num_workers', [(1437, 4), (10, 3), (5, 5), (3, 4), (0, 2),
                                                 (1000, 1)])
@pytest.mark.parametrize('seed', [None, 7])
def test_shards_are_disjoint_and_cover(n_items, num_workers, seed):
    shards = [loader.shard(n_items, r, num_workers, seed=seed) for r in range(num_workers)]
    joined = np.concatenate(shards)
    assert sorted(joined.tolist()) == list(range(n_items))      # cover, no duplicate
    sizes = [len(s) for s in shards]
    assert max(sizes) - min(sizes) <= 1
    again = [loader.shard(n_items, r, num_workers, seed=seed) for r in range(num_workers)]
    assert all(np.array_equal(a, b) for a, b in zip(shards, again))


def test_seeded_shards_mix_the_dataset():
    plain = loader.shard(100, 0, 4)
    mixed = loader.shard(100, 0, 4, seed=3)
    assert plain.tolist() == list(range(25))
    assert mixed.tolist() != plain.tolist() and len(mixed) == 25


@pytest.mark.parametrize('args', [(10, 2, 2), (10, -1, 2), (10, 0, 0), (-1, 0, 1)])
def test_shard_rejects_bad_arguments(args):
    with pytest.raises(ValueError):
        loader.shard(*args)


# ---------------------------------------------------------------------------
# the order of an epoch
# ---------------------------------------------------------------------------
def test_epoch_order_is_a_permutation_fixed_by_seed_rank_epoch():
    a = loader.epoch_order(50, 7, 1, 3)
    assert sorted(a.tolist()) == list(range(50))
    np.testing.assert_array_equal(a, loader.epoch_order(50, 7, 1, 3))
    for other in ((8, 1, 3), (7, 0, 3), (7, 1, 4)):
        assert not np.array_equal(a, loader.epoch_order(50, *other))


@pytest.mark.parametrize('bad', [(-1, 0, 1), (0, 0, 2 ** 32), (1.5, 0, 1)])
def test_epoch_order_rejects_bad_seed_parts(bad):
    with pytest.raises(ValueError, match='2\\*\\*32'):
        loader.epoch_order(10, *bad)


def test_shard_sampler_visits_the_shard_in_the_epochs_order():
    sampler = loader.ShardSampler(103, 2, 4, seed=5)
    index = loader.shard(103, 2, 4, seed=5)
    assert len(sampler) == len(index) == 26
    with pytest.raises(RuntimeError, match='set_epoch'):
        iter(sampler)
    sampler.set_epoch(3)
    got = list(sampler)
    assert got == index[loader.epoch_order(26, 5, 2, 3)].tolist()
    assert list(sampler) == got                           # a second pass: the same
    fresh = loader.ShardSampler(103, 2, 4, seed=5)        # e.g. in a resumed run
    fresh.set_epoch(3)
    assert list(fresh) == got
    sampler.set_epoch(4)
    assert sorted(sampler) == sorted(got) and list(sampler) != got
    with pytest.raises(ValueError, match='2\\*\\*32'):
        sampler.set_epoch(-1)


# ---------------------------------------------------------------------------
# seeded random transforms
# ---------------------------------------------------------------------------
def test_random_crop_and_flip_cut_shifted_and_mirrored_windows_of_the_padded_image():
    ds = images_dataset(64)
    augment = gluon.data.vision.transforms.Compose(
        [loader.RandomCrop((6, 5), pad=2), loader.RandomFlipLeftRight()])
    seeded = loader.SeededTransform(ds, augment, seed=1, rank=0)
    with pytest.raises(RuntimeError, match='set_epoch'):
        seeded[0]
    seeded.set_epoch(1)
    shifted = flipped = 0
    for i in range(len(ds)):
        src, dst = ds[i][0], seeded[i][0]
        assert dst.shape == src.shape and dst.dtype == src.dtype
        assert not np.shares_memory(dst, src)
        padded = np.zeros((3, 10, 9), np.float32)
        padded[:, 2:8, 2:7] = src
        windows = [(y, x, m) for y in range(5) for x in range(5) for m in (False, True)
                   if np.array_equal(dst, (padded[:, y:y + 6, x:x + 5][:, :, ::-1] if m
                                           else padded[:, y:y + 6, x:x + 5]))]
        assert windows, 'output is not a (mirrored) window of the padded image'
        y, x, m = windows[0]
        shifted += (y, x) != (2, 2)
        flipped += m
        assert seeded[i][1] == i
    assert 40 < shifted < 64 and 16 < flipped < 48       # offsets 0..4 each, flips about 1/2


def test_seeded_transform_draws_depend_on_seed_rank_epoch_and_index_only():
    ds = images_dataset(40)
    augment = gluon.data.vision.transforms.Compose(
        [loader.RandomCrop((6, 5), pad=3), loader.RandomFlipLeftRight()])

    def epoch_images(seed, rank, epoch, order):
        seeded = loader.SeededTransform(ds, augment, seed, rank)
        seeded.set_epoch(epoch)
        return {i: seeded[i][0] for i in order}

    forward = epoch_images(1, 0, 2, range(40))
    backward = epoch_images(1, 0, 2, reversed(range(40)))
    assert all(np.array_equal(forward[i], backward[i]) for i in range(40))
    for other in ((2, 0, 2), (1, 1, 2), (1, 0, 3)):
        changed = epoch_images(*other, range(40))
        assert sum(not np.array_equal(forward[i], changed[i]) for i in range(40)) > 20


def test_random_crop_checks_its_input():
    crop = loader.RandomCrop(8, pad=1)
    with pytest.raises(ValueError, match='does not fit'):
        crop(np.zeros((3, 4, 4), np.float32))
    with pytest.raises(ValueError, match='C, H, W'):
        crop(np.zeros((4, 4), np.float32))
    with pytest.raises(ValueError, match='pad must be >= 0'):
        loader.RandomCrop(4, pad=-1)
    identity = loader.RandomCrop(4, pad=0)
    image = np.arange(48, dtype=np.float32).reshape(3, 4, 4)
    np.testing.assert_array_equal(identity(image), image)     # outside a SeededTransform too


# ---------------------------------------------------------------------------
# normalization and the loaders
# ---------------------------------------------------------------------------
def test_channel_stats_and_normalized_match_numpy():
    rng = np.random.RandomState(0)
    images = rng.randint(0, 256, (70, 4, 5, 3)).astype(np.uint8)
    mean, std = loader.channel_stats(images, chunk=16)
    scaled = images.astype(np.float64) / 255.0
    np.testing.assert_allclose(mean, scaled.mean(axis=(0, 1, 2)), rtol=1e-9)
    np.testing.assert_allclose(std, scaled.std(axis=(0, 1, 2)) + 1e-6, rtol=1e-9)
    out = loader.normalized(gluon.data.ArrayDataset(images, np.arange(70, dtype=np.int32)),
                            mean, std, chunk=32)
    x, y = out[:]
    assert x.shape == (70, 3, 4, 5) and x.dtype == np.float32 and y.tolist() == list(range(70))
    expected = ((scaled - np.array(mean)) / np.array(std)).transpose(0, 3, 1, 2)
    np.testing.assert_allclose(x, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize('augment', [False, True])
def test_same_batches_for_0_1_2_loader_workers(augment):
    ds = images_dataset(103)
    runs = {}
    for workers in (0, 1, 2):
        train = loader.TrainLoader(ds, 5, rank=1, num_workers=2, seed=9, augment=augment,
                                   loader_workers=workers)
        assert len(train) == 51 // 5                 # rank 1 has 51 images; partial dropped
        runs[workers] = [batches(train, epoch) for epoch in (1, 2)]
    assert same(runs[0][0], runs[1][0]) and same(runs[0][0], runs[2][0])
    assert same(runs[0][1], runs[1][1]) and same(runs[0][1], runs[2][1])
    assert not same(runs[0][0], runs[0][1])           # epochs differ
    # what the batches are: the sampler's order, cut into batches; the images, augmented or not
    sampler = loader.ShardSampler(103, 1, 2, seed=9)
    sampler.set_epoch(2)
    order = list(sampler)
    source = ds
    if augment:
        source = loader.SeededTransform(ds, gluon.data.vision.transforms.Compose(
            [loader.RandomCrop((6, 5), pad=4), loader.RandomFlipLeftRight()]), 9, 1)
        source.set_epoch(2)
    for b, (x, y) in enumerate(runs[2][1]):
        idx = order[b * 5:(b + 1) * 5]
        assert y.tolist() == idx and x.dtype == np.float32
        np.testing.assert_array_equal(x, np.stack([source[i][0] for i in idx]))
        if not augment:
            np.testing.assert_array_equal(x, ds[:][0][idx])


def test_a_new_loader_resumes_with_the_same_batches():
    ds = images_dataset(60)
    first = loader.TrainLoader(ds, 4, 0, 1, seed=3, augment=True, loader_workers=1)
    epochs = [batches(first, e) for e in (1, 2, 3)]
    resumed = loader.TrainLoader(ds, 4, 0, 1, seed=3, augment=True, loader_workers=2)
    assert same(batches(resumed, 3), epochs[2])
    assert same(batches(resumed, 2), epochs[1])


def test_leaving_an_epoch_early_then_the_next_epoch_is_whole():
    ds = images_dataset(60)
    reference = batches(loader.TrainLoader(ds, 4, 0, 1, seed=3, loader_workers=0), 2)
    train = loader.TrainLoader(ds, 4, 0, 1, seed=3, loader_workers=2)
    before = threading.active_count()
    for i, _ in enumerate(train.epoch(1)):
        if i == 2:
            break
    assert same(batches(train, 2), reference)
    assert threading.active_count() == before           # the same pool, no new threads


def test_eval_loader_covers_the_dataset_in_order():
    ds = images_dataset(23)
    for workers in (0, 2):
        got = [(x.asnumpy(), y.asnumpy()) for x, y in
               loader.eval_loader(ds, batch_size=10, loader_workers=workers)]
        assert [len(y) for _, y in got] == [10, 10, 3]
        np.testing.assert_array_equal(np.concatenate([x for x, _ in got]), ds[:][0])
        assert np.concatenate([y for _, y in got]).tolist() == list(range(23))
