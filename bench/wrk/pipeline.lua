-- Writes BENCH_PIPELINE (default 16) GETs at once on each connection and
-- waits for all the responses before the next batch (HTTP/1.1 pipelining).
-- The latency wrk reports is that of a whole batch.
local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
dofile(here .. "report.lua")

local depth = tonumber(os.getenv("BENCH_PIPELINE")) or 16
local batch

function init(args)
   local r = {}
   for i = 1, depth do
      r[i] = wrk.format(nil, nil)
   end
   batch = table.concat(r)
end

function request()
   return batch
end
