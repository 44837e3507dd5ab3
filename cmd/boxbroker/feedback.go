package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/intentius/boxbroker/internal/feedback"
	"github.com/intentius/boxbroker/internal/operator"
	"github.com/intentius/boxbroker/internal/server"
	"github.com/intentius/boxbroker/internal/store"
)

// feedbackSummary is one line of `feedback list`.
type feedbackSummary struct {
	ID      int64     `json:"id"`
	Box     string    `json:"box"`
	At      time.Time `json:"at"`
	Words   []string  `json:"words"`
	Entries int       `json:"entries"`
	Counts  int       `json:"counts"`
	Bytes   int       `json:"bytes"`
}

// feedbackLine is one line of `feedback export`: the batch as it came.
type feedbackLine struct {
	ID    int64           `json:"id"`
	Box   string          `json:"box"`
	At    time.Time       `json:"at"`
	Words []string        `json:"words"`
	Batch json.RawMessage `json:"batch"`
}

// feedbackPage and feedbackPageBytes bound one page `feedback` reads
// from the store: at most this many batches, ending at the one whose
// body brings the page's bytes to the second or past it.
const (
	feedbackPage      = 100
	feedbackPageBytes = 16 << 20
)

// runFeedback is `feedback list|export BOX`: the batches kept for a box,
// oldest first, one JSON object a line, read and written a page at a
// time. list summarises each batch; export gives each as it came.
func runFeedback(ctx context.Context, c *cli, args []string) error {
	sub, args := args[0], args[1:]
	if sub != "list" && sub != "export" {
		return fmt.Errorf("%w: unknown feedback command %s (list, export)", errUsage, named(sub))
	}
	var cfg server.Config
	fs := c.flags("feedback "+sub, &cfg)
	after := fs.Int64("after", 0, "only batches whose id is greater, to export what is new since the last export")
	args, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(args) != 1 {
		return fmt.Errorf("%w: feedback %s takes one BOX", errUsage, sub)
	}
	name := args[0]
	if err := boxArg(name); err != nil {
		return err
	}
	st, err := openExisting(ctx, &cfg)
	if err != nil {
		return err
	}
	defer st.Close()
	if _, err := st.Box(ctx, name); errors.Is(err, store.ErrNotFound) {
		return errors.New(operator.NoBox(name))
	} else if err != nil {
		return err
	}
	enc := json.NewEncoder(jsonSafe{c.stdout})
	enc.SetEscapeHTML(false)
	// A page at a time, each line written as it is read, so the memory
	// the command holds is one page's, however much the box keeps.
	q := store.FeedbackQuery{Box: name, After: max(*after, 0), Limit: feedbackPage, MaxBytes: feedbackPageBytes}
	for more := true; more; {
		var batches []store.FeedbackBatch
		batches, more, err = st.ListFeedback(ctx, q)
		if err != nil {
			return err
		}
		for _, f := range batches {
			words := f.Words
			if words == nil {
				words = []string{}
			}
			var line any
			if sub == "list" {
				b, _ := feedback.Parse(f.Body)
				line = feedbackSummary{ID: f.ID, Box: f.Box, At: f.At.UTC(), Words: words, Entries: b.Entries, Counts: b.Counts, Bytes: len(f.Body)}
			} else {
				if !json.Valid(f.Body) {
					return fmt.Errorf("batch %d of box %s is not JSON in the store", f.ID, name)
				}
				line = feedbackLine{ID: f.ID, Box: f.Box, At: f.At.UTC(), Words: words, Batch: f.Body}
			}
			if err := enc.Encode(line); err != nil {
				return err
			}
			q.After = f.ID
		}
	}
	return nil
}
