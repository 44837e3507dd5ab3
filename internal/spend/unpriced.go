package spend

import (
	"sort"
	"strings"
	"sync"
	"time"
)

// MaxUnpricedModels bounds the models Meter.Unpriced lists and warns of:
// a process names the first MaxUnpricedModels an upstream's answer
// named, and counts every other one under "other".
const MaxUnpricedModels = 100

// UnpricedModel is a model the price table does not name, seen by this
// process, for the owner's page and the log.
type UnpricedModel struct {
	// Model is the model's ID as calls named it ("other" for models past
	// MaxUnpricedModels, or that no answer named).
	Model string
	// As is the table's model it is charged as; Match says why: Family
	// (the newest of its family) or Unpriced (the table's UnpricedAs).
	As    string
	Match Match
	// Calls counts its calls since the process began; First is when the
	// first was settled.
	Calls int64
	First time.Time
}

// unpricedSet is the models the table does not name that calls used.
type unpricedSet struct {
	// mu guards byModel.
	mu      sync.Mutex
	byModel map[string]*UnpricedModel
}

// note counts a call of model, priced as res, and reports whether it is
// the first of that model (so the caller warns once). answered says an
// upstream's answer named model: only such a model takes one of the
// MaxUnpricedModels places, so that a box naming a new model on each
// call whose answer named none the broker read (cut off, or encoded)
// cannot take them all and leave a real unpriced model as "other". A
// model listed already is counted by its name however its call was
// read.
func (s *unpricedSet) note(model string, res Resolved, now time.Time, answered bool) (first bool) {
	model = strings.ToValidUTF8(model, "?")
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byModel == nil {
		s.byModel = map[string]*UnpricedModel{}
	}
	named := len(s.byModel)
	if s.byModel["other"] != nil {
		named--
	}
	u, ok := s.byModel[model]
	if !ok && (!answered || named >= MaxUnpricedModels) {
		model = "other"
		u, ok = s.byModel[model]
	}
	if !ok {
		u = &UnpricedModel{Model: model, As: res.As, Match: res.Match, First: now}
		s.byModel[model] = u
	}
	u.Calls++
	return !ok && model != "other"
}

// Unpriced lists the models calls used since the process began that the
// price table does not name, by model ID (at most MaxUnpricedModels, and
// "other"): what they were charged as, and how many calls. Nil when there
// were none.
func (m *Meter) Unpriced() []UnpricedModel {
	m.unpriced.mu.Lock()
	defer m.unpriced.mu.Unlock()
	var out []UnpricedModel
	for _, u := range m.unpriced.byModel {
		out = append(out, *u)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Model < out[j].Model })
	return out
}

// resolve finds model's price, and when the table does not name it,
// counts the call, warns of the model's first call in this process and
// counts it in the metrics.
func (m *Meter) resolve(model string, answered bool) Resolved {
	res := m.cfg.Prices.Resolve(model)
	if res.Match == Exact || model == "" {
		return res
	}
	if m.unpriced.note(model, res, m.cfg.Now(), answered) {
		msg := "spend: model not in the price table nor of a family in it; charged as --unpriced-as until a price file (--prices) names it"
		if res.Match == Family {
			msg = "spend: model not in the price table; charged as the newest model of its family until a price file (--prices) names it"
		}
		m.log.Warn(msg, "model", model, "priced_as", res.As, "prices_checked", m.cfg.Prices.Checked())
	}
	m.cfg.Metrics.UnpricedCall(model, res.As, res.Match.String(), answered)
	return res
}
