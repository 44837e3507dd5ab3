package store

import (
	"context"
	"time"
)

// FeedbackBatch is one accepted feedback batch, its body kept as it came.
type FeedbackBatch struct {
	ID    int64
	Box   string
	At    time.Time
	Words []string
	Body  []byte
}

// MaxFeedbackPage is the most batches one ListFeedback call returns.
const MaxFeedbackPage = 1000

// FeedbackBound is what one box may keep of feedback: at most Batches
// batches whose bodies hold at most Bytes bytes in all. Zero (or less)
// for either is no bound of that kind.
type FeedbackBound = FeedbackKept

// FeedbackAdded is what AddFeedback did: the new batch's ID, and the
// oldest batches of the box it dropped to stay within the bound (how
// many, and their bodies' bytes).
type FeedbackAdded struct {
	ID           int64
	Dropped      int
	DroppedBytes int64
}

// FeedbackQuery asks for one page of a box's batches.
type FeedbackQuery struct {
	Box string
	// After is where the page starts: oldest first, the batches whose ID
	// is above After; NewestFirst, those whose ID is below it. Zero is
	// the start in either order.
	After int64
	// Limit is the most batches the page holds, 1 to MaxFeedbackPage.
	Limit int
	// NewestFirst orders the page by descending ID.
	NewestFirst bool
	// MaxBytes, when above zero, ends the page early at the batch that
	// brings its bodies' bytes to MaxBytes or past it (a page holds at
	// least one batch), so that a page's memory is bounded.
	MaxBytes int64
}

// FeedbackKept is how much feedback a box keeps: its batches and their
// bodies' bytes.
type FeedbackKept struct {
	Batches int
	Bytes   int64
}

// Feedback keeps feedback batches.
type Feedback interface {
	// AddFeedback stores a batch and, in the same write, drops the
	// box's oldest batches while the box keeps more than bound allows
	// (the new batch is never dropped). ErrNotFound if no box holds the
	// token that hashes to tokenHash, the one the batch was admitted with
	// (its token, or the one before its last rotation, within the
	// grace): a batch of a box removed is not kept as one of a box added
	// since under its name. ErrGraceEnded and ErrTokenExpired
	// (ErrNotFound both) as for SaveDeclaration.
	AddFeedback(ctx context.Context, f FeedbackBatch, tokenHash string, bound FeedbackBound) (FeedbackAdded, error)
	// ListFeedback returns one page of a box's batches (q), and whether
	// more follow it in q's order; an error if q.Limit is not 1 to
	// MaxFeedbackPage. A box with none, or no box, has an empty page.
	ListFeedback(ctx context.Context, q FeedbackQuery) (page []FeedbackBatch, more bool, err error)
	// CountFeedback returns how much feedback a box keeps; zero for a
	// box with none, or no box.
	CountFeedback(ctx context.Context, box string) (FeedbackKept, error)
}
