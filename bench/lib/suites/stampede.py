"""Suite stampede: many clients ask for one cold URL behind a slow origin;
the origin should see one request, and p99 stay within the origin's delay
plus 10 ms.  corral has no proxy yet."""

NAME = "stampede"


def run(ctx):
    ctx.note("stampede: not available yet")
    return []
