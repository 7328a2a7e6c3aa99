"""Suite store: the shared-memory cache store on its own, through
bench/store_bench.  Not wired in yet."""

NAME = "store"


def run(ctx):
    ctx.note("store: not available yet")
    return []
