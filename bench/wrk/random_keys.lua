-- GETs of a random page among BENCH_KEYS (default 200000), one of the
-- seed's /articles/pageN.html each time (siege -i -f urls.txt).
local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
dofile(here .. "report.lua")

local keys = tonumber(os.getenv("BENCH_KEYS")) or 200000

function init(args)
   math.randomseed(os.time() + tonumber(tostring({}):sub(8), 16) % 1000)
end

function request()
   return wrk.format("GET", "/articles/page" ..
      math.random(0, keys - 1) .. ".html")
end
