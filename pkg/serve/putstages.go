package serve

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/energyscope/servingsnap/pkg/live"
)

// putStageBuckets resolve the ack path's stages, which take from tens of
// microseconds (applying) to milliseconds (an fsync), finely enough to
// read a p50 and a p99 off them against the 10 ms acknowledgement goal.
var putStageBuckets = []float64{
	50e-6, 100e-6, 250e-6, 500e-6, 750e-6, 1e-3, 1.5e-3, 2e-3, 3e-3, 4e-3, 5e-3, 6e-3, 8e-3,
	10e-3, 12.5e-3, 15e-3, 20e-3, 30e-3, 50e-3, 75e-3, 0.1, 0.2, 0.5, 1, 2.5,
}

// The stages of one DoPut batch on the server, in order; each is the time
// from the end of the one before. Their sum is "total": the batch's time
// in the server from the moment its message was decoded to the moment
// its acknowledgement was handed to gRPC. What a client measures beyond
// total is the network and gRPC's flow control, both ways.
const (
	stageCheck   = "check"   // structure check, limits, normalisation against the index
	stageQueue   = "queue"   // encoding for the log, waiting for the committer (the fsync before)
	stageFsync   = "fsync"   // the group's append and fsync
	stageApply   = "apply"   // waiting for the applier, the sorting and applying, publishing
	stageAck     = "ack"     // writing the acknowledgement
	stageTotal   = "total"   // decoded to acknowledged
	stagePrepare = "prepare" // (overlapping) queued to sorted into a run, beside the fsync
)

// putStageMetrics is the latency breakdown of acknowledged DoPut batches
// (servingsnap_put_stage_seconds{stage}): where an acknowledgement's time
// goes when it is slower than the fsync floor.
type putStageMetrics struct {
	h *prometheus.HistogramVec
}

func newPutStageMetrics() putStageMetrics {
	return putStageMetrics{h: prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "servingsnap_put_stage_seconds",
		Help:    "Time of an acknowledged DoPut batch in each stage of the write path on the server: check, queue, fsync, apply, ack (consecutive), their sum total, and prepare (overlapping queue and fsync).",
		Buckets: putStageBuckets,
	}, []string{"stage"})}
}

func (p putStageMetrics) register(r *prometheus.Registry) { r.MustRegister(p.h) }

// observe records one acknowledged batch: decoded when its message was
// read, checked when its normalisation was done, acked once the
// acknowledgement was sent.
func (p putStageMetrics) observe(decoded, checked, acked time.Time, st live.Stages) {
	if p.h == nil {
		return
	}
	obs := func(stage string, from, to time.Time) {
		if !from.IsZero() && !to.IsZero() {
			p.h.WithLabelValues(stage).Observe(to.Sub(from).Seconds())
		}
	}
	obs(stageCheck, decoded, checked)
	obs(stageQueue, checked, st.Taken)
	obs(stageFsync, st.Taken, st.Logged)
	obs(stageApply, st.Logged, st.Applied)
	obs(stageAck, st.Applied, acked)
	obs(stageTotal, decoded, acked)
	obs(stagePrepare, st.Queued, st.Prepared)
}
