-- wrk script for bench/sdk.sh: POSTs entities.get or entities.list bodies built from sampled ids
-- or cursors, checks every response, and writes a one-line JSON summary to $BENCH_OUT (the same
-- summary as bench/mcp.lua, so the same report code reads both).
--
-- Environment:
--   BENCH_HEADERS  request headers, one "name: value" per line
--   BENCH_KIND     "get": body {"id": <random sampled id>};
--                  "list": body {"type":"ticket","limit":100,"cursor": <random sampled cursor>}
--   BENCH_SAMPLE   file with one id (get) or cursor (list) per line
--   BENCH_EXPECT   a substring every good response body must contain (status 200 too)
--   BENCH_OUT      file for the summary
--
-- Every thread seeds its random numbers from its thread number only, so lore and the peer are
-- sent the same sequence of ids and cursors.

local kind = os.getenv("BENCH_KIND")
local expect = os.getenv("BENCH_EXPECT")
local out = os.getenv("BENCH_OUT")
local hdrs = {}
for line in string.gmatch(os.getenv("BENCH_HEADERS") or "", "[^\n]+") do
  local k, v = line:match("^%s*([^:]+):%s*(.-)%s*$")
  if k then hdrs[k] = v end
end
local sample = {}
for line in io.lines(os.getenv("BENCH_SAMPLE")) do
  if #line > 0 then table.insert(sample, line) end
end
assert(#sample > 0, "empty BENCH_SAMPLE")
assert(kind == "get" or kind == "list", "BENCH_KIND must be get or list")

local threads = {}

function setup(thread)
  thread:set("tid", #threads + 1)
  table.insert(threads, thread)
end

function init(args)
  math.randomseed(7919 * tid)
  good = 0
  bad = 0
  first_bad = ""
end

function request()
  local pick = sample[math.random(#sample)]
  local body
  if kind == "get" then
    body = '{"id":"' .. pick .. '"}'
  else
    body = '{"type":"ticket","limit":100,"cursor":"' .. pick .. '"}'
  end
  return wrk.format("POST", nil, hdrs, body)
end

function response(status, headers, body)
  if status == 200 and body:find(expect, 1, true) then
    good = good + 1
  else
    bad = bad + 1
    if first_bad == "" then
      first_bad = status .. " " .. string.sub(body or "", 1, 300)
    end
  end
end

local function json_string(s)
  return '"' .. s:gsub('[%c"\\]', function(c)
    return string.format("\\u%04x", string.byte(c))
  end) .. '"'
end

function done(summary, latency, requests)
  local good_total, bad_total, first = 0, 0, ""
  for _, t in ipairs(threads) do
    good_total = good_total + t:get("good")
    bad_total = bad_total + t:get("bad")
    if first == "" then first = t:get("first_bad") end
  end
  local e = summary.errors
  local f = assert(io.open(out, "w"))
  f:write(string.format(
    '{"requests":%d,"duration_us":%d,"rps":%.1f,"p50_us":%d,"p90_us":%d,"p99_us":%d,"max_us":%d,' ..
    '"good":%d,"bad":%d,"non2xx":%d,"connect_errors":%d,"read_errors":%d,"write_errors":%d,' ..
    '"timeouts":%d,"first_bad":%s}\n',
    summary.requests, summary.duration, summary.requests / (summary.duration / 1e6),
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max,
    good_total, bad_total, e.status, e.connect, e.read, e.write, e.timeout, json_string(first)))
  f:close()
end
