-- tests/wrk.rs's script: requests to the example server's slow endpoint
-- (one in eight long enough to miss the termination's hard deadline), a
-- tally of the responses by status and by whether they carried
-- `Connection: close`, and wrk's own counts, printed by done() as one
-- `tally` line.
--
-- Ending the run (see tests/wrk.rs): once the file named by
-- WRK_SERVER_GONE exists (the test creates it after the server process has
-- exited), a thread stops its event loop after more request() calls than
-- it has connections, and prints `thread stopped`. Every connection of a
-- thread reconnects at once after its connection ends, and each reconnect
-- to the closed port calls request() once per turn of the event loop, so
-- more calls than connections span two turns: the later one began after
-- the server had exited, so every close the server made had reached the
-- thread's sockets and was handled in it, and the tally is final.

local threads = {}

function setup(thread)
   table.insert(threads, thread)
end

local gone_file = os.getenv("WRK_SERVER_GONE")
local per_thread = tonumber(os.getenv("WRK_CONNECTIONS_PER_THREAD") or "0")

function init(args)
   sent = 0
   ok = 0
   ok_close = 0
   unavailable = 0
   unavailable_close = 0
   other = 0
   calls_after_gone = 0
   stopped = false
end

function request()
   if gone_file and not stopped then
      local gone = io.open(gone_file, "r")
      if gone then
         gone:close()
         calls_after_gone = calls_after_gone + 1
         if calls_after_gone > per_thread then
            stopped = true
            io.write("thread stopped\n")
            io.flush()
            wrk.thread:stop()
         end
      end
   end
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
      "requests=%d connect=%d read=%d write=%d status=%d timeout=%d\n",
      t.ok, t.ok_close, t.unavailable, t.unavailable_close, t.other,
      summary.requests, e.connect, e.read, e.write, e.status, e.timeout))
end
