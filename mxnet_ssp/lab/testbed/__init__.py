"""An emulated cluster on one machine for multi-host jobs: ``mxnet-ssp-testbed``.

N hosts as Linux network namespaces with addresses in 198.18.0.0/15, links shaped with tbf,
one sshd per host (see docs/many_hosts.md).  Standard library only.
"""
from .cli import main  # noqa: F401
