-- Ends a wrk run with one line that bench/run reads: the counts and the
-- latency percentiles (microseconds), instead of parsing wrk's text.

-- wrk's correction for coordinated omission can move samples below the
-- smallest one it saw (pipelining makes that likely), and past the samples
-- it still sees its percentile() returns 0.  Then find the share s that it
-- sees, by bisection, and take the percentile p within that share.
local function percentile(latency, p)
   local v = latency:percentile(p)
   if v > 0 then
      return v
   end
   local lo, hi = 0, 100
   for _ = 1, 40 do
      local mid = (lo + hi) / 2
      if latency:percentile(mid) > 0 then
         lo = mid
      else
         hi = mid
      end
   end
   return latency:percentile(p * lo / 100)
end

function done(summary, latency, requests)
   local e = summary.errors
   io.write(string.format(
      "BENCH requests=%.0f duration_us=%.0f bytes=%.0f connect=%.0f " ..
      "read=%.0f write=%.0f status=%.0f timeout=%.0f " ..
      "p50_us=%.1f p99_us=%.1f max_us=%.1f\n",
      summary.requests, summary.duration, summary.bytes,
      e.connect, e.read, e.write, e.status, e.timeout,
      percentile(latency, 50), percentile(latency, 99), latency.max))
end
