// Package metrics holds the service's Prometheus metrics, registered on the registry
// the serve wiring builds (never the process-wide default):
//
//   - Pipeline is the change pipeline's plan.Observer: transitions, step durations,
//     refusals by code, the deploy latency from merge and deploy timeouts, counted
//     where they happen.
//   - HelmWorkers is the Helm worker pool's helmexec.Observer: worker starts,
//     exits by cause, renders by outcome and their time in and waiting for a
//     worker, with the pool's busy, idle and waiting counts read at each scrape.
//   - StoreCollector reads gauges of what the database holds (plans by state, the
//     webhook inbox's depth and oldest pending age) at scrape time, so every replica
//     reports the same shared truth without keeping counts of its own in step.
//
// Labels come from fixed sets only (states, step states, error codes); never a plan
// code or a repository.
package metrics
