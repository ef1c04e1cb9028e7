"""The synchronization controller in a process of its own (``MXNET_SSP_CONTROLLER=process``).

The server process that answers the discovery request starts this module with
``python -m mxnet_ssp.controller.process`` and talks to it through two pipes:

* stdin: one JSON line with the controller's settings, the wire form of
  :class:`~mxnet_ssp.core.controller_settings.ControllerSettings` (its table: the job's
  staleness, mode, timeout, elastic minimum and liveness bound, the settings every worker must
  share, the address to listen on, the secret in hex and the metrics file);
  then nothing until the server process ends, which closes the pipe;
* stdout: one JSON line, ``{"host", "port"}`` once the controller listens, or
  ``{"error"}`` if it cannot start; later, if the job fails, one more line
  ``{"failed": message}`` once the workers were told and hung up (the server
  then ends: :func:`mxnet_ssp.ps.job_watch.follow_controller_process`).

At end of file on stdin (the server process exited, normally or killed) the controller
stops and this process exits, so it never outlives its job.  Why a process: the decisions
then do not share a GIL with the server's update rules (``benchmarks/controller_load.py``).
It imports neither MXNet nor anything that does.
"""
import json
import logging
import os
import sys

from .server import ControllerServer
from ..core.controller_settings import ControllerSettings
from ..core.sync import SyncPolicy
from ..cpu_record import record_cpu


def start(settings, on_failed=None):
    """Start a :class:`ControllerServer` for `settings` (the wire form of
    :class:`~mxnet_ssp.core.controller_settings.ControllerSettings`) and return it; also how a
    server starts the controller on a thread of its own process.  `on_failed`: see
    :class:`ControllerServer`."""
    job = ControllerSettings.from_wire(settings)
    policy = SyncPolicy(job.num_workers, job.s_lower, job.s_upper, mode=job.mode)
    return ControllerServer(policy, bytes.fromhex(job.secret), host=job.host, port=0,
                            timeout=job.timeout, metrics_path=job.metrics_path,
                            max_pending=max(64, job.num_workers + 1), on_failed=on_failed,
                            min_workers=job.elastic, agree=job.agree,
                            liveness=job.liveness).start()


def serve(stdin, stdout):
    """Read the settings from `stdin`, answer on `stdout`, serve until `stdin` closes."""
    line = stdin.readline()

    def failed(message):        # on the controller's thread; the main thread only reads stdin
        stdout.write(json.dumps({'failed': message}) + '\n')
        stdout.flush()
    try:
        settings = json.loads(line)
        server = start(settings, on_failed=failed)
    except Exception as err:   # reported to the workers through the discovery answer
        stdout.write(json.dumps({'error': '%s: %s' % (type(err).__name__, err)}) + '\n')
        stdout.flush()
        return 1
    if settings.get('metrics_path'):     # this process's CPU, next to controller.jsonl
        record_cpu('controller', os.path.dirname(settings['metrics_path']) or '.')
    host, port = server.address
    stdout.write(json.dumps({'host': host, 'port': port}) + '\n')
    stdout.flush()
    try:
        while stdin.read(4096):     # nothing more is sent: this waits for end of file
            pass
    finally:
        server.stop()
    return 0


def main():
    logging.basicConfig(level=logging.WARNING,
                        format='mxnet-ssp controller: %(levelname)s %(message)s')
    return serve(sys.stdin, sys.stdout)


if __name__ == '__main__':
    sys.exit(main())
