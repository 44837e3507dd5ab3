package ui_test

import (
	"bytes"
	"context"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/pool"
	"github.com/intentius/boxbroker/internal/store"
)

// Keys of the pool tests, recognisable wherever they might leak.
const (
	keyDefault = "sk-ant-api03-UIPOOL-DEFAULT-LEAKCANARY-0000"
	keyCooling = "sk-ant-api03-UIPOOL-COOLING-LEAKCANARY-1111"
	keyFailed  = "sk-ant-api03-UIPOOL-FAILEDK-LEAKCANARY-2222"
)

// keyedUpstream is a stand-in Anthropic API that answers 429 (retry-after
// one hour) to keyCooling, 401 to keyFailed, and 200 to any other key.
type keyedUpstream struct {
	mu   sync.Mutex // guards seen
	seen []string
}

func (u *keyedUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	k := r.Header.Get("X-Api-Key")
	u.mu.Lock()
	u.seen = append(u.seen, k)
	u.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	switch k {
	case keyCooling:
		w.Header().Set("Retry-After", "3600")
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = io.WriteString(w, `{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}`)
	case keyFailed:
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = io.WriteString(w, `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`)
	default:
		_, _ = io.WriteString(w, `{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"hi"}],"stop_reason":"end_turn","usage":{"input_tokens":3,"output_tokens":2}}`)
	}
}

// poolForm posts form to path with the session's CSRF secret.
func poolForm(t *testing.T, b *brokertest.Broker, cookie, csrf, path string, form url.Values) page {
	t.Helper()
	f := url.Values{"csrf": {csrf}}
	for k, v := range form {
		f[k] = v
	}
	return visit(t, b, "POST", path, cookie, f, nil)
}

