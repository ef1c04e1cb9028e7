"""Reading JSON Lines files (one JSON object per line): the metrics and logs a job writes.

Standard library only: the trainer, the lab and the advisor read with it.
"""
import json
import os

__all__ = ['read_jsonl']


def read_jsonl(path, error=ValueError):
    """The records of the JSON Lines file `path`, in order; blank lines are skipped and a
    missing file has none.

    A torn last line is dropped: a last line that has no newline and is not JSON is what a
    writer killed in the middle of a record leaves (every writer here writes a record and
    its newline in one line-buffered write); a last line without a newline that is JSON is
    a record.  Any other line that is not JSON is an error: `error` (ValueError or one of its
    subclasses) is raised with the message ``'<path> line <n> is not JSON'`` (n counts from 1,
    blank lines included).
    """
    if not os.path.isfile(path):
        return []
    records = []
    with open(path, encoding='utf-8') as f:
        for number, line in enumerate(f, 1):
            text = line.strip()
            if not text:
                continue
            try:
                records.append(json.loads(text))
            except ValueError:
                if not line.endswith('\n'):      # only the last line can lack one: torn
                    break
                raise error('%s line %d is not JSON' % (path, number)) from None
    return records
