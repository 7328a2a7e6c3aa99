"""The suites of bench/run, in the order a default run goes through them.

A suite is a module here with NAME and run(ctx), which returns a list of
load.Case (an empty list when it has nothing to measure yet).
"""

import importlib

ORDER = ("static", "site", "gzip", "proxy", "stampede", "fastcgi", "conns",
         "accept", "tls", "store", "memcached", "counters")


def load(name):
    return importlib.import_module("suites." + name)
