"""Names of the environment variables that MXNet, ps-lite and CUDA define and mxnet-ssp reads
or sets, spelt once here (the ``MXNET_SSP_*`` settings are declared in :mod:`mxnet_ssp.config`).

Standard library only: nothing is read here, these are names.
"""

__all__ = ['DMLC_PREFIX', 'DMLC_ROLE', 'DMLC_PS_ROOT_URI', 'DMLC_PS_ROOT_PORT', 'DMLC_NODE_HOST',
           'DMLC_INTERFACE', 'DMLC_NUM_WORKER', 'DMLC_NUM_SERVER', 'DMLC_TASK_ID',
           'DMLC_JOB_CLUSTER', 'DMLC_NUM_ATTEMPT', 'DMLC_PS_VAN_TYPE', 'DMLC_PS_WATER_MARK',
           'CUDA_VISIBLE_DEVICES', 'MXNET_KVSTORE_BIGARRAY_BOUND', 'SSH_CONNECTION']

#: What every ps-lite variable starts with (a process without them is not a node of a job).
DMLC_PREFIX = 'DMLC_'
#: ``scheduler``, ``server`` or ``worker``: which node of the job this process is.
DMLC_ROLE = 'DMLC_ROLE'
#: The scheduler's address and port: every node connects there first.
DMLC_PS_ROOT_URI = 'DMLC_PS_ROOT_URI'
DMLC_PS_ROOT_PORT = 'DMLC_PS_ROOT_PORT'
#: The address this node announces to the others (else ps-lite picks one of an interface).
DMLC_NODE_HOST = 'DMLC_NODE_HOST'
#: The network interface whose address ps-lite announces.
DMLC_INTERFACE = 'DMLC_INTERFACE'
#: The job's number of workers and of servers (set by every launcher).
DMLC_NUM_WORKER = 'DMLC_NUM_WORKER'
DMLC_NUM_SERVER = 'DMLC_NUM_SERVER'
#: MXNet's dmlc tracker's task number, launcher name (``local``, ``ssh``, ``mpi``) and retry.
DMLC_TASK_ID = 'DMLC_TASK_ID'
DMLC_JOB_CLUSTER = 'DMLC_JOB_CLUSTER'
DMLC_NUM_ATTEMPT = 'DMLC_NUM_ATTEMPT'
#: ps-lite's P3 van (``--p3``) and its water mark.
DMLC_PS_VAN_TYPE = 'DMLC_PS_VAN_TYPE'
DMLC_PS_WATER_MARK = 'DMLC_PS_WATER_MARK'
#: The GPUs CUDA shows this process (ids or UUIDs, comma-separated).
CUDA_VISIBLE_DEVICES = 'CUDA_VISIBLE_DEVICES'
#: MXNet's own setting: arrays of at least this many elements are split over all servers.
MXNET_KVSTORE_BIGARRAY_BOUND = 'MXNET_KVSTORE_BIGARRAY_BOUND'
#: Set by sshd in a process started over ssh.
SSH_CONNECTION = 'SSH_CONNECTION'
