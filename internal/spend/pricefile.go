package spend

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/intentius/boxbroker/internal/filelock"
)

// MaxPricesFile bounds a price file's size.
const MaxPricesFile = 1 << 20

// LoadPrices reads a price file over the defaults: a JSON object whose
// keys are model IDs and whose values are prices ({"input", "output",
// and optionally "cache_write", "cache_write_1h", "cache_read",
// "long_context", "long_context_above"}, in dollars per million tokens;
// "web_search", in dollars per thousand searches; "context", in tokens;
// "inference_geo_us", the multiplier of its token rates for a call whose
// inference runs only in the US)
// or null. A price replaces the default of the same ID or adds one; null
// removes the default, leaving that model unpriced (Resolve does not
// price it by its family). Two keys are not
// model IDs: "$checked", the date (YYYY-MM-DD) its prices were checked,
// which replaces the built-in table's, and "$source", where. Omitted cache rates
// are 1.25×, 2× and 0.1× input; an omitted web_search is DefaultWebSearch;
// an omitted context is the default's of the same ID, or Context1M for a
// model the defaults do not have, and an omitted inference_geo_us the
// default's of the same ID, or DefaultGeoUS. An empty path is the defaults.
func LoadPrices(path string) (*Prices, error) {
	if path == "" {
		return DefaultPrices(), nil
	}
	// Opened as filelock.OpenRead opens it: a link is followed, and a
	// FIFO or a device is refused, never waited on for a writer (serve
	// hung at start) nor read without end.
	f, err := filelock.OpenRead(path)
	if errors.Is(err, filelock.ErrNotRegular) {
		return nil, fmt.Errorf("prices %s: %w", path, err)
	}
	if err != nil {
		return nil, fmt.Errorf("prices: %w", err)
	}
	defer f.Close()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(io.LimitReader(f, MaxPricesFile+1)); err != nil {
		return nil, fmt.Errorf("prices %s: %w", path, err)
	}
	if buf.Len() > MaxPricesFile {
		return nil, fmt.Errorf("prices %s: over %d bytes", path, MaxPricesFile)
	}
	p, err := ParsePrices(buf.Bytes())
	if err != nil {
		return nil, fmt.Errorf("prices %s: %w", path, err)
	}
	p.path = path
	return p, nil
}

// ParsePrices reads a price file's contents over the defaults; see
// LoadPrices. It reports every problem at once.
func ParsePrices(b []byte) (*Prices, error) {
	m, md := builtinPrices()
	fmd, err := parseInto(m, b)
	if err != nil {
		return nil, err
	}
	if fmd.checked != "" {
		md.checked, md.source = fmd.checked, fmd.source
	}
	md.removed = fmd.removed
	return newPrices(m, md), nil
}

// parseInto reads a price file's contents into m, and returns what the
// file says of itself: its "$checked" date (YYYY-MM-DD) and "$source", the
// only keys beginning with "$" a price file may have.
func parseInto(m map[string]Price, b []byte) (meta, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return meta{}, errors.New("not a JSON object of model IDs to prices")
	}
	var md meta
	var problems []string
	ids := make([]string, 0, len(raw))
	for id := range raw {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		v := raw[id]
		if strings.HasPrefix(id, "$") {
			var s string
			err := json.Unmarshal(v, &s)
			switch {
			case id != "$checked" && id != "$source":
				problems = append(problems, fmt.Sprintf("%q is not a model ID (the only keys beginning with $ are $checked and $source)", id))
			case err != nil || len(s) > 500:
				problems = append(problems, fmt.Sprintf("%s must be a string", id))
			case id == "$source":
				md.source = s
			default:
				if _, err := time.Parse(time.DateOnly, s); err != nil {
					problems = append(problems, fmt.Sprintf("$checked %q is not a date written YYYY-MM-DD", s))
				}
				md.checked = s
			}
			continue
		}
		if id == "" || strings.ContainsAny(id, " \t\r\n") || len(id) > 200 {
			problems = append(problems, fmt.Sprintf("model ID %q is not a model ID", id))
			continue
		}
		if string(bytes.TrimSpace(v)) == "null" {
			delete(m, id)
			md.removed = append(md.removed, id)
			continue
		}
		pr, err := parsePrice(v)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", id, err))
			continue
		}
		if pr.Context == 0 {
			pr.Context = Context1M
			if d, ok := m[id]; ok {
				pr.Context = d.Context
			}
		}
		if pr.GeoUS == 0 { // omitted
			pr.GeoUS = DefaultGeoUS
			if d, ok := m[id]; ok {
				pr.GeoUS = d.GeoUS
			}
		}
		m[id] = pr
	}
	if len(problems) > 0 {
		return meta{}, errors.New(strings.Join(problems, "; "))
	}
	return md, nil
}

