"""The JSON files of a run directory (its JSON Lines files: :mod:`mxnet_ssp.core.jsonl`)."""
import json
import os
import tempfile


def read_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def write_json(path, obj):
    """Write `obj` to `path` atomically (a reader sees the old file or the whole new one)."""
    fd, tmp = tempfile.mkstemp(prefix='.tmp-', dir=os.path.dirname(path) or '.')
    with os.fdopen(fd, 'w') as f:
        json.dump(obj, f, indent=2)
        f.write('\n')
    os.replace(tmp, path)
