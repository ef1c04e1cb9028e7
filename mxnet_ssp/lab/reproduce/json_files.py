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


def write_json(path, obj, compact=False):
    """Write `obj` to `path` atomically (a reader sees the old file or the whole new one):
    indented, or with `compact` on one line without spaces (a lab's results.json: a run
    record stays within about 2 MB per scenario)."""
    fd, tmp = tempfile.mkstemp(prefix='.tmp-', dir=os.path.dirname(path) or '.')
    with os.fdopen(fd, 'w') as f:
        if compact:
            json.dump(obj, f, separators=(',', ':'))
        else:
            json.dump(obj, f, indent=2)
        f.write('\n')
    os.replace(tmp, path)
