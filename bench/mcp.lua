-- wrk script for bench/run.sh: POSTs one MCP JSON-RPC request per call, checks every response,
-- and writes a one-line JSON summary to $BENCH_OUT.
--
-- Environment:
--   BENCH_HEADERS  request headers, one "name: value" per line
--   BENCH_BODY     JSON-RPC body; its first `"id":1,` is replaced with a unique id per request
--                  (a peer that multiplexes one session must not see two in-flight requests with
--                  the same id) and every %QUERY% with the next of BENCH_QUERIES
--   BENCH_QUERIES  optional, '|'-separated strings cycled through %QUERY%
--   BENCH_EXPECT   a substring every good response body must contain (status 200 too)
--   BENCH_OUT      file for the summary

local body_tpl = os.getenv("BENCH_BODY")
local expect = os.getenv("BENCH_EXPECT")
local out = os.getenv("BENCH_OUT")
local hdrs = {}
for line in string.gmatch(os.getenv("BENCH_HEADERS") or "", "[^\n]+") do
  local k, v = line:match("^%s*([^:]+):%s*(.-)%s*$")
  if k then hdrs[k] = v end
end
local queries = {}
for q in string.gmatch(os.getenv("BENCH_QUERIES") or "", "[^|]+") do
  table.insert(queries, q)
end

local threads = {}

function setup(thread)
  thread:set("tid", #threads + 1)
  table.insert(threads, thread)
end

function init(args)
  base = tid * 1000000000
  counter = 0
  good = 0
  bad = 0
  first_bad = ""
end

function request()
  counter = counter + 1
  local b = body_tpl:gsub('"id":1,', '"id":' .. (base + counter) .. ',', 1)
  if #queries > 0 then
    b = b:gsub("%%QUERY%%", queries[(counter % #queries) + 1])
  end
  return wrk.format("POST", nil, hdrs, b)
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
  local good_total, bad_total, sample = 0, 0, ""
  for _, t in ipairs(threads) do
    good_total = good_total + t:get("good")
    bad_total = bad_total + t:get("bad")
    if sample == "" then sample = t:get("first_bad") end
  end
  local e = summary.errors
  local f = assert(io.open(out, "w"))
  f:write(string.format(
    '{"requests":%d,"duration_us":%d,"rps":%.1f,"p50_us":%d,"p90_us":%d,"p99_us":%d,"max_us":%d,' ..
    '"good":%d,"bad":%d,"non2xx":%d,"connect_errors":%d,"read_errors":%d,"write_errors":%d,' ..
    '"timeouts":%d,"first_bad":%s}\n',
    summary.requests, summary.duration, summary.requests / (summary.duration / 1e6),
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max,
    good_total, bad_total, e.status, e.connect, e.read, e.write, e.timeout, json_string(sample)))
  f:close()
end
