"""The JSON and JSON Lines files of a run directory."""
import json
import os
import tempfile


def read_jsonl(path):
    """Records of a JSON Lines file; a torn last line (killed writer) is ignored."""
    records = []
    if not os.path.isfile(path):
        return records
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line:
                try:
                    records.append(json.loads(line))
                except ValueError:
                    break
    return records


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
