package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
)

// ReportFromStatus builds a declaration report from doc, what
// `chant workspace status --json` prints: the capabilities and the
// listing (less its cover) of the box block of the member named box. An
// empty box picks the one member with a box block, and is an error when
// there are several. A failure document is an error carrying chant's own
// message. The report carries every capability the block lists, whichever
// broker it names: the broker keeps those naming its own word.
func ReportFromStatus(doc []byte, box string) (Report, error) {
	var status struct {
		Error *struct {
			Code, Message string
		} `json:"error"`
		Members []struct {
			Name string `json:"name"`
			Box  *struct {
				Capabilities []Capability `json:"capabilities"`
				Listing      *struct {
					Published *bool   `json:"published"`
					Title     *string `json:"title"`
					Line      *string `json:"line"`
				} `json:"listing"`
			} `json:"box"`
		} `json:"members"`
	}
	if err := json.Unmarshal(doc, &status); err != nil {
		// A JSON value of the wrong kind is said in the document's words,
		// not as the Go type it could not fill.
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			where := "its top level"
			if te.Field != "" {
				where = fmt.Sprintf("its %q", te.Field)
			}
			return Report{}, fmt.Errorf("the status document is not what `chant workspace status --json` prints, an object with a \"members\" list: %s is a JSON %s", where, te.Value)
		}
		return Report{}, fmt.Errorf("the status document is not what `chant workspace status --json` prints: %w", err)
	}
	if status.Error != nil {
		return Report{}, fmt.Errorf("chant workspace status failed (%s): %s", status.Error.Code, status.Error.Message)
	}
	var withBox []string
	for _, m := range status.Members {
		if m.Box != nil {
			withBox = append(withBox, m.Name)
		}
	}
	sort.Strings(withBox)
	if box == "" {
		switch len(withBox) {
		case 0:
			return Report{}, errors.New("no member of the status document has a box block")
		case 1:
			box = withBox[0]
		default:
			return Report{}, fmt.Errorf("the status document has several boxes (%s): name one with --box", strings.Join(withBox, ", "))
		}
	}
	for _, m := range status.Members {
		if m.Name != box {
			continue
		}
		if m.Box == nil {
			return Report{}, fmt.Errorf("member %s has no box block", box)
		}
		r := Report{Capabilities: listed(m.Box.Capabilities)}
		if l := m.Box.Listing; l != nil {
			r.Listing = &Listing{Published: true}
			if l.Published != nil {
				r.Listing.Published = *l.Published
			}
			if l.Title != nil {
				r.Listing.Title = *l.Title
			}
			if l.Line != nil {
				r.Listing.Line = *l.Line
			}
		}
		return r, nil
	}
	if len(withBox) == 0 {
		return Report{}, fmt.Errorf("no member named %s in the status document", box)
	}
	return Report{}, fmt.Errorf("no member named %s in the status document (boxes: %s)", box, strings.Join(withBox, ", "))
}