// poolState is what the store holds of the pool: each named entry's
// weight, URL and sealed value, and the shared credential's sealed value.
func poolState(t *testing.T, b *brokertest.Broker) string {
	t.Helper()
	ctx := context.Background()
	es, err := b.Server.Store.PoolEntries(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var sb strings.Builder
	for _, e := range es {
		fmt.Fprintf(&sb, "%s %d %q %x %s\n", e.Name, e.Weight, e.URL, e.Sealed, e.UpdatedAt)
	}
	if c, err := b.Server.Store.Credential(ctx, pool.SharedID); err == nil {
		fmt.Fprintf(&sb, "shared %x\n", c.Sealed)
	}
	return sb.String()
}

// poolAudit are the admin's audit entries that name no box: the
// Credentials page's actions.
func poolAudit(t *testing.T, b *brokertest.Broker) []store.AuditEntry {
	t.Helper()
	var out []store.AuditEntry
	for _, e := range adminEntries(t, b, "") {
		if e.Box == "" {
			out = append(out, e)
		}
	}
	return out
}

// row is the Credentials page's table row of entry name.
func row(t *testing.T, body, name string) string {
	t.Helper()
	m := regexp.MustCompile(`(?s)<tr id="entry-` + regexp.QuoteMeta(name) + `".*?</tr>`).FindString(body)
	if m == "" {
		t.Fatalf("the Credentials page has no row for %s:\n%s", name, body)
	}
	return m
}

// TestUIPool_ShowsEntriesAndStates sets three entries from the page, has
// one answer 429 and one 401, and reads each one's state and counts on
// the Credentials page, with no value anywhere in it.
func TestUIPool_ShowsEntriesAndStates(t *testing.T) {
	up := &keyedUpstream{}
	b := brokertest.New(t, brokertest.Options{Anthropic: up})
	cookie, csrf := signedInForm(t, b)
	for _, f := range []url.Values{
		{"name": {"default"}, "value": {keyDefault}},
		{"name": {"cooling"}, "weight": {"3"}, "value": {keyCooling}},
		{"name": {"failing"}, "url": {b.Server.Config.AnthropicURL.String() + "/"}, "value": {keyFailed}},
	} {
		if p := poolForm(t, b, cookie, csrf, "/ui/credentials", f); p.status != http.StatusSeeOther {
			t.Fatalf("add %s = %d %s, want 303", f.Get("name"), p.status, p.body)
		}
	}
	es := []pool.Entry{{Name: pool.Default, Weight: 1}, {Name: "cooling", Weight: 3}, {Name: "failing", Weight: 1}}
	// Two boxes draw the 429, since one box's 429s cool an entry for
	// that box alone.
	used := map[string]bool{}
	for _, first := range []string{"cooling", "cooling", "failing"} {
		var box string
		for i := 0; i < 1000 && box == ""; i++ {
			if n := fmt.Sprintf("box-%d", i); pool.Order(n, es)[0] == first && !used[n] {
				box = n
			}
		}
		used[box] = true
		tok := b.AddBox(box)
		b.Report(tok, brokertest.Entry("inference", "agent"))
		resp := b.Do("POST", "/llm/anthropic/v1/messages", tok, []byte(`{"model":"claude-sonnet-4-5","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`),
			http.Header{"Anthropic-Version": {"2023-06-01"}, "Content-Type": {"application/json"}})
		if resp.StatusCode != 200 {
			t.Fatalf("box %s (first on %s) got %d %s, want 200 after failover", box, first, resp.StatusCode, resp.Body)
		}
	}
	p := visit(t, b, "GET", "/ui/credentials", cookie, nil, nil)
	if p.status != 200 {
		t.Fatalf("GET /ui/credentials = %d %s", p.status, p.body)
	}
	tests := []struct {
		entry string
		want  []string
	}{
		{pool.Default, []string{"API key", "the shared credential", "healthy", `<td class="num">3</td>`}},
		{"cooling", []string{"API key", `value="3"`, "cooling</span> until", "(in ", `<td class="num">2</td><td class="num">2</td><td class="num">0</td><td class="num">0</td><td class="num">2</td>`}},
		{"failing", []string{"API key", `value="` + b.Server.Config.AnthropicURL.String() + `"`, "failed</span> until", `<td class="num">1</td><td class="num">0</td><td class="num">0</td><td class="num">1</td><td class="num">1</td>`}},
	}
	for _, tt := range tests {
		r := row(t, p.body, tt.entry)
		for _, w := range tt.want {
			if !strings.Contains(r, w) {
				t.Errorf("row of %s = %s, want it to hold %q", tt.entry, r, w)
			}
		}
	}
	for _, k := range []string{keyDefault, keyCooling, keyFailed, "LEAKCANARY"} {
		if strings.Contains(p.body, k) {
			t.Errorf("the Credentials page holds a key's value")
		}
	}
	if !strings.Contains(visit(t, b, "GET", "/ui/", cookie, nil, nil).body, `href="/ui/credentials"`) {
		t.Errorf("the list page has no link to the Credentials page")
	}
}

// TestUIPool_FormsNeedCSRF is the cross-site attack on each of the
// Credentials page's forms: a post without the session's CSRF secret,
// with a wrong one, or from another origin is refused and changes
// nothing in the store or the audit log.
func TestUIPool_FormsNeedCSRF(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	b.SetCredential(pool.SharedID, keyDefault)
	cookie, csrf := signedInForm(t, b)
	if p := poolForm(t, b, cookie, csrf, "/ui/credentials", url.Values{"name": {"team-b"}, "weight": {"2"}, "value": {keyCooling}}); p.status != http.StatusSeeOther {
		t.Fatalf("add team-b = %d %s", p.status, p.body)
	}
	before, audited := poolState(t, b), len(poolAudit(t, b))
	posts := []struct {
		path string
		form url.Values
	}{
		{"/ui/credentials", url.Values{"name": {"mallory"}, "value": {"sk-ant-api03-mallory-0000000000"}}},
		{"/ui/credentials", url.Values{"name": {"team-b"}, "value": {"sk-ant-api03-mallory-0000000000"}}},
		{"/ui/credentials/team-b", url.Values{"weight": {"1000"}, "url": {"https://evil.example"}}},
		{"/ui/credentials/team-b/remove", url.Values{"confirm": {"team-b"}}},
		{"/ui/credentials/default/remove", url.Values{"confirm": {"default"}}},
	}
	for _, p := range posts {
		for _, tt := range []struct {
			name   string
			csrf   string
			origin string
		}{
			{"no csrf", "", ""},
			{"wrong csrf", strings.Repeat("0", len(csrf)), ""},
			{"other origin", csrf, "https://evil.example"},
		} {
			form := url.Values{}
			for k, v := range p.form {
				form[k] = v
			}
			if tt.csrf != "" {
				form.Set("csrf", tt.csrf)
			}
			h := map[string]string{}
			if tt.origin != "" {
				h["Origin"] = tt.origin
			}
			if got := visit(t, b, "POST", p.path, cookie, form, h); got.status != http.StatusForbidden {
				t.Errorf("POST %s (%s) = %d, want 403", p.path, tt.name, got.status)
			}
		}
		// Signed out, the same post is refused too.
		if got := visit(t, b, "POST", p.path, "", url.Values{"csrf": {csrf}}, nil); got.status != http.StatusUnauthorized {
			t.Errorf("POST %s with no session = %d, want 401", p.path, got.status)
		}
	}
	if after := poolState(t, b); after != before {
		t.Errorf("refused posts changed the pool:\nbefore %s\nafter  %s", before, after)
	}
	if n := len(poolAudit(t, b)); n != audited {
		t.Errorf("refused posts were audited as actions: %d entries, want %d", n, audited)
	}
}

// TestUIPool_AddChangeRemove adds an entry, changes its weight and URL
// (its sealed value kept, unopened), refuses its removal until its name is
// typed again, and audits each action with the admin as actor and no value.
func TestUIPool_AddChangeRemove(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	b.SetCredential(pool.SharedID, keyDefault)
	cookie, csrf := signedInForm(t, b)
	ctx := context.Background()
	if p := poolForm(t, b, cookie, csrf, "/ui/credentials", url.Values{"name": {"team-b"}, "weight": {"2"}, "value": {keyCooling}}); p.status != http.StatusSeeOther || p.header.Get("Location") != "/ui/credentials?done=set" {
		t.Fatalf("add team-b = %d %s (to %q), want 303 to the page", p.status, p.body, p.header.Get("Location"))
	}
	entry := func() store.PoolEntry {
		t.Helper()
		es, err := b.Server.Store.PoolEntries(ctx)
		if err != nil || len(es) != 1 {
			t.Fatalf("PoolEntries = %v, %v, want team-b alone", es, err)
		}
		return es[0]
	}
	set := entry()
	if v, err := b.Server.Keyring.Open(set.Sealed, pool.AD("team-b")); err != nil || string(v) != keyCooling {
		t.Fatalf("team-b's sealed value opens to %v, want the value typed", err)
	}
	if set.Weight != 2 || set.URL != "" {
		t.Errorf("team-b = weight %d URL %q, want 2 and the broker's", set.Weight, set.URL)
	}
	if p := visit(t, b, "GET", "/ui/credentials?done=set", cookie, nil, nil); !strings.Contains(p.body, "its value is not shown again") {
		t.Errorf("the page after adding has no notice: %s", p.body)
	}

	if p := poolForm(t, b, cookie, csrf, "/ui/credentials/team-b", url.Values{"weight": {"7"}, "url": {"https://llm.example.com/anthropic/"}}); p.status != http.StatusSeeOther {
		t.Fatalf("change team-b = %d %s, want 303", p.status, p.body)
	}
	changed := entry()
	if changed.Weight != 7 || changed.URL != "https://llm.example.com/anthropic" || !bytes.Equal(changed.Sealed, set.Sealed) {
		t.Errorf("team-b after the change = weight %d URL %q (value kept %t), want 7, https://llm.example.com/anthropic, kept",
			changed.Weight, changed.URL, bytes.Equal(changed.Sealed, set.Sealed))
	}
	if p := poolForm(t, b, cookie, csrf, "/ui/credentials/nobody", url.Values{"weight": {"2"}}); p.status != http.StatusNotFound {
		t.Errorf("change of an entry not in the pool = %d, want 404", p.status)
	}

	if p := visit(t, b, "GET", "/ui/credentials/team-b/remove", cookie, nil, nil); p.status != 200 || !strings.Contains(p.body, "Type <b>team-b</b> to confirm") {
		t.Errorf("GET the removal's confirmation = %d %s", p.status, p.body)
	}
	if p := poolForm(t, b, cookie, csrf, "/ui/credentials/team-b/remove", url.Values{"confirm": {"team"}}); p.status != http.StatusBadRequest || !strings.Contains(p.body, "nothing was removed") {
		t.Errorf("remove with a wrong confirmation = %d %s, want 400, nothing removed", p.status, p.body)
	}
	entry()
	if p := poolForm(t, b, cookie, csrf, "/ui/credentials/team-b/remove", url.Values{"confirm": {"team-b"}}); p.status != http.StatusSeeOther {
		t.Fatalf("remove team-b = %d %s, want 303", p.status, p.body)
	}
	if es, _ := b.Server.Store.PoolEntries(ctx); len(es) != 0 {
		t.Errorf("after removal the pool holds %v", es)
	}
	if p := poolForm(t, b, cookie, csrf, "/ui/credentials/team-b/remove", url.Values{"confirm": {"team-b"}}); p.status != http.StatusNotFound || !strings.Contains(p.body, "no entry named team-b") {
		t.Errorf("remove it again = %d %s, want 404", p.status, p.body)
	}
	if p := poolForm(t, b, cookie, csrf, "/ui/credentials/default/remove", url.Values{"confirm": {"default"}}); p.status != http.StatusSeeOther {
		t.Fatalf("remove default = %d %s, want 303", p.status, p.body)
	}
	if _, err := b.Server.Store.Credential(ctx, pool.SharedID); err == nil {
		t.Errorf("removing the default entry left the shared credential")
	}

	var got []string
	for _, e := range poolAudit(t, b) {
		got = append(got, e.Route+": "+e.Message)
	}
	want := []string{
		"/ui/credentials/{entry}/remove: removed credential pool entry default",
		"/ui/credentials/{entry}/remove: removed credential pool entry team-b",
		"/ui/credentials/{entry}: changed credential pool entry team-b to weight 7, URL https://llm.example.com/anthropic",
		"/ui/credentials: set credential pool entry team-b (API key, weight 2, URL the broker's)",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("audited actions (newest first):\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestUIPool_BadInputRefused sends each kind of bad entry: each is
// refused with a clear message that repeats neither the value nor the
// URL typed (which could hold a key), and nothing is stored or audited.
func TestUIPool_BadInputRefused(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	cookie, csrf := signedInForm(t, b)
	const value = "sk-ant-api03-BADINPUT-LEAKCANARY-3333"
	if p := poolForm(t, b, cookie, csrf, "/ui/credentials", url.Values{"name": {"kept"}, "value": {"sk-ant-api03-kept-000000000000"}}); p.status != http.StatusSeeOther {
		t.Fatalf("add kept = %d %s", p.status, p.body)
	}
	before, audited := poolState(t, b), len(poolAudit(t, b))
	tests := []struct {
		name, path string
		form       url.Values
		want       string
	}{
		{"weight 0", "/ui/credentials", url.Values{"name": {"b"}, "weight": {"0"}, "value": {value}}, "weight is a whole number from 1 to 1000"},
		{"weight over the bound", "/ui/credentials", url.Values{"name": {"b"}, "weight": {"1001"}, "value": {value}}, "weight is a whole number from 1 to 1000"},
		{"weight not a number", "/ui/credentials", url.Values{"name": {"b"}, "weight": {"lots"}, "value": {value}}, "weight is a whole number from 1 to 1000"},
		{"weight holds the value", "/ui/credentials", url.Values{"name": {"b"}, "weight": {value}, "value": {"x"}}, "weight is a whole number from 1 to 1000"},
		{"name", "/ui/credentials", url.Values{"name": {"Team B"}, "value": {value}}, "name is 1 to 64 characters"},
		{"name holds the value", "/ui/credentials", url.Values{"name": {value}, "value": {value}}, "holds a credential"},
		{"name is a key", "/ui/credentials", url.Values{"name": {"sk-ant-oat01-leakcanary-4444"}, "value": {"x"}}, "holds a credential"},
		{"URL not http", "/ui/credentials", url.Values{"name": {"b"}, "url": {"ftp://LEAKCANARY.example"}, "value": {value}}, "The entry's URL is refused"},
		{"URL with a password", "/ui/credentials", url.Values{"name": {"b"}, "url": {"https://me:LEAKCANARY@llm.example"}, "value": {value}}, "The entry's URL is refused"},
		{"URL with a query", "/ui/credentials", url.Values{"name": {"b"}, "url": {"https://llm.example/?key=LEAKCANARY"}, "value": {value}}, "The entry's URL is refused"},
		{"URL not a URL", "/ui/credentials", url.Values{"name": {"b"}, "url": {"%%LEAKCANARY"}, "value": {value}}, "The entry's URL is refused"},
		{"URL holds the value", "/ui/credentials", url.Values{"name": {"b"}, "url": {"https://llm.example/" + value}, "value": {value}}, "holds a credential"},
		{"URL holds a key", "/ui/credentials/kept", url.Values{"url": {"https://llm.example/sk-ant-api03-LEAKCANARY"}}, "holds a credential"},
		{"changed URL not http", "/ui/credentials/kept", url.Values{"url": {"gopher://LEAKCANARY"}}, "The entry's URL is refused"},
		{"changed weight", "/ui/credentials/kept", url.Values{"weight": {"-1"}}, "weight is a whole number from 1 to 1000"},
		{"empty value", "/ui/credentials", url.Values{"name": {"b"}}, "value is empty"},
		{"value with a line break", "/ui/credentials", url.Values{"name": {"b"}, "value": {value + "\nLEAKCANARY"}}, "control character"},
		{"default with a weight", "/ui/credentials", url.Values{"name": {"default"}, "weight": {"2"}, "value": {value}}, "The default entry is the shared credential"},
		{"default with a URL", "/ui/credentials", url.Values{"name": {"default"}, "url": {"https://LEAKCANARY.example"}, "value": {value}}, "The default entry is the shared credential"},
		{"default changed", "/ui/credentials/default", url.Values{"weight": {"2"}}, "The default entry is the shared credential"},
		{"bad entry in the path", "/ui/credentials/Bad..Name", url.Values{"weight": {"2"}}, "name is 1 to 64 characters"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := poolForm(t, b, cookie, csrf, tt.path, tt.form)
			if p.status != http.StatusBadRequest || !strings.Contains(html.UnescapeString(p.body), tt.want) {
				t.Errorf("POST %s = %d %s, want 400 holding %q", tt.path, p.status, p.body, tt.want)
			}
			if strings.Contains(p.body, "LEAKCANARY") || strings.Contains(strings.ToLower(p.body), "leakcanary") {
				t.Errorf("the refusal repeats what was typed: %s", p.body)
			}
		})
	}
	if after := poolState(t, b); after != before {
		t.Errorf("refused posts changed the pool:\nbefore %s\nafter  %s", before, after)
	}
	if n := len(poolAudit(t, b)); n != audited {
		t.Errorf("refused posts were audited: %d entries, want %d", n, audited)
	}
}

// TestUIPool_ValueNeverShown is the leak attack: recognisable values set
// from the page (a named entry, the shared credential, one replaced)
// appear in no page the owner's page serves afterwards, nor in the
// audit log or the server's logs.
func TestUIPool_ValueNeverShown(t *testing.T) {
	var logs lockedBuffer
	b := brokertest.New(t, brokertest.Options{Logs: &logs})
	cookie, csrf := signedInForm(t, b)
	tok := b.AddBox("alpha")
	b.Report(tok, brokertest.Entry("inference", "agent"))
	values := []string{keyDefault, keyCooling, keyFailed}
	var answers []page
	for _, f := range []url.Values{
		{"name": {"default"}, "value": {keyDefault}},
		{"name": {"team-b"}, "weight": {"4"}, "url": {"https://llm.example.com"}, "value": {keyCooling}},
		{"name": {"team-b"}, "weight": {"5"}, "value": {keyFailed}},
	} {
		p := poolForm(t, b, cookie, csrf, "/ui/credentials", f)
		if p.status != http.StatusSeeOther {
			t.Fatalf("add %s = %d %s", f.Get("name"), p.status, p.body)
		}
		answers = append(answers, p)
	}
	answers = append(answers,
		poolForm(t, b, cookie, csrf, "/ui/credentials", url.Values{"name": {"team-c"}, "url": {"ftp://x"}, "value": {keyCooling}}),
		poolForm(t, b, cookie, csrf, "/ui/credentials", url.Values{"name": {"team-c"}, "weight": {"0"}, "value": {keyCooling}}),
		poolForm(t, b, cookie, csrf, "/ui/credentials/team-b", url.Values{"weight": {"6"}}),
	)
	for _, path := range []string{"/ui/", "/ui/credentials", "/ui/credentials?done=set", "/ui/credentials/team-b/remove",
		"/ui/credentials/default/remove", "/ui/boxes/alpha", "/ui/enrol", "/ui/?state=ok"} {
		p := visit(t, b, "GET", path, cookie, nil, nil)
		if p.status != 200 {
			t.Errorf("GET %s = %d", path, p.status)
		}
		answers = append(answers, p)
	}
	for _, p := range answers {
		for _, v := range values {
			if strings.Contains(p.body, v) || strings.Contains(fmt.Sprint(p.header), v) {
				t.Errorf("an answer of the owner's page holds a value set on it: %d %s", p.status, p.body)
			}
		}
	}
	if p := visit(t, b, "GET", "/ui/credentials", cookie, nil, nil); !strings.Contains(row(t, p.body, "team-b"), `value="6"`) {
		t.Errorf("the page does not show team-b's new weight")
	}
	es, err := b.Server.Store.ListAudit(context.Background(), store.AuditQuery{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range es {
		for _, v := range values {
			if strings.Contains(fmt.Sprintf("%+v", e), v) {
				t.Errorf("an audit entry holds a value: %+v", e)
			}
		}
	}
	for _, v := range values {
		if strings.Contains(logs.String(), v) {
			t.Errorf("the server's logs hold a value set on the page")
		}
	}
}

// lockedBuffer is a bytes.Buffer safe for the server's concurrent logs.
type lockedBuffer struct {
	mu sync.Mutex // guards b
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestUIPool_Browser runs the Credentials page in headless Chromium: from
// the bar's link, it adds an entry with its value typed into the password
// field, changes its weight on its row, and removes it through the
// confirmation page; no page's HTML, read after each step, holds a value.
func TestUIPool_Browser(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	b.SetCredential(pool.SharedID, keyDefault)
	ctx := context.Background()
	tctx, _ := startChromium(t, "the Credentials page")
	html := func(what string) string {
		t.Helper()
		h, err := chromedp.Run(tctx, chromedp.OuterHTML(chromedp.CSS("html")))
		if err != nil {
			t.Fatalf("browser: read %s's HTML: %v", what, err)
		}
		for _, v := range []string{keyDefault, keyCooling, b.AdminToken} {
			if strings.Contains(h, v) {
				t.Errorf("%s's HTML holds a value (%d bytes, starting %.6q)", what, len(v), v)
			}
		}
		return h
	}
	weight := func() int {
		t.Helper()
		es, err := b.Server.Store.PoolEntries(ctx)
		if err != nil || len(es) != 1 || es[0].Name != "team-b" {
			t.Fatalf("PoolEntries = %v, %v, want team-b alone", es, err)
		}
		return es[0].Weight
	}
	if err := chromedp.Do(tctx,
		chromedp.Navigate(b.AdminURL+"/ui/"),
		chromedp.SendKeys(chromedp.ID("token"), b.AdminToken),
		chromedp.Click(chromedp.ID("signin")),
		chromedp.WaitVisible(chromedp.CSS("table.list")),
		chromedp.Click(chromedp.CSS(`header a[href="/ui/credentials"]`)),
		chromedp.WaitVisible(chromedp.ID("pool")),
	); err != nil {
		t.Fatalf("browser: sign in and open Credentials: %v", err)
	}
	if h := html("the Credentials page"); !strings.Contains(h, `id="entry-default"`) {
		t.Errorf("the Credentials page shows no default entry:\n%s", h)
	}
	if err := chromedp.Do(tctx,
		chromedp.SendKeys(chromedp.ID("entry-name"), "team-b"),
		chromedp.SetValue(chromedp.ID("entry-weight"), "2"),
		chromedp.SendKeys(chromedp.ID("entry-value"), keyCooling),
		chromedp.Click(chromedp.ID("add-entry")),
		chromedp.WaitVisible(chromedp.ID("notice")),
	); err != nil {
		t.Fatalf("browser: add team-b: %v", err)
	}
	if h := html("the page after adding"); !strings.Contains(h, `id="entry-team-b"`) {
		t.Errorf("the page after adding shows no team-b:\n%s", h)
	}
	if w := weight(); w != 2 {
		t.Errorf("team-b added with weight %d, want 2", w)
	}
	if err := chromedp.Do(tctx,
		chromedp.SetValue(chromedp.CSS(`#edit-team-b input[name="weight"]`), "5"),
		chromedp.Submit(chromedp.CSS(`#edit-team-b input[name="weight"]`)),
		chromedp.WaitVisible(chromedp.Search(`//p[@id="notice" and contains(., "value is kept")]`)),
	); err != nil {
		t.Fatalf("browser: change team-b's weight: %v", err)
	}
	html("the page after the change")
	if w := weight(); w != 5 {
		t.Errorf("team-b's weight after the change = %d, want 5", w)
	}
	if err := chromedp.Do(tctx,
		chromedp.Click(chromedp.CSS(`a[href="/ui/credentials/team-b/remove"]`)),
		chromedp.WaitVisible(chromedp.ID("confirm")),
		chromedp.SendKeys(chromedp.ID("confirm"), "team-b"),
		chromedp.Click(chromedp.ID("remove-entry")),
		chromedp.WaitVisible(chromedp.Search(`//p[@id="notice" and contains(., "removed")]`)),
	); err != nil {
		t.Fatalf("browser: remove team-b: %v", err)
	}
	if h := html("the page after removing"); strings.Contains(h, `id="entry-team-b"`) {
		t.Errorf("the page after removing still shows team-b")
	}
	if es, _ := b.Server.Store.PoolEntries(ctx); len(es) != 0 {
		t.Errorf("after removal in the browser the pool holds %v", es)
	}
	png, err := chromedp.Run(tctx, chromedp.FullScreenshot(100))
	if err != nil || !bytes.HasPrefix(png, []byte("\x89PNG")) {
		t.Fatalf("browser: screenshot: %v", err)
	}
	out := filepath.Join(t.TempDir(), "credentials.png")
	if err := os.WriteFile(out, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s (%d bytes)", out, len(png))
}
