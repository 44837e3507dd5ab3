package cloud

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"slices"
	"strings"
)

// BedrockBetas are the anthropic-beta values sent to Amazon Bedrock when
// the credential names no "betas" of its own: the ones Bedrock documents
// for its Claude models. Bedrock answers any other with a 400 ("invalid
// beta flag"), and Claude Code sends several it does not know
// (claude-code-20250219, oauth-2025-04-20,
// fine-grained-tool-streaming-2025-05-14, mcp-servers-…,
// extended-cache-ttl-2025-04-11, prompt-caching-scope-…), so any other
// value is dropped before the call. A model may take fewer than these
// (the Claude Opus 4.7 models and later refuse nearly all): such a
// refusal is met by the fallback (Client.betaRefused).
var BedrockBetas = []string{
	"computer-use-2024-10-22",
	"computer-use-2025-01-24",
	"computer-use-2025-11-24",
	"token-efficient-tools-2025-02-19",
	"interleaved-thinking-2025-05-14",
	"output-128k-2025-02-19",
	"dev-full-thinking-2025-05-14",
	"context-1m-2025-08-07",
	"context-management-2025-06-27",
	"effort-2025-11-24",
	"tool-search-tool-2025-10-19",
	"tool-examples-2025-10-29",
}

// AllBetas, as a credential's only "betas" entry, passes every beta on.
const AllBetas = "*"

// maxBetas bounds a credential's "betas".
const maxBetas = 128

// Asked returns the betas a call asks for, as the broker reads them
// wherever it reads them (the spend meter pricing the call, and the
// cloud paths sending it): the values of its anthropic-beta header
// (header: the header's values, each a comma-separated list), then those
// of its body's anthropic_beta (body, as BodyBetas reads it), each once,
// in order. A cloud credential's call sends allowedBetas of these, so
// that nothing is sent that was not priced.
func Asked(header, body []string) []string {
	if len(header) == 0 && len(body) == 0 {
		return nil
	}
	var list []string
	var seen map[string]bool // past a few betas, for the duplicates
	add := func(b string) {
		b = strings.TrimSpace(b)
		if b == "" {
			return
		}
		if seen == nil && len(list) >= 16 {
			seen = make(map[string]bool, 2*len(list))
			for _, x := range list {
				seen[x] = true
			}
		}
		if seen[b] || seen == nil && slices.Contains(list, b) {
			return
		}
		if seen != nil {
			seen[b] = true
		}
		list = append(list, b)
	}
	for _, v := range header {
		for _, b := range strings.Split(v, ",") {
			add(b)
		}
	}
	for _, b := range body {
		add(b)
	}
	return list
}

// BodyBetas reads raw, the JSON value of a body's anthropic_beta member:
// a list of strings (null is none). Its error says only that it is not.
func BodyBetas(raw []byte) ([]string, error) {
	var list []string
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, errors.New("anthropic_beta is not a list of strings")
	}
	return list, nil
}

// IsBodyBeta reports whether a body member's name is read as
// anthropic_beta: the name itself, or the name in any other case (which
// a decoder matching names case-insensitively would read as it).
func IsBodyBeta(name string) bool { return strings.EqualFold(name, "anthropic_beta") }

// Context1M reports whether betas (as Asked returns them) ask for the
// 1M-token context window: any of them names context-1m, in any case.
func Context1M(betas []string) bool {
	for _, b := range betas {
		if strings.Contains(strings.ToLower(b), "context-1m") {
			return true
		}
	}
	return false
}

// sentBetas are the betas a call paid with c sends its cloud: those it
// asks for (Asked) that c lets through (allowedBetas).
func (c *Credential) sentBetas(call Call, body []string) []string {
	return c.allowedBetas(Asked(call.Beta, body))
}

// allowedBetas returns the betas of list the credential lets through to
// its cloud: those its "betas" names ("*" being all), or without it
// BedrockBetas on Bedrock and every one on Vertex AI.
func (c *Credential) allowedBetas(list []string) []string {
	allow := c.Betas
	if allow == nil {
		if c.Kind != KindBedrock {
			return list
		}
		allow = BedrockBetas
	}
	if slices.Contains(allow, AllBetas) {
		return list
	}
	var out []string
	for _, b := range list {
		if slices.Contains(allow, b) {
			out = append(out, b)
		}
	}
	return out
}

