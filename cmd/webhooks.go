package cmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/kukie/kukie-gitops/store"
)

// Webhook deliveries belong to an installation of the App, not to a team, so they are
// managed from the command line with the database, as teams and tokens are, and not
// through the team API: no team token can list or replay them.
func runWebhooks(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprintln(stderr, "Usage:\n  kukie-gitops webhooks list [--state STATE] [--limit N]   list deliveries, newest first\n"+
			"  kukie-gitops webhooks replay ID                          run a failed or done delivery again\n\n"+
			"Run 'kukie-gitops webhooks list --help' for the flags.")
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	switch args[0] {
	case "list":
		var state string
		var limit int
		fs := newFlagSet("webhooks list", "webhooks list [--state STATE] [--limit N] [flags]",
			"Lists stored webhook deliveries, newest first, with their attempts and last error.\n"+
				"Deliveries that are done are deleted after webhooks.retention.", stderr)
		fs.StringVar(&state, "state", "", "only deliveries in this state: pending, processing, done or failed")
		fs.IntVar(&limit, "limit", 100, "at most this many deliveries")
		db, code, ok := openAdminCommand(ctx, fs, args[1:], func() error {
			if err := argCount(fs, 0)(); err != nil {
				return err
			}
			switch store.DeliveryState(state) {
			case "", store.DeliveryPending, store.DeliveryProcessing, store.DeliveryDone, store.DeliveryFailed:
			default:
				return fmt.Errorf("--state %q: want pending, processing, done or failed", state)
			}
			if limit <= 0 {
				return fmt.Errorf("--limit %d: want a positive number", limit)
			}
			return nil
		}, stderr)
		if !ok {
			return code
		}
		defer db.Close()
		list, err := db.ListWebhookDeliveries(ctx, store.WebhookFilter{State: store.DeliveryState(state), Limit: limit})
		if err != nil {
			fmt.Fprintf(stderr, "kukie-gitops webhooks list: %v\n", err)
			return 1
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "DELIVERY\tEVENT\tACTION\tSTATE\tATTEMPTS\tRECEIVED\tLAST ERROR")
		for _, d := range list {
			note := d.LastError
			if d.SkipReason != "" {
				note = "skipped: " + d.SkipReason // done without being acted on
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", d.DeliveryID, d.Event, d.Action, d.State,
				strconv.Itoa(d.Attempts-d.FreeAttempts), d.ReceivedAt.UTC().Format(time.RFC3339), oneLineOf(note, 120))
		}
		_ = tw.Flush()
		return 0
	case "replay":
		fs := newFlagSet("webhooks replay", "webhooks replay ID [flags]",
			"Queues a failed or done webhook delivery again, as it was stored, with a fresh\n"+
				"attempt budget; a running service's inbox processes it within seconds.", stderr)
		db, code, ok := openAdminCommand(ctx, fs, args[1:], argCount(fs, 1), stderr)
		if !ok {
			return code
		}
		defer db.Close()
		id := fs.Arg(0)
		d, err := db.ReplayWebhookDelivery(ctx, id)
		switch {
		case errors.Is(err, store.ErrNotFound):
			fmt.Fprintf(stderr, "kukie-gitops webhooks replay: no delivery %s (done deliveries are deleted after webhooks.retention)\n", id)
			return 1
		case errors.Is(err, store.ErrConflict):
			fmt.Fprintf(stderr, "kukie-gitops webhooks replay: delivery %s is %s; it runs without a replay\n", id, d.State)
			return 1
		case err != nil:
			fmt.Fprintf(stderr, "kukie-gitops webhooks replay: %v\n", err)
			return 1
		}
		if err := db.RecordOperatorAction(ctx, "", "webhook.replay", "webhook_delivery", id, map[string]string{"event": d.Event, "action": d.Action}); err != nil {
			fmt.Fprintf(stderr, "kukie-gitops webhooks replay: %v\n", err)
			return 1
		}
		fmt.Fprintf(stdout, "queued delivery %s (%s %s) again\n", id, d.Event, d.Action)
		return 0
	default:
		fmt.Fprintf(stderr, "kukie-gitops webhooks: unknown subcommand %q (want list or replay)\n", args[0])
		return 2
	}
}

// oneLineOf keeps an error readable in a table: the first n bytes, newlines as spaces.
func oneLineOf(s string, n int) string {
	b := []byte(s)
	for i, c := range b {
		if c == '\n' || c == '\r' || c == '\t' {
			b[i] = ' '
		}
	}
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}
