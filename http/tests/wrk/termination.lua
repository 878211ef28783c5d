-- tests/wrk.rs's script: requests to the example server's slow endpoint
-- (one in eight long enough to miss the termination's hard deadline), and
-- a tally of the responses by status, and of those that carried
-- `Connection: close`, printed by done() as one `tally` line.

local threads = {}

function setup(thread)
   table.insert(threads, thread)
end

function init(args)
   sent = 0
   ok = 0
   ok_close = 0
   unavailable = 0
   unavailable_close = 0
   other = 0
end

function request()
   sent = sent + 1
   if sent % 8 == 0 then
      return wrk.format("GET", "/slow?ms=" .. (os.getenv("WRK_LONG_MS") or "5000"))
   end
   return wrk.format("GET", "/slow?ms=" .. (os.getenv("WRK_SHORT_MS") or "200"))
end

function response(status, headers, body)
   local close = false
   for name, value in pairs(headers) do
      if string.lower(name) == "connection" and string.lower(value) == "close" then
         close = true
      end
   end
   if status == 200 then
      ok = ok + 1
      if close then ok_close = ok_close + 1 end
   elseif status == 503 then
      unavailable = unavailable + 1
      if close then unavailable_close = unavailable_close + 1 end
   else
      other = other + 1
   end
end

function done(summary, latency, requests)
   local t = { ok = 0, ok_close = 0, unavailable = 0, unavailable_close = 0, other = 0 }
   for _, thread in ipairs(threads) do
      for key, _ in pairs(t) do
         t[key] = t[key] + thread:get(key)
      end
   end
   local e = summary.errors
   io.write(string.format(
      "tally ok=%d ok_close=%d unavailable=%d unavailable_close=%d other=%d " ..
      "connect=%d read=%d write=%d timeout=%d\n",
      t.ok, t.ok_close, t.unavailable, t.unavailable_close, t.other,
      e.connect, e.read, e.write, e.timeout))
end
