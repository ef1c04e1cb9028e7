"""Issue 41: the workers of a job must agree on their settings, wherever each came from.

A local job of real processes (scheduler, server, two workers) whose settings file gives
the staleness to both workers, while one worker's environment has another
MXNET_SSP_BUCKET_BYTES (the server keys' layout: the workers would push different keys).
"""
import os
import re
import sys

from conftest import JOBS, fail_msg, job_env, read_jsonl, run_job


def test_workers_with_other_bucket_bytes_fail_before_training(tmp_path):
    """The controller refuses whichever worker connects second, names the setting, both
    values and where each came from (environment / default), and both workers; the job
    exits 1.  The staleness, the same from the file for both, is not named."""
    settings = tmp_path / 'mxnet_ssp.env'
    settings.write_text('MXNET_SSP_STALENESS=2\nMXNET_SSP_TIMEOUT=20\n')
    env = {k: v for k, v in job_env(tmp_path).items()
           if k not in ('MXNET_SSP_TIMEOUT', 'MXNET_SSP_BUCKET_BYTES', 'MXNET_SSP_STALENESS')}
    out = tmp_path / 'o'
    proc = run_job(tmp_path, [sys.executable, os.path.join(JOBS, 'mismatch_job.py'),
                              '--store', 'dist_ssp', '--odd-index', '1',
                              '--odd-env', 'MXNET_SSP_BUCKET_BYTES=0', '--iters', '3',
                              '--out', str(out)], workers=2, env=env, timeout=120)
    who = {rec['index']: rec for rec in (read_jsonl(out / ('who-%d.json' % i))[0]
                                         for i in (0, 1))}
    assert [who[i]['staleness'] for i in (0, 1)] == [[2, 2], [2, 2]], who   # from the file
    assert proc.returncode == 1, fail_msg(proc)
    found = set(re.findall(
        r"worker (\d) on host (\S+) \(connected from [\d.]+:\d+\) has settings that differ "
        r"from the job's: MXNET_SSP_BUCKET_BYTES=(\d+) \(from (\w+)\), but the job runs with "
        r"MXNET_SSP_BUCKET_BYTES=(\d+) \(from (\w+), as worker (\d) on host \2\)\. Every "
        r"process of a job must use the same MXNET_SSP_BUCKET_BYTES: set it in the settings "
        r"file mxnet_ssp.env", proc.stderr))
    assert len(found) == 1, fail_msg(proc)
    rank, _, value, origin, job_value, job_origin, job_rank = found.pop()
    assert {rank, job_rank} == {'0', '1'}, fail_msg(proc)
    odd_rank = str(who[1]['rank'])
    mine = ('0', 'environment') if rank == odd_rank else ('4194304', 'default')
    theirs = ('0', 'environment') if job_rank == odd_rank else ('4194304', 'default')
    assert ((value, origin), (job_value, job_origin)) == (mine, theirs), fail_msg(proc)
    assert 'MXNET_SSP_STALENESS=' not in proc.stderr.split('has settings that differ')[1] \
        .split('Every process')[0], fail_msg(proc)
    assert re.search(r'(worker #[01]|server #0) \(launch index; pid \d+\) exited with code 1 '
                     r'— stopping the job', proc.stderr), fail_msg(proc)


def test_async_workers_with_other_bucket_bytes_fail_on_the_server(tmp_path):
    """dist_async (no controller): the server compares the settings each worker sends with
    its optimizer and ends at the second worker's, naming the setting, both values and both
    workers; the job fails (the workers follow the ended server)."""
    env = job_env(tmp_path)
    env.pop('MXNET_SSP_BUCKET_BYTES', None)
    out = tmp_path / 'o'
    proc = run_job(tmp_path, [sys.executable, os.path.join(JOBS, 'mismatch_job.py'),
                              '--store', 'dist_async', '--odd-index', '1',
                              '--odd-env', 'MXNET_SSP_BUCKET_BYTES=0', '--iters', '3',
                              '--out', str(out)], workers=2, env=env, timeout=120)
    assert proc.returncode != 0, fail_msg(proc)
    found = re.findall(
        r"mxnet-ssp: server: the job failed: worker (\d) on host (\S+) has settings that differ "
        r"from the job's: MXNET_SSP_BUCKET_BYTES=(\d+) \(from (\w+)\), but the job runs with "
        r"MXNET_SSP_BUCKET_BYTES=(\d+) \(from (\w+), as worker (\d) on host \2\)\. Every "
        r"process of a job must use the same MXNET_SSP_BUCKET_BYTES: set it", proc.stderr)
    assert len(found) == 1, fail_msg(proc)
    rank, _, value, origin, job_value, job_origin, job_rank = found[0]
    assert {rank, job_rank} == {'0', '1'}, fail_msg(proc)
    assert {(value, origin), (job_value, job_origin)} == {('0', 'environment'),
                                                          ('4194304', 'default')}, fail_msg(proc)
    assert re.search(r'server #0 \(launch index; pid \d+\) exited with code \d+ — stopping the '
                     r'job', proc.stderr), fail_msg(proc)