// betaRefused reports whether a cloud's 400 answer b says the betas the
// call sent (sent, in the body sent) are refused. Only the answer's
// messages are read, and a message counts only when its words are the
// cloud's own, never a name the box chose: a cloud's schema error
// repeats an unknown member's name, so a box could otherwise name a
// member after a refusal and have betas taken from every call sending
// the same set. A message counts when it is
//
//   - Bedrock's refusal, whole: "invalid beta flag" (after "The model
//     returned the following errors: "), which names no value; or
//   - a message naming the anthropic-beta header (or anthropic_beta
//     member) as unexpected, invalid or unsupported, as the Anthropic
//     API and Vertex AI say it, that names one of sent as a word of its
//     own ("Unexpected value(s) `x` for the `anthropic-beta` header");
//
// and no member name anywhere in body holds those words or a value of
// sent (the body's own anthropic_beta member, which the broker wrote,
// aside).
func betaRefused(status int, b []byte, sent []string, body []byte) bool {
	if status != 400 || len(sent) == 0 {
		return false
	}
	var msg struct {
		Message  string `json:"message"`
		MessageU string `json:"Message"`
		Error    struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	var msgs []string
	if json.Unmarshal(b, &msg) == nil {
		msgs = append(msgs, msg.Message, msg.MessageU, msg.Error.Message)
	} else {
		// Vertex AI may answer a list of Google errors.
		var list []struct {
			Error struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if json.Unmarshal(b, &list) == nil {
			for _, e := range list {
				msgs = append(msgs, e.Error.Message)
			}
		}
	}
	refused := false
	for _, m := range msgs {
		if refusesBetas(m, sent) {
			refused = true
			break
		}
	}
	return refused && !namesChosen(body, sent)
}

// bedrockRefusal is Bedrock's message refusing a beta, and bedrockModel
// what may come before it.
const (
	bedrockRefusal = "invalid beta flag"
	bedrockModel   = "the model returned the following errors:"
)

// refusesBetas reports whether the cloud's message m refuses betas of
// sent (see betaRefused), its member names aside.
func refusesBetas(m string, sent []string) bool {
	m = strings.ToLower(strings.TrimSpace(m))
	if strings.TrimSpace(strings.TrimPrefix(m, bedrockModel)) == bedrockRefusal {
		return true
	}
	if !strings.Contains(m, "anthropic-beta") && !strings.Contains(m, "anthropic_beta") {
		return false
	}
	if !strings.Contains(m, "unexpected") && !strings.Contains(m, "invalid") && !strings.Contains(m, "unsupported") {
		return false
	}
	for _, v := range sent {
		if namesWord(m, strings.ToLower(v)) {
			return true
		}
	}
	return false
}

// namesWord reports whether s holds w as a word of its own: not within a
// longer run of the letters, digits and "-_." betas are written with.
func namesWord(s, w string) bool {
	if w == "" {
		return false
	}
	for i := 0; ; {
		j := strings.Index(s[i:], w)
		if j < 0 {
			return false
		}
		j += i
		end := j + len(w)
		if (j == 0 || !betaByte(s[j-1])) && (end == len(s) || !betaByte(s[end])) {
			return true
		}
		i = j + 1
	}
}

func betaByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.'
}

// namesChosen reports whether any member name in body, at any depth,
// holds (in any case) the words refusesBetas reads or a value of sent:
// a name the box chose that a cloud's message could repeat. The body's
// top-level anthropic_beta, which the broker writes, is not the box's
// name. A body that is not JSON counts as naming them.
func namesChosen(body []byte, sent []string) bool {
	var v any
	if json.Unmarshal(body, &v) != nil {
		return true
	}
	words := []string{"anthropic-beta", "anthropic_beta", bedrockRefusal}
	for _, s := range sent {
		words = append(words, strings.ToLower(s))
	}
	var walk func(v any, top bool) bool
	walk = func(v any, top bool) bool {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				if !(top && k == "anthropic_beta") {
					lk := strings.ToLower(k)
					for _, w := range words {
						if strings.Contains(lk, w) {
							return true
						}
					}
				}
				if walk(e, false) {
					return true
				}
			}
		case []any:
			for _, e := range x {
				if walk(e, false) {
					return true
				}
			}
		}
		return false
	}
	return walk(v, true)
}

// maxNoBetas bounds the models remembered as taking no betas: past it,
// the memory starts anew.
const maxNoBetas = 1024

// noBetaKey is a model of a credential's cloud and the betas a call sent
// it. The betas are part of the key so that what one box sends never
// takes betas from another's calls: a box naming a beta the model
// refuses has only calls sending that same set made without betas.
type noBetaKey struct {
	cred  [32]byte
	model string
	betas [32]byte
}

// betaKey is the noBetaKey of a call to model, paid with credential c,
// sending betas (as the cloud gets them, in order).
func betaKey(c *Credential, model string, betas []string) noBetaKey {
	h := sha256.New()
	for _, b := range betas {
		h.Write([]byte(b))
		h.Write([]byte{0})
	}
	h.Write([]byte{1})
	k := noBetaKey{cred: credKey(c), model: model}
	h.Sum(k.betas[:0])
	return k
}

// takesNoBetas reports whether the cloud refused betas for this model of
// this credential before.
func (cl *Client) takesNoBetas(k noBetaKey) bool {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	_, ok := cl.noBetas[k]
	return ok
}

// rememberNoBetas remembers that the model of k takes no betas, and says
// so once in the log. A cloud path calls it when a call it made again
// without betas, after the cloud refused them (betaRefused), is
// answered: a call refused again without betas was not refused for
// them, and nothing is remembered.
func (cl *Client) rememberNoBetas(k noBetaKey, kind string) {
	cl.mu.Lock()
	if cl.noBetas == nil || len(cl.noBetas) >= maxNoBetas {
		cl.noBetas = make(map[noBetaKey]struct{})
	}
	cl.noBetas[k] = struct{}{}
	cl.mu.Unlock()
	cl.logger().Info("cloud: the model refused the call's betas; the call is made again without any, and this model gets none from now on",
		"kind", kind, "model", k.model)
}
