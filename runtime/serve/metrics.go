package serve

import (
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
)

// metrics are the counters GET /metrics shows in Prometheus' text format.
type metrics struct {
	queued, busy, rejected atomic.Int64

	mu        sync.Mutex
	requests  map[[2]string]int64 // by endpoint and status code
	prompt    int64               // prompt tokens of finished generations
	cached    int64               // of them, reused from the kept session
	generated int64
	prefill   float64 // seconds to the first token, summed
	decode    float64 // seconds after the first token, summed
	lastRate  float64 // the last generation's tokens per second after the first
	engine    EngineStats
	restores  int64 // requests resumed from a saved state
	saved     int   // saved states kept, and their bytes
	savedB    int64
	// by lane: 1 while it runs a job; the jobs it has run
	laneBusyN, laneJobs []int64
}

func (m *metrics) init(lanes int) {
	m.requests = map[[2]string]int64{}
	m.laneBusyN, m.laneJobs = make([]int64, lanes), make([]int64, lanes)
}

// laneBusy adds d to lane i's busy gauge.
func (m *metrics) laneBusy(i int, d int64) {
	m.mu.Lock()
	m.laneBusyN[i] += d
	m.mu.Unlock()
}

// record adds a finished job.
func (m *metrics) record(j *job) {
	if len(j.out) == 0 && j.err != nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.laneJobs[j.lane]++
	if j.restored {
		m.restores++
	}
	m.prompt += int64(len(j.prompt))
	m.cached += int64(j.reused)
	m.generated += int64(len(j.out))
	m.prefill += j.ttft.Seconds()
	if d := (j.total - j.ttft).Seconds(); len(j.out) > 1 && d > 0 {
		m.decode += d
		m.lastRate = float64(len(j.out)-1) / d
	}
}

func (m *metrics) setCache(c *stateCache) {
	m.mu.Lock()
	m.saved, m.savedB = len(c.entries), c.total
	m.mu.Unlock()
}

func (m *metrics) setEngine(e EngineStats) {
	m.mu.Lock()
	m.engine = e
	m.mu.Unlock()
}

// wrap counts every answered request by route and status.
func (m *metrics) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		h.ServeHTTP(sw, r)
		path := r.URL.Path
		switch path {
		case "/", "/v1/chat/completions", "/v1/completions", "/v1/models", "/health", "/metrics":
		default:
			if strings.HasPrefix(path, "/v1/models/") {
				path = "/v1/models/{id}"
			} else {
				path = "other"
			}
		}
		m.mu.Lock()
		m.requests[[2]string{path, fmt.Sprint(sw.status)}]++
		m.mu.Unlock()
	})
}

type statusWriter struct {
	http.ResponseWriter
	status int
	wrote  bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wrote {
		w.status, w.wrote = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	w.wrote = true
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection (Flush).
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (s *Server) metrics(w http.ResponseWriter, r *http.Request) {
	m := &s.m
	var b strings.Builder
	put := func(name, typ, help string, lines ...string) {
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, typ)
		for _, l := range lines {
			fmt.Fprintf(&b, "%s%s\n", name, l)
		}
	}
	num := func(v float64) string { return " " + fmt.Sprint(v) }
	m.mu.Lock()
	var keys [][2]string
	for k := range m.requests {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i][0]+" "+keys[i][1] < keys[j][0]+" "+keys[j][1] })
	var reqs []string
	for _, k := range keys {
		reqs = append(reqs, fmt.Sprintf("{endpoint=%q,code=%q} %d", k[0], k[1], m.requests[k]))
	}
	put("strata_requests_total", "counter", "HTTP requests answered, by endpoint and status code.", reqs...)
	put("strata_requests_rejected_total", "counter", "Requests refused with 503 because the queue was full.", num(float64(m.rejected.Load())))
	put("strata_prompt_tokens_total", "counter", "Prompt tokens of the generations run (reused ones included).", num(float64(m.prompt)))
	put("strata_prompt_tokens_cached_total", "counter", "Prompt tokens reused from the kept session instead of prefilled.", num(float64(m.cached)))
	put("strata_generated_tokens_total", "counter", "Tokens generated.", num(float64(m.generated)))
	put("strata_prefill_seconds_total", "counter", "Seconds from a generation's start to its first token, summed.", num(m.prefill))
	put("strata_decode_seconds_total", "counter", "Seconds of generation after the first token, summed.", num(m.decode))
	put("strata_decode_tokens_per_second", "gauge", "The last generation's tokens per second after its first token.", num(m.lastRate))
	put("strata_queue_depth", "gauge", "Requests waiting for the engine.", num(float64(m.queued.Load())))
	put("strata_busy", "gauge", "Generations running (at most --parallel).", num(float64(m.busy.Load())))
	var busy, jobs []string
	for i := range m.laneBusyN {
		busy = append(busy, fmt.Sprintf("{session=\"%d\"} %d", i, m.laneBusyN[i]))
		jobs = append(jobs, fmt.Sprintf("{session=\"%d\"} %d", i, m.laneJobs[i]))
	}
	put("strata_session_busy", "gauge", "1 while the session (a lane of its own sequence state, --parallel) runs a request.", busy...)
	put("strata_session_requests_total", "counter", "Generations each session has run.", jobs...)
	if s.cache != nil {
		put("strata_state_cache_restores_total", "counter", "Requests resumed from a saved conversation state.", num(float64(m.restores)))
		put("strata_state_cache_entries", "gauge", "Conversation states kept (--cache-mb).", num(float64(m.saved)))
		put("strata_state_cache_bytes", "gauge", "Bytes those states hold.", num(float64(m.savedB)))
	}
	e := m.engine
	if e.Streaming {
		put("strata_expert_hits_total", "counter", "Routed-expert lookups the arena held.", num(float64(e.ExpertHits)))
		put("strata_expert_misses_total", "counter", "Routed-expert lookups read from storage.", num(float64(e.ExpertMisses)))
		put("strata_expert_hit_ratio", "gauge", "Expert hits over lookups.", num(float64(e.ExpertHits)/float64(max(e.ExpertHits+e.ExpertMisses, 1))))
	}
	if e.Spec {
		put("strata_spec_drafted_total", "counter", "Draft tokens verified by speculative decoding.", num(float64(e.Drafted)))
		put("strata_spec_accepted_total", "counter", "Draft tokens accepted.", num(float64(e.Accepted)))
		put("strata_spec_acceptance_ratio", "gauge", "Accepted over drafted.", num(float64(e.Accepted)/float64(max(e.Drafted, 1))))
	}
	m.mu.Unlock()
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	w.Write([]byte(b.String()))
}
