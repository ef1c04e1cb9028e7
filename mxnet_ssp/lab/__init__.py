"""The experiments of mxnet-ssp: the training script, the demo and their data.

Installed with the package, so they run without a checkout:

=======================================  ==========================  ==============================
module                                   console script              what
=======================================  ==========================  ==============================
:mod:`.train_cifar`                      ``mxnet-ssp-train``         the training script (digits,
                                                                     CIFAR-10/100; every store);
                                                                     its code is :mod:`.training`
:mod:`.compare_paradigms`                ``mxnet-ssp-compare``       the demo: BSP, ASP, SSP, DSSP
                                                                     with one slow worker
:mod:`mxnet_ssp.lab.reproduce`               ``mxnet-ssp-reproduce``     the DSSP paper's grid; its
                                                                     code is :mod:`.reproduce`
:mod:`.data`, :mod:`.cifar`              --                          the datasets (gluon.data)
:mod:`.loader`                           --                          shards, order, transforms,
                                                                     DataLoader
=======================================  ==========================  ==============================

Every one runs as ``python -m <module>`` too.  Importing this package imports
none of them (and no MXNet): in MXNet's scheduler and server processes
``import mxnet`` runs the parameter server, so the training script decides
when MXNet is imported.
"""
