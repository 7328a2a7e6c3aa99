"""Suite proxy: corral as a caching reverse proxy (a 4000 B cache hit is
the headline) against nginx's proxy_cache.  corral has no proxy yet."""

NAME = "proxy"


def run(ctx):
    ctx.note("proxy: not available yet")
    return []
