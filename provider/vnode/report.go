package vnode

import (
	"context"
	"errors"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/klog/v2"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/provider/summary"
)

// After a failed summary write, the next attempt comes retryFirst later,
// then twice as long each time, up to retryMax (client-go's informers'
// own longest wait): a failure that passes is found at once, and a parent
// too busy to answer is not asked more often than its watches are.
const (
	retryFirst = time.Second
	retryMax   = 30 * time.Second
)

// answered tells whether err is the parent's answer (an API status, an
// error or not), rather than no answer: a connection refused, reset or
// timed out, a response cut short.
func answered(err error) bool {
	var status apierrors.APIStatus
	return errors.As(err, &status)
}

// markReported records r as reported now.
func (p *Provider) markReported(r summary.Result, lastSent *time.Time) {
	p.mu.Lock()
	p.last = r
	p.mu.Unlock()
	*lastSent = p.cfg.Clock.Now()
	if p.cfg.Reported != nil {
		p.cfg.Reported(*lastSent)
	}
}

// NotifyNodeStatus starts reporting: every ReportFrequency, and on a change
// of the summary, no more often than MinReportInterval. It does not block.
func (p *Provider) NotifyNodeStatus(ctx context.Context, cb func(*corev1.Node)) {
	go p.report(ctx, cb)
}

func (p *Provider) report(ctx context.Context, cb func(*corev1.Node)) {
	logger := klog.FromContext(ctx)
	period := p.cfg.Clock.NewTicker(p.cfg.ReportFrequency)
	defer period.Stop()
	var lastSent time.Time
	var pending <-chan time.Time // set while an early report waits for the rate limit
	w := &writes{p: p}
	// send reports the summary: at once on a change (force: also
	// without one), else once the interval since the last report has
	// passed. periodic marks the ticker's reports.
	send := func(force, periodic bool) {
		if !force && pending != nil {
			return // a report is already due when the interval has passed
		}
		if !force {
			if wait := p.cfg.MinReportInterval - p.cfg.Clock.Since(lastSent); wait > 0 {
				// Computing on every event of a burst would cost
				// O(pods) each time: compute once the interval is over.
				pending = p.cfg.Clock.After(wait)
				return
			}
		}
		r, err := p.Compute()
		if err != nil {
			logger.Error(err, "Computing summary")
			return
		}
		p.mu.Lock()
		changed := !summary.Equal(p.last, r)
		// What the node controller applies (labels, capacity; the
		// annotations other than the summary change only on a kick).
		nodeChanged := !apiequality.Semantic.DeepEqual(p.last.Labels, r.Labels) || !apiequality.Semantic.DeepEqual(p.last.Allocatable, r.Allocatable) ||
			summary.CanRun(p.last) != summary.CanRun(r)
		p.mu.Unlock()
		if !force && !changed {
			return
		}
		node, err := p.Node(r)
		if err != nil {
			logger.Error(err, "Building node")
			return
		}
		select {
		case <-ctx.Done():
			return
		default:
		}
		if p.cfg.PatchSummary == nil {
			cb(node)
			p.markReported(r, &lastSent)
			logger.V(4).Info("Reported summary", "changed", changed)
			return
		}
		// p.last is kept when the write failed: retried as a change.
		written := w.done(ctx, p.cfg.PatchSummary(ctx, node.Annotations[api.AnnotationSummary]))
		if nodeChanged || (force && !periodic) {
			cb(p.ControllerNode(node))
		}
		if written {
			p.markReported(r, &lastSent)
		}
		logger.V(4).Info("Reported summary", "changed", changed, "nodeChanged", nodeChanged)
	}

	for {
		select {
		case <-ctx.Done():
			return
		case <-period.C():
			send(true, true)
		case <-p.cfg.Changed:
			send(false, false)
		case <-p.kick:
			send(true, false)
		case <-pending:
			pending = nil
			send(false, false)
		case <-w.retry:
			w.retry = nil
			send(true, true)
		}
	}
}

// writes follows the outcome of the summary writes. After a failed one,
// retry is set: the summary is written again soon (retryWait, doubling up
// to retryMax), not at the next change or period, so that a failure that
// passes costs one write and an outage is measured by attempts close
// together.
type writes struct {
	p            *Provider
	retry        <-chan time.Time
	retryWait    time.Duration
	failingSince time.Time // first write of the current outage that got no answer
}

// done records a write's outcome (err), arms the retry after a failure,
// and calls Config.Reconnected at the end of an outage long enough; it
// returns whether the write worked.
func (w *writes) done(ctx context.Context, err error) bool {
	p, logger := w.p, klog.FromContext(ctx)
	if err != nil {
		logger.Error(err, "Writing the summary on the virtual node")
		if w.retry == nil {
			w.retryWait = min(max(2*w.retryWait, retryFirst), retryMax)
			w.retry = p.cfg.Clock.After(w.retryWait)
		}
	} else {
		w.retry, w.retryWait = nil, 0
	}
	// Only a write that got no answer at all (no connection, no
	// response) is an outage: an answer, even an error (a server too
	// busy: 429, 503, 504), says the parent is reachable, and its watches
	// need no fresh start, which would only add to its load.
	if err != nil && !answered(err) {
		if w.failingSince.IsZero() {
			w.failingSince = p.cfg.Clock.Now()
		}
	} else if !w.failingSince.IsZero() {
		outage := p.cfg.Clock.Since(w.failingSince)
		w.failingSince = time.Time{}
		if outage >= OutageThreshold && p.cfg.Reconnected != nil {
			logger.Info("The parent is reachable again", "outage", outage.Round(time.Millisecond))
			p.cfg.Reconnected(outage)
		}
	}
	return err == nil
}
