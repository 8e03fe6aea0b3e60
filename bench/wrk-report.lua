-- wrk's report for bench/ingress.sh: one line, latencies in microseconds.
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("RESULT rps=%.1f p50=%d p99=%d mean=%.1f requests=%d errors=%d non2xx=%d\n",
    summary.requests / (summary.duration / 1e6), latency:percentile(50), latency:percentile(99),
    latency.mean, summary.requests, e.connect + e.read + e.write + e.timeout, e.status))
end
