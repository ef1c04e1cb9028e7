"""Start-up code for tests/integration/test_rooms.py's jobs (on their PYTHONPATH instead of
tests/support/startup): every process of the job

* finds the lab's extra packages missing (scikit-learn, mlxtend, matplotlib, pandas, tqdm,
  GluonCV, SciPy, OpenCV), as a user who installed mxnet-ssp without the ``lab`` extra does;
* writes each mxnet-ssp module it loads to ``$ROOMS_RECORD_DIR/<role>-<pid>.txt``, a line at a
  time as it is loaded (the processes of a job end with ``os._exit``: no exit hook runs),
  starting with those the start-up hook loaded before this file ran.
"""
import importlib.abc
import os
import sys

BLOCKED = ('sklearn', 'mlxtend', 'matplotlib', 'pandas', 'tqdm', 'gluoncv', 'scipy', 'cv2')


class _Rooms(importlib.abc.MetaPathFinder):
    def __init__(self, path):
        self.path = path
        self.seen = set()

    def note(self, name):
        if name.startswith('mxnet_ssp') and name not in self.seen:
            self.seen.add(name)
            with open(self.path, 'a') as f:
                f.write(name + '\n')

    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in BLOCKED:
            raise ImportError('%s is not installed here (tests/support/rooms_startup)' % name)
        self.note(name)
        return None                 # the other finders load it


def _install():
    directory = os.environ.get('ROOMS_RECORD_DIR')
    if not directory:
        return
    role = os.environ.get('DMLC_ROLE') or 'other'
    rooms = _Rooms(os.path.join(directory, '%s-%d.txt' % (role, os.getpid())))
    for name in list(sys.modules):
        rooms.note(name)
    sys.meta_path.insert(0, rooms)


_install()