type ratesFile struct {
	Input        *float64 `json:"input"`
	Output       *float64 `json:"output"`
	CacheWrite   *float64 `json:"cache_write"`
	CacheWrite1h *float64 `json:"cache_write_1h"`
	CacheRead    *float64 `json:"cache_read"`
}

func parsePrice(v json.RawMessage) (Price, error) {
	var f struct {
		ratesFile
		LongContext      *ratesFile `json:"long_context"`
		LongContextAbove int64      `json:"long_context_above"`
		WebSearch        *float64   `json:"web_search"`
		Context          int64      `json:"context"`
		GeoUS            *float64   `json:"inference_geo_us"`
	}
	dec := json.NewDecoder(bytes.NewReader(v))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return Price{}, fmt.Errorf("not a price (%v)", err)
	}
	r, err := f.ratesFile.rates()
	if err != nil {
		return Price{}, err
	}
	p := Price{Rates: r, WebSearch: DefaultWebSearch, Context: f.Context}
	if f.WebSearch != nil {
		if math.IsNaN(*f.WebSearch) || *f.WebSearch < 0 || *f.WebSearch > 1e6 {
			return Price{}, errors.New("web_search must be a number from 0 to 1000000")
		}
		p.WebSearch = *f.WebSearch
	}
	if f.GeoUS != nil {
		if math.IsNaN(*f.GeoUS) || *f.GeoUS < 1 || *f.GeoUS > 100 {
			return Price{}, errors.New("inference_geo_us must be a number from 1 to 100")
		}
		p.GeoUS = *f.GeoUS
	}
	if f.Context < 0 || f.Context > 1e9 {
		return Price{}, errors.New("context must be a number of tokens from 1 to 1000000000")
	}
	if f.LongContext != nil {
		lr, err := f.LongContext.rates()
		if err != nil {
			return Price{}, fmt.Errorf("long_context: %w", err)
		}
		if f.LongContextAbove <= 0 {
			return Price{}, errors.New("long_context needs long_context_above, a number of input tokens")
		}
		p.LongContext, p.LongContextAbove = &lr, f.LongContextAbove
	} else if f.LongContextAbove != 0 {
		return Price{}, errors.New("long_context_above without long_context")
	}
	return p, nil
}

func (f ratesFile) rates() (Rates, error) {
	if f.Input == nil || f.Output == nil {
		return Rates{}, errors.New("input and output are required, in dollars per million tokens")
	}
	var r Rates
	for _, x := range []struct {
		name string
		v    *float64
		to   *float64
	}{{"input", f.Input, &r.Input}, {"output", f.Output, &r.Output}, {"cache_write", f.CacheWrite, &r.CacheWrite},
		{"cache_write_1h", f.CacheWrite1h, &r.CacheWrite1h}, {"cache_read", f.CacheRead, &r.CacheRead}} {
		if x.v == nil {
			continue
		}
		if math.IsNaN(*x.v) || *x.v < 0 || *x.v > 1e6 {
			return Rates{}, fmt.Errorf("%s must be a number from 0 to 1000000", x.name)
		}
		*x.to = *x.v
	}
	// Unset cache rates follow input; an explicit 0 is kept.
	if f.CacheWrite == nil {
		r.CacheWrite = round6(r.Input * 1.25)
	}
	if f.CacheWrite1h == nil {
		r.CacheWrite1h = round6(r.Input * 2)
	}
	if f.CacheRead == nil {
		r.CacheRead = round6(r.Input * 0.1)
	}
	return r, nil
}
